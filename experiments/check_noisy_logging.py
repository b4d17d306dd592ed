#!/usr/bin/env python3
"""Check that a noisy_logging.sh run went through end to end; TAP on stdout.

A smoke test of the pipeline, not of the numbers: every VM wrote its plan
and every cell of it, sysbench reported every run, the charging modes did
what they are (`off` charges nothing, `process` charges), and the report,
the summary and the plots exist. The numbers are the report's business.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Callable
from pathlib import Path

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


class Tap:
    def __init__(self) -> None:
        self.n = 0
        self.failed = 0

    def check(self, name: str, test: Callable[[], bool | str]) -> None:
        """test returns True, or False / a reason; an exception fails too."""
        self.n += 1
        try:
            result = test()
        except Exception as e:  # a missing file or a malformed one
            result = f"{type(e).__name__}: {e}"
        if result is True:
            print(f"ok {self.n} {name}")
        else:
            self.failed += 1
            print(f"not ok {self.n} {name}" + (f" # {result}" if isinstance(result, str) else ""))


def check_vm(tap: Tap, d: Path) -> None:
    meta = json.loads((d / "meta.json").read_text())
    name = d.name
    cells = meta.get("cells")
    tap.check(f"{name}: meta.json lists the planned cells", lambda: isinstance(cells, dict))
    if not isinstance(cells, dict):
        return
    runs_per_cell = meta["sysbench_runs"]
    patched = "patched" in name  # patched-v1, overhead-patched-v2, stock-v2, ...
    tap.check(
        f"{name}: meta.json says the kernel {'has' if patched else 'lacks'} cpu.cfs.borrowing_us",
        lambda: meta.get("borrowing") is patched or f"borrowing: {meta.get('borrowing')}",
    )

    def count(file: str, want: int) -> bool | str:
        got = len(rows(d / file)) if want else 0
        return got == want or f"{got} rows, want {want}"

    tap.check(f"{name}: every cell of experiment 1 measured", lambda: count("exp1.csv", cells["exp1"]))
    tap.check(f"{name}: every cell of experiment 2 measured", lambda: count("exp2.csv", cells["exp2"]))
    tap.check(
        f"{name}: sysbench reported every run, events/s > 0",
        lambda: (
            count("exp2_runs.csv", cells["exp2"] * runs_per_cell)
            if all(float(r["events_per_s"]) > 0 for r in rows(d / "exp2_runs.csv"))
            else "a run without events"
        ),
    )
    if cells["exp2"]:
        tap.check(
            f"{name}: experiment 2 recorded CPU 0's idle time and task switches, sysbench's periods",
            lambda: (
                all(
                    r.get("cpu0_idle_us", "").isdigit()
                    and int(r.get("nr_cpu0_switches") or 0) > 0
                    and int(r.get("sysbench_nr_periods") or 0) > 0
                    for r in rows(d / "exp2.csv")
                )
                or "a cell without them"
            ),
        )
    if cells["throughput"]:
        tap.check(
            f"{name}: throughput windows measured", lambda: count("throughput.csv", cells["throughput"])
        )
    if cells["exp1"]:

        def modes_apply() -> bool | str:
            r = rows(d / "exp1.csv")
            off = [x for x in r if x["mode"] == "off"]
            on = [x for x in r if x["mode"] == "process" and x["cmd"] != "lsmod"]
            if any(int(x["charged_us"]) != 0 for x in off):
                return "charged with cpu-charge=off"
            if not on or any(int(x["charged_us"]) <= 0 for x in on):
                return "nothing charged in process mode"
            return True

        tap.check(f"{name}: off charges nothing, process charges", modes_apply)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dir", type=Path, help="the results directory of noisy_logging.sh")
    args = parser.parse_args()
    raw = args.dir / "raw"
    tap = Tap()
    print("TAP version 13")
    vms = sorted(p for p in raw.iterdir() if p.is_dir()) if raw.is_dir() else []
    names = {v.name for v in vms}
    tap.check(
        "the run wrote raw data of the patched and the stock kernel, the overhead on both clocks",
        lambda: (
            (
                any(n.startswith("patched-") for n in names)
                and {"stock-v2", "overhead-patched-v2", "stock-icount-v2", "overhead-patched-icount-v2"}
                <= names
            )
            or f"{sorted(names)}"
        ),
    )
    for d in vms:
        tap.check(f"{d.name}: the guest wrote its plan", lambda d=d: (d / "meta.json").is_file())
        if (d / "meta.json").is_file():
            check_vm(tap, d)
    tap.check(
        "report.md has experiment 1, experiment 2 and the overhead",
        lambda: all(
            s in (args.dir / "report.md").read_text()
            for s in ("### Experiment 1", "### Experiment 2", "### Overhead")
        ),
    )
    tap.check(
        "summary.json has the targets' inputs",
        lambda: {"overhead", "overhead_icount"} <= json.loads((args.dir / "summary.json").read_text()).keys(),
    )
    plots = sorted((args.dir / "plots").glob("*.png"))
    tap.check(
        "the plots are PNG images (A/B/C bars and ratio vs N per hierarchy)",
        lambda: (
            (
                plots
                and len(plots) == 2 * sum(v.name.startswith("patched-") for v in vms)
                and all(p.read_bytes()[:8] == PNG_MAGIC for p in plots)
            )
            or f"{[p.name for p in plots]}"
        ),
    )
    print(f"1..{tap.n}")
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
