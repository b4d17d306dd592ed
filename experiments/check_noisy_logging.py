#!/usr/bin/env python3
"""Check a noisy_logging.sh run end to end, and its numbers' sanity; TAP.

The run: every VM of its plan (run.json: boots, overhead boots, engines)
ran and exited 0, on the clock run.json names; the baseline ran the stock
kernel with stock nerdctl, the other VMs the patched ones; every VM wrote
its plan and every cell of it, the boots of one configuration the same
cells; sysbench's logs hold the rates the CSV has. The report and the
summary are what the raw data give (regenerated and compared: nothing
edited by hand), the plots are the report's and nothing else.

The numbers, within what no correct run can miss (the targets are the
report's business): the charged part B of a logging process's CPU A is A
within the stated resolution (noisy_logging_report.B_RESOLUTION_*) in
process mode, at most A plus it in every mode; `off`, `incg` and the stock
kernel charge nothing; borrowd charges an engine's worker at least what
the engines test asks, and in the agent modes stock nerdctl's logging
process as much (in the mode asked: the kernel's file where the kernel
has it, else, or with --mode quota, the quota mode, which the kernel's
counters do not see); sysbench's ratios to its baseline lie in (0, 1.2];
in experiment 2 charging in process mode leaves sysbench at least what
`off` leaves it, clearly more where a noisy container floods with `yes`;
at N = 1 the patched kernel is not resolved slower than the stock one;
where experiment 1's windows run from one period's start to another's,
each holds whole periods; where B/A has edges of its own, each lies
within a period after the window's and B keeps to A over them as over the
window.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import noisy_logging_report as report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# B against A, per logging process: the report's stated resolution.
B_PTS = report.B_RESOLUTION_PTS
B_US = report.B_RESOLUTION_US
# borrowd (the engines part) charges every 100 ms what its workers used
# since its last round: a round of work from before the window can land in
# it (measured 119 ms over A in a 4.3 s window, the quick tier).
BORROWD_ROUND_US = 100_000
# The least share of a busy worker's CPU borrowd charges, as the engines
# test asks it (tools/tests/engines-in-guest.sh --tap): a worker per
# container (the process rule) 85 %, dockerd 50 %, containerd's CRI plugin
# 25 % (the thread rule).
BORROWD_FLOOR = {"podman": 0.85, "nerdctl": 0.85, "docker": 0.50, "cri": 0.25}
# The engines part's quota (engines-in-guest.sh's default, 50 ms per 100 ms).
ENGINES_QUOTA = 0.5
# A busy logging process or worker: a tenth of a CPU or more.
BUSY = 0.1
# Process mode's ratios may fall short of off's by no more than this (runs
# on the instruction clock agree to 0.01 %, boots to 0.2 %; charging's
# effect in the kept run is 0.19 or more in every cell and boot); with cmd2
# (yes) off leaves sysbench about half, and process mode must win by more.
RATIO_NOISE = 0.01
CMD2_GAIN = 0.05
# The N = 1 overhead: a regression is a delta whose 95 % interval lies
# wholly below -TARGET_OVERHEAD_PCT, or without an interval (one boot per
# kernel) a delta of the kernels' fastest runs below -OVERHEAD_NOISE_PCT
# (boots agree to 0.2 %).
OVERHEAD_NOISE_PCT = 0.5
RATE = re.compile(r"events per second:\s*([0-9.]+)")
P95 = re.compile(r"95th percentile:\s*([0-9.]+)")
# /proc/PID/stat's CPU times: clock ticks of 10 ms.
TICK_US = 10_000
# Experiment 1's windows from one period's start to another's (meta.json's
# exp1_window_edges "period"): a window is a whole number of periods long
# to within the harness's own steps at each end (a millisecond's poll and
# the snapshot: within 4 ms measured), where a window opened anywhere in a
# period is off by up to half a period. (A period in which the group asked
# for no runtime stops its period timer and is not in nr_periods. In runs
# whose meta.json lacks exp1_agent_window_edges, the agent modes' borrowd
# --stats, tens of milliseconds, came between the period's start and the
# snapshot: not checked there.)
PERIOD_EDGE_US = 10_000


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


def first_bad(bad: list[str]) -> bool | str:
    return True if not bad else "; ".join(bad[:3]) + (f" (and {len(bad) - 3} more)" if len(bad) > 3 else "")


def is_stock(d: Path) -> bool:
    return d.name.startswith(("stock", "n1-stock"))


def tolerance(wall_us: int, loggers: int) -> float:
    return B_PTS / 100 * wall_us + max(loggers, 1) * B_US


# --- the run -------------------------------------------------------------------------


def planned(run: dict[str, Any], hiers: list[str]) -> set[str]:
    """The VMs noisy_logging.sh's vm_plan starts for run.json's parameters."""
    parts = set(str(run.get("parts", "")).split(","))
    names = set()
    # The boots (-bN) and the full tier's grid VMs (-gN).
    for suffix, count in (("b", int(run.get("boots", 1))), ("g", int(run.get("grid_boots", 0)))):
        for b in range(1, count + 1):
            for h in hiers:
                if parts & {"exp1", "exp2", "throughput"}:
                    names.add(f"patched-{h}-{suffix}{b}")
                if parts & {"exp1", "exp2"}:
                    names.add(f"stock-{h}-{suffix}{b}")
    if "engines" in parts:
        names |= {f"engines-v2-b{b}" for b in range(1, int(run.get("engine_boots", 1)) + 1)}
    if "overhead" in parts:
        for b in range(1, int(run.get("overhead_boots", 0)) + 1):
            names |= {f"n1-patched-v2-b{b}", f"n1-stock-v2-b{b}"}
    return names


def check_run(tap: Tap, rd: Path, raw: Path) -> None:
    label = str(rd.relative_to(raw))
    run = json.loads((rd / "run.json").read_text())
    vms = sorted(v for v in rd.iterdir() if v.is_dir())
    clock = run.get("clock")

    def clock_agrees() -> bool | str:
        if clock not in report.CLOCK_NAME:
            return f"run.json's clock {clock!r}"
        if run.get("icount") is not None and run["icount"] != (clock == "icount"):
            return f"run.json: clock {clock}, icount {run['icount']}"
        if not rd.name.endswith(f".{clock}"):
            return f"run.json's clock {clock}, the run's directory {rd.name}"
        bad = []
        for v in vms:
            h = json.loads((v / "host.json").read_text()) if (v / "host.json").is_file() else {}
            if h.get("clock") != clock:
                bad.append(f"{v.name} ran on {h.get('clock')}")
        return first_bad(bad)

    tap.check(f"{label}: run.json's clock ({clock}) is the run's and every VM's", clock_agrees)

    def exits() -> bool | str:
        bad = []
        for v in vms:
            if not (v / "host.json").is_file():
                bad.append(f"{v.name}: no host.json (it did not finish)")
            elif (e := json.loads((v / "host.json").read_text()).get("exit")) != 0:
                bad.append(f"{v.name}: exit {e}")
        return first_bad(bad)

    tap.check(f"{label}: every VM finished and exited 0", exits)

    def plan() -> bool | str:
        seen = {
            json.loads((v / "meta.json").read_text())["hierarchy"] for v in vms if (v / "meta.json").is_file()
        }
        # (Runs from before run.json named them: the hierarchies the VMs ran.)
        hiers = str(run.get("hierarchies", "")).split(",") if run.get("hierarchies") else sorted(seen)
        want, have = planned(run, hiers), {v.name for v in vms}
        bad = [f"{n} missing" for n in sorted(want - have)] + [
            f"{n} not planned" for n in sorted(have - want)
        ]
        return first_bad(bad)

    tap.check(
        f"{label}: every VM of the plan is there ({run.get('boots')} boots, "
        f"{run.get('overhead_boots')} overhead boots), and no other",
        plan,
    )
    if "commit" not in run:
        # (Runs from before run.json recorded what they ran.)
        return

    def provenance() -> bool | str:
        bad = [
            f"run.json has no {k}"
            for k in ("commits", "series", "kernels", "binaries_sha256", "qemu", "host_cpu", "packages")
            if not run.get(k)
        ]
        if run.get("spans_commits") != (len(run.get("commits", [])) > 1):
            bad.append(f"spans_commits {run.get('spans_commits')} with commits {run.get('commits')}")
        for v in vms:
            vj = json.loads((v / "vm.json").read_text()) if (v / "vm.json").is_file() else None
            if vj is None:
                bad.append(f"{v.name}: no vm.json")
                continue
            want = run.get("kernels", {}).get(vj.get("kernel"), {}).get("image_sha256")
            if vj.get("image_sha256") != want:
                bad.append(f"{v.name} booted a {vj.get('kernel')} image other than run.json's")
            if vj.get("commit") not in run.get("commits", []):
                bad.append(f"{v.name} ran at commit {vj.get('commit')}, not among run.json's")
        return first_bad(bad)

    tap.check(
        f"{label}: run.json records the commit(s), series, kernels, binaries, QEMU, host CPU and "
        "packages; every VM booted the kernel image it names, at one of its commits",
        provenance,
    )

    def seeds() -> bool | str:
        per: dict[str, set[int]] = {}
        for v in vms:
            if (v / "vm.json").is_file() and (v / "meta.json").is_file():
                seed = json.loads((v / "vm.json").read_text())["seed"]
                if json.loads((v / "meta.json").read_text()).get("seed") != seed:
                    return f"{v.name}: meta.json's seed is not the one the host gave"
                per.setdefault(re.sub(r"-b[0-9]+$", "", v.name), set()).add(seed)
        alike = [k for k, ss in per.items() if len(ss) < len([v for v in vms if v.name.startswith(k + "-b")])]
        return first_bad([f"{k}: two boots with one seed" for k in alike])

    tap.check(f"{label}: every boot ordered its modes by a seed of its own, the one the host gave", seeds)


def check_kernels(tap: Tap, metas: dict[Path, dict[str, Any]]) -> None:
    patched_kernels = {m.get("kernel") for v, m in metas.items() if not is_stock(v)}

    def right() -> bool | str:
        bad = []
        for v, m in metas.items():
            if is_stock(v):
                if m.get("borrowing") is not False:
                    bad.append(f"{v.name}: borrowing {m.get('borrowing')}")
                if not str(m.get("nerdctl", "")).startswith("stock"):
                    bad.append(f"{v.name}: nerdctl {m.get('nerdctl')}")
                if m.get("kernel") in patched_kernels:
                    bad.append(f"{v.name}: kernel {m.get('kernel')}, the patched VMs'")
            else:
                if m.get("borrowing") is not True:
                    bad.append(f"{v.name}: borrowing {m.get('borrowing')}")
                if not str(m.get("nerdctl", "")).startswith("patched"):
                    bad.append(f"{v.name}: nerdctl {m.get('nerdctl')}")
        return first_bad(bad)

    tap.check(
        "the baseline ran the stock kernel (no cpu.cfs.borrowing_us, not the patched release) with stock "
        "nerdctl, the other VMs the patched kernel and nerdctl",
        right,
    )

    def agent_nerdctl() -> bool | str:
        bad = []
        for v, m in metas.items():
            if m.get("agent") and not str(m.get("agent_nerdctl", "")).startswith("stock"):
                bad.append(f"{v.name}: the agent modes ran nerdctl {m.get('agent_nerdctl')}")
        return first_bad(bad)

    if any(m.get("agent") for m in metas.values()):
        tap.check(
            "the agent modes ran stock nerdctl (borrowd leaves the patched logger alone)", agent_nerdctl
        )


def check_boots_alike(tap: Tap, metas: dict[Path, dict[str, Any]]) -> None:
    """The boots of one configuration measured the same cells."""
    configs: dict[tuple[str, ...], dict[str, tuple[frozenset[tuple[str, ...]], ...]]] = {}
    for v, m in metas.items():
        # (The full tier's grid VMs, -gN, measure other cells than its boots.)
        grid = re.search(r"-g[0-9]+$", v.name) is not None
        conf = (str(is_stock(v)), v.name.startswith("n1-"), grid, m["hierarchy"], m.get("parts", ""))
        keys = []
        for f, cols in (
            ("exp1.csv", ("cmd", "quota_us", "mode")),
            ("exp2.csv", ("quota_sum_pct", "n", "cmd", "mode")),
        ):
            keys.append(
                frozenset(tuple(r.get(c, "100") for c in cols) for r in rows(v / f))
                if (v / f).is_file()
                else frozenset()
            )
        configs.setdefault(tuple(map(str, conf)), {})[v.name] = tuple(keys)

    def alike() -> bool | str:
        bad = []
        for boots in configs.values():
            union = [frozenset().union(*(k[i] for k in boots.values())) for i in range(2)]
            for name, k in boots.items():
                for i, what in enumerate(("experiment 1", "experiment 2")):
                    if missing := union[i] - k[i]:
                        bad.append(
                            f"{name}: {what} lacks {', '.join(':'.join(x) for x in sorted(missing)[:3])}"
                        )
        return first_bad(bad)

    tap.check("the boots of each configuration measured the same cells", alike)


# --- a VM ----------------------------------------------------------------------------


def check_vm(tap: Tap, d: Path, label: str, meta: dict[str, Any]) -> None:
    cells = meta.get("cells")
    tap.check(f"{label}: meta.json lists the planned cells", lambda: isinstance(cells, dict))
    if not isinstance(cells, dict):
        return
    runs_per_cell = meta["sysbench_runs"]

    def count(file: str, want: int) -> bool | str:
        got = len(rows(d / file)) if want else 0
        return got == want or f"{got} rows, want {want}"

    tap.check(f"{label}: every cell of experiment 1 measured", lambda: count("exp1.csv", cells["exp1"]))
    tap.check(f"{label}: every cell of experiment 2 measured", lambda: count("exp2.csv", cells["exp2"]))
    tap.check(
        f"{label}: sysbench reported every run, events/s > 0",
        lambda: (
            count("exp2_runs.csv", cells["exp2"] * runs_per_cell)
            if not cells["exp2"] or all(float(r["events_per_s"]) > 0 for r in rows(d / "exp2_runs.csv"))
            else "a run without events"
        ),
    )
    if cells["exp2"]:
        tap.check(
            f"{label}: exp2_runs.csv's rates are sysbench's, as its logs print them", lambda: rates_logged(d)
        )
    if cells["throughput"]:
        tap.check(
            f"{label}: throughput windows measured", lambda: count("throughput.csv", cells["throughput"])
        )
    # The charges of every cell; borrowd's in the agent modes' cells.
    for name, fn in [(CHARGES_NAME, charges)] + ([(AGENT_NAME, agent)] if meta.get("agent") else []):
        if cells["exp1"]:
            tap.check(
                f"{label}: experiment 1: " + name, lambda fn=fn: fn(d, rows(d / "exp1.csv"), lambda r: 1)
            )
        if cells["exp2"]:
            tap.check(
                f"{label}: experiment 2: " + name,
                lambda fn=fn: fn(d, rows(d / "exp2.csv"), lambda r: int(r["n"]) - 1),
            )
    agent_aligned = meta.get("exp1_agent_window_edges") == "period"
    if cells["exp1"] and meta.get("exp1_window_edges") == "period":
        tap.check(
            f"{label}: experiment 1's windows hold whole periods (within {PERIOD_EDGE_US // 1000} ms"
            + (")" if agent_aligned else "; not in the agent modes)"),
            lambda: whole_periods(rows(d / "exp1.csv"), agent_aligned),
        )
    if cells["exp1"] and meta.get("exp1_ratio_edges") == "random":
        tap.check(
            f"{label}: experiment 1's B/A edges lie within a period after the window's "
            f"(+ {PERIOD_EDGE_US // 1000} ms); over them " + CHARGES_NAME,
            lambda: ratio_edges(d, rows(d / "exp1.csv")),
        )
    tables = [rows(d / f"{part}.csv") for part in ("exp1", "exp2") if cells[part]]
    if any("logger_ticks_us" in t[0] for t in tables if t):
        for part, n_loggers in (("exp1", lambda r: 1), ("exp2", lambda r: int(r["n"]) - 1)):
            if cells[part]:
                tap.check(
                    f"{label}: experiment {part[-1]}: A (the scheduler's count) and the tick count agree "
                    f"within a tick ({TICK_US // 1000} ms) at each end per logging process",
                    lambda part=part, n_loggers=n_loggers: ticks_agree(d, rows(d / f"{part}.csv"), n_loggers),
                )
    if cells["exp2"]:
        check_exp2(tap, d, label)


def whole_periods(table: list[dict[str, str]], agent_too: bool) -> bool | str:
    bad = []
    for r in table:
        cell = exp1_cell_name(r)
        wall, period = int(r["wall_us"]), int(r["period_us"])
        whole = round(wall / period) * period
        if (agent_too or r["mode"] not in AGENT_MODES) and abs(wall - whole) > PERIOD_EDGE_US:
            bad.append(f"{cell}: {wall} µs, not a whole number of periods of {period}")
    return first_bad(bad)


def ratio_edges(d: Path, table: list[dict[str, str]]) -> bool | str:
    """B/A's own edges (a random point of the period after each of the
    window's): where they are, and B against A over them."""
    bad = []
    for r in table:
        cell = exp1_cell_name(r)
        if not r.get("ratio_wall_us"):
            bad.append(f"{cell}: no B/A edges")
            continue
        apart = abs(int(r["ratio_wall_us"]) - int(r["wall_us"]))
        if apart > int(r["period_us"]) + PERIOD_EDGE_US:
            bad.append(f"{cell}: B/A's window {apart} µs off the window's, more than a period")
    if bad:
        return first_bad(bad)
    over_edges = [r | {k: r[f"ratio_{k}"] for k in ("wall_us", "logger_us", "charged_us")} for r in table]
    return charges(d, over_edges, lambda r: 1)


def exp1_cell_name(r: dict[str, str]) -> str:
    """An experiment 1 cell's name: command, quota and mode."""
    return f"{r['cmd']} {r['quota_us']} {r['mode']}"


def cell_name(r: dict[str, str]) -> str:
    """An experiment 2 cell's name, as its sysbench log has it."""
    qset = report.quota_set(r)
    return ("" if qset == 100 else f"h{qset}-") + f"{r['n']}-{r['cmd']}-{r['mode']}"


def rates_logged(d: Path) -> bool | str:
    per: dict[str, list[dict[str, str]]] = {}
    for r in rows(d / "exp2_runs.csv"):
        per.setdefault(cell_name(r), []).append(r)
    bad = []
    for cell, runs in per.items():
        log = d / f"sysbench-{cell}.log"
        if not log.is_file():
            bad.append(f"{log.name} missing")
            continue
        text = log.read_text()
        for col, pattern in (("events_per_s", RATE), ("p95_ms", P95)):
            if col not in runs[0]:
                continue
            logged, csv_values = pattern.findall(text), [r[col] for r in runs]
            if [float(x) for x in logged] != [float(x) for x in csv_values]:
                bad.append(f"{log.name}: {', '.join(logged)}; exp2_runs.csv's {col}: {', '.join(csv_values)}")
    return first_bad(bad)


def ticks_agree(d: Path, table: list[dict[str, str]], loggers: Callable[[dict[str, str]], int]) -> bool | str:
    """A at the scheduler's resolution against the tick count of the same
    processes: they differ by less than a tick at each end per logging
    process (and a thread that exited shows as more)."""
    bad = []
    for r in table:
        if "logger_ticks_us" not in r:
            continue
        a, ticks = int(r["logger_us"]), int(r["logger_ticks_us"])
        tol = 2 * TICK_US * loggers(r)
        if abs(a - ticks) > tol:
            cell = " ".join(r[k] for k in ("quota_sum_pct", "n", "cmd", "quota_us", "mode") if k in r)
            bad.append(f"{cell}: A {a} µs, in ticks {ticks} (more than {tol} apart)")
    return first_bad(bad)


CHARGES_NAME = (
    f"off, incg and the stock kernel charge nothing; B <= A + ({B_PTS:g} % of the window "
    f"+ {B_US // 1000} ms per logging process, + a round of borrowd's, {BORROWD_ROUND_US // 1000} ms, "
    "in the agent modes) in every mode, B >= A - the same in process mode"
)
AGENT_MODES = ("agent", "agent-quota")


def charges(d: Path, table: list[dict[str, str]], loggers: Callable[[dict[str, str]], int]) -> bool | str:
    bad = []
    for r in table:
        a, b, wall = int(r["logger_us"]), int(r["charged_us"]), int(r["wall_us"])
        cell = " ".join(r[k] for k in ("n", "cmd", "quota_us", "mode") if k in r)
        tol = tolerance(wall, loggers(r))
        # (borrowd charges a round, 100 ms, at a time: one from before the
        # window may land in it, as in the engines part.)
        if r["mode"] in AGENT_MODES:
            tol += loggers(r) * BORROWD_ROUND_US
        # (borrowd in its quota mode: the kernel counts nothing, B is its.)
        quota = r.get("agent_mode") == "quota"
        if (r["mode"] in ("off", "incg") or is_stock(d) or quota) and b != 0:
            bad.append(f"{cell}: charged {b} µs with nothing to charge")
        elif b > a + tol:
            bad.append(f"{cell}: B {b} µs > A {a} + {tol:.0f}")
        elif r["mode"] == "process" and not is_stock(d) and b < a - tol:
            bad.append(f"{cell}: process mode charged B {b} of A {a} µs (> {tol:.0f} short)")
    if not is_stock(d):
        process = [r for r in table if r["mode"] == "process"]
        busy = [r for r in process if int(r["logger_us"]) > BUSY * int(r["wall_us"])]
        if busy and not any(int(r["charged_us"]) > 0 for r in process):
            bad.append("nothing charged in process mode")
    return first_bad(bad)


AGENT_NAME = (
    "borrowd ran in every agent cell and in no other, in the mode asked (its auto mode: the kernel's "
    "file where the kernel has it, its quota mode on the stock kernel; --mode quota: the quota mode), "
    f"and charged a busy logging process at least {BORROWD_FLOOR['nerdctl']:.0%} of its CPU, at most "
    "all of it (less/more by the stated resolution and a round of borrowd's per logging process)"
)


def agent(d: Path, table: list[dict[str, str]], loggers: Callable[[dict[str, str]], int]) -> bool | str:
    bad = []
    for r in table:
        cell = " ".join(r[k] for k in ("n", "cmd", "quota_us", "mode") if k in r)
        mode = r.get("agent_mode", "none")
        if r["mode"] not in AGENT_MODES or loggers(r) == 0:
            if mode != "none":
                bad.append(f"{cell}: borrowd ran ({mode})")
            continue
        want = "kernel" if r["mode"] == "agent" and not is_stock(d) else "quota"
        if mode != want:
            bad.append(f"{cell}: borrowd in {mode} mode, not {want}")
            continue
        if int(r["agent_cpu_us"]) <= 0:
            bad.append(f"{cell}: borrowd used no CPU")
        a, wall = int(r["logger_us"]), int(r["wall_us"])
        b = int(r["agent_borrowed_us"]) if mode == "quota" else int(r["charged_us"])
        tol = tolerance(wall, loggers(r)) + loggers(r) * BORROWD_ROUND_US
        if b > a + tol:
            bad.append(f"{cell}: borrowd charged B {b} µs > A {a} + {tol:.0f}")
        floor = BORROWD_FLOOR["nerdctl"]
        if a > BUSY * wall and b < floor * a - tol:
            bad.append(f"{cell}: borrowd charged B {b} µs, under {floor:.0%} of A {a} - {tol:.0f}")
    return first_bad(bad)


def check_exp2(tap: Tap, d: Path, label: str) -> None:
    # (The reference study's quota set: the headroom cells have no baseline.)
    cells = {(r["n"], r["cmd"], r["mode"]): r for r in rows(d / "exp2.csv") if report.quota_set(r) == 100}
    events: dict[tuple[str, str, str], list[float]] = {}
    for r in rows(d / "exp2_runs.csv"):
        if report.quota_set(r) == 100:
            events.setdefault((r["n"], r["cmd"], r["mode"]), []).append(float(r["events_per_s"]))

    def ratios() -> dict[tuple[str, str, str], tuple[float, float]]:
        out = {}
        for (n, cmd, mode), r in cells.items():
            if cmd == "cmd1" or n == "1":
                continue
            bkey = (n, "cmd1", mode) if (n, "cmd1", mode) in cells else (n, "cmd1", "off")
            base = cells[bkey]
            ev = sum(events[(n, cmd, mode)]) / len(events[(n, cmd, mode)])
            bev = sum(events[bkey]) / len(events[bkey])
            cpu = int(report.sysbench_us(r)) / int(r["wall_us"])
            bcpu = int(report.sysbench_us(base)) / int(base["wall_us"])
            out[(n, cmd, mode)] = (ev / bev, cpu / bcpu)
        return out

    def in_range() -> bool | str:
        bad = [
            f"N={k[0]} {k[1]} {k[2]}: {r[0]:.3f}, {r[1]:.3f}"
            for k, r in ratios().items()
            if not all(0 < x <= 1.2 for x in r)
        ]
        return first_bad(bad)

    tap.check(f"{label}: experiment 2: events/s and CPU-share ratios within (0, 1.2]", in_range)


def check_process_vs_off(tap: Tap, summary: dict[str, Any]) -> None:
    """Per group and cell, the boots' mean ratios: process mode >= off."""

    def better() -> bool | str:
        bad = []
        for g, gs in summary["groups"].items():
            for k, x in gs.get("exp2", {}).items():
                n, cmd, mode = k.split(":")
                off = gs["exp2"].get(f"{n}:{cmd}:off")
                if mode != "process" or cmd == "cmd1" or n == "1" or not off:
                    continue
                for key, what in (("ratio", "events/s"), ("cpu_ratio", "CPU share")):
                    if x.get(key) is None or off.get(key) is None:
                        continue
                    need = off[key] + CMD2_GAIN if cmd == "cmd2" else off[key] - RATIO_NOISE
                    if x[key] < need:
                        bad.append(f"{g} N={n} {cmd} {what}: process {x[key]:.3f}, off {off[key]:.3f}")
        return first_bad(bad)

    tap.check(
        f"experiment 2: process mode leaves sysbench the events/s and CPU-share ratios off leaves it "
        f"(-{RATIO_NOISE}), more with cmd2 (+{CMD2_GAIN}), in every cell",
        better,
    )


def fastest_runs(raw: Path) -> dict[str, dict[str, float]]:
    """Per overhead comparison (the summary's keys), each kernel's fastest
    N = 1 sysbench run."""
    vms, _, _ = report.load_vms(raw)
    return {
        report.overhead_key(key): {kernel: max(max(ev) for ev in boots) for kernel, boots in k.items()}
        for key, k in report.overhead_runs(vms).items()
    }


def check_overhead(tap: Tap, summary: dict[str, Any], raw: Path) -> None:
    # With one boot per kernel there is no interval: the kernels' fastest
    # runs are compared (whatever else runs in a guest during a 1 s run
    # only slows it; a slower kernel slows every run).
    fastest = fastest_runs(raw)

    def no_regression() -> bool | str:
        bad = []
        for k, x in summary.get("overhead", {}).items():
            d, ci = x["delta_pct"], x.get("delta_ci_pct")
            if ci is not None and d + ci < -report.TARGET_OVERHEAD_PCT:
                bad.append(f"{k}: {d:+.3f} % ± {ci:.3f}")
            if ci is None:
                f = fastest.get(k, {})
                if "stock" not in f or "patched" not in f:
                    bad.append(f"{k}: no N = 1 runs under raw/")
                    continue
                fd = 100 * (f["patched"] - f["stock"]) / f["stock"]
                if fd < -OVERHEAD_NOISE_PCT:
                    bad.append(f"{k}: one boot, the fastest runs {fd:+.3f} % (the means {d:+.3f} %)")
        return first_bad(bad)

    tap.check(
        f"N = 1: the patched kernel is not slower than stock (the delta's 95 % interval not wholly below "
        f"-{report.TARGET_OVERHEAD_PCT} %; one boot: the fastest runs' delta not below "
        f"-{OVERHEAD_NOISE_PCT} %)",
        no_regression,
    )


def check_engines(tap: Tap, d: Path, label: str) -> None:
    r = rows(d / "engines.csv")
    tap.check(f"{label}: every engine measured off and with borrowd", lambda: len(r) >= 2 or f"{len(r)} rows")
    if (d / "vm.json").is_file():
        # (A run with vm.json: the engines' guest wrote what it ran.)

        def meta() -> bool | str:
            if not (d / "engines.json").is_file():
                return "no engines.json"
            m = json.loads((d / "engines.json").read_text())
            ran = {x["engine"] for x in r}
            return (set(m.get("engines", "").split()) == ran and bool(m.get("kernel"))) or (
                f"engines.json names {m.get('engines')!r}, engines.csv has {sorted(ran)}"
            )

        tap.check(f"{label}: the guest recorded what it ran (engines.json: kernel, engines, versions)", meta)

    def charged() -> bool | str:
        bad = []
        for x in r:
            a, b, wall = int(x["worker_ns"]) / 1000, int(x["charged_us"]), int(x["wall_us"])
            if x["mode"] == "off" and b != 0:
                bad.append(f"{x['engine']}: charged {b} µs without borrowd")
            if x["mode"] == "off":
                continue
            if b > a + tolerance(wall, 1) + BORROWD_ROUND_US:
                bad.append(f"{x['engine']} {x['mode']}: charged {b} µs of the worker's {a:.0f}")
            floor = BORROWD_FLOOR.get(x["engine"], 0.25)
            # (The rounds' lag at the window's edges, as above.)
            if a > BUSY * wall and b < floor * a - tolerance(wall, 1) - BORROWD_ROUND_US:
                bad.append(
                    f"{x['engine']} {x['mode']}: charged {b} µs, under {floor:.0%} of the worker's {a:.0f}"
                )
            if b <= 0:
                bad.append(f"{x['engine']} {x['mode']}: nothing charged")
            # Paced, the worker runs only while its container can pay: the
            # two together within the container's quota.
            c = int(x["container_us"])
            if x["mode"] == "pace" and b + c > ENGINES_QUOTA * wall + tolerance(wall, 1) + BORROWD_ROUND_US:
                bad.append(
                    f"{x['engine']} pace: B + C {b + c} µs over the quota's {ENGINES_QUOTA * wall:.0f}"
                )
        return first_bad(bad)

    tap.check(
        f"{label}: borrowd charges a busy worker's CPU, at least the engines test's share "
        f"({', '.join(f'{e} {f:.0%}' for e, f in BORROWD_FLOOR.items())}), at most all of it; "
        "off charges nothing; paced (--pace), B + C within the container's quota",
        charged,
    )

    def throttled() -> bool | str:
        for x in r:
            p, t = int(x["periods"]), int(x["throttled_periods"])
            if not (p > 0 and 0 <= t <= p):
                return f"{x['engine']} {x['mode']}: {t} throttled of {p} periods"
        return True

    if r and "periods" in r[0]:
        tap.check(f"{label}: the flooding container ran periods, at most all of them throttled", throttled)


# --- the report ----------------------------------------------------------------------


def first_difference(a: str, b: str) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb, strict=False)):
        if x != y:
            return f"line {i + 1}: {y[:120]!r}, the raw data give {x[:120]!r}"
    return f"{len(lb)} lines, the raw data give {len(la)}"


def same(a: Any, b: Any) -> bool:
    """JSON values alike, floats to 1e-9 (another Python may round the last bit otherwise)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def check_report(tap: Tap, d: Path) -> dict[str, Any] | None:
    """report.md and summary.json against what the raw data give; returns the summary."""
    result = report.render(d / "raw", None)
    text, summary = result if result else ("", {})
    want_json = report.dump_summary(summary) if result else ""

    def matches(name: str) -> bool | str:
        f = d / name
        if not result or not f.is_file():
            return "no raw data" if not result else "missing"
        have = f.read_text()
        if name == "report.md":
            return have == text or first_difference(text, have)
        return same(json.loads(want_json), json.loads(have)) or first_difference(want_json, have)

    for name in ("report.md", "summary.json"):
        tap.check(
            f"{name} is what noisy_logging_report.py makes of raw/ (nothing edited by hand)",
            lambda name=name: matches(name),
        )
    return summary if result else None


def check_plots(tap: Tap, d: Path, metas: list[dict[str, Any]]) -> None:
    text = (d / "report.md").read_text() if (d / "report.md").is_file() else ""
    shown = set(re.findall(r"\]\((plots/[^)]+\.png)\)", text))
    have = {str(p.relative_to(d)) for p in (d / "plots").glob("*.png")} if (d / "plots").is_dir() else set()
    hiers = {m["hierarchy"] for m in metas if m["cells"]["exp1"] or m["cells"]["exp2"] > 1}

    def plots() -> bool | str:
        bad = [f"{p} missing" for p in sorted(shown - have)]
        bad += [
            f"{p}: not a PNG image" for p in sorted(shown & have) if (d / p).read_bytes()[:8] != PNG_MAGIC
        ]
        bad += [f"{p}: in no report (stale)" for p in sorted(have - shown)]
        bad += [f"no plot for cgroup {h}" for h in sorted(hiers) if not any(f"_{h}" in p for p in shown)]
        return first_bad(bad)

    tap.check("the plots are the report's: each a PNG image, one per hierarchy measured, none stale", plots)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dir", type=Path, help="the results directory of noisy_logging.sh")
    args = parser.parse_args(argv)
    raw = args.dir / "raw"
    tap = Tap()
    print("TAP version 13")
    entries = sorted(p for p in raw.iterdir() if p.is_dir()) if raw.is_dir() else []
    run_dirs = [p for p in entries if (p / "run.json").is_file()]
    tap.check(
        "raw/ holds runs, each with its run.json",
        lambda: (
            (bool(run_dirs) and run_dirs == entries)
            or f"{[p.name for p in entries if p not in run_dirs] or 'nothing'} under {raw}"
        ),
    )
    vms = [v for rd in run_dirs for v in sorted(rd.iterdir()) if v.is_dir()]
    label = {v: str(v.relative_to(raw)) for v in vms}
    for rd in run_dirs:
        check_run(tap, rd, raw)
    metas: dict[Path, dict[str, Any]] = {}
    for v in vms:
        if (v / "engines.csv").is_file():
            check_engines(tap, v, label[v])
            continue
        tap.check(f"{label[v]}: the guest wrote its plan", lambda v=v: (v / "meta.json").is_file())
        if (v / "meta.json").is_file():
            metas[v] = json.loads((v / "meta.json").read_text())
            check_vm(tap, v, label[v], metas[v])
    if metas:
        check_kernels(tap, metas)
        check_boots_alike(tap, metas)
    text = (args.dir / "report.md").read_text() if (args.dir / "report.md").exists() else ""
    want = []
    if any(m["cells"]["exp1"] for m in metas.values()):
        want.append("### Experiment 1")
    if any(m["cells"]["exp2"] > 1 for m in metas.values()):
        want.append("### Experiment 2")
    tap.check(
        f"report.md has {', '.join(w[4:] for w in want) or 'its header'}",
        lambda: (text and all(w in text for w in want)) or "missing",
    )
    summary = check_report(tap, args.dir)
    if summary is not None:
        check_process_vs_off(tap, summary)
        check_overhead(tap, summary, raw)
    check_plots(tap, args.dir, list(metas.values()))
    print(f"1..{tap.n}")
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
