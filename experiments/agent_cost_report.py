#!/usr/bin/env python3
"""borrowd's cost per cell, from the logs of tools/tests/overhead-in-guest.sh.

    experiments/agent_cost_report.py LOG...

Each LOG is one boot's output: its first line names the kernel, borrowd's
mode, the quotas, the logging containers and their engine (Podman's
conmon, or containerd CRI's daemon); each line of its table is one number
of containers. Lines of the same kernel, mode, engine, quotas, logging and
containers are one cell, over boots; lines that are not the table's (the
per-program lines, the shell's messages) are passed over. Prints a
Markdown table on stdout: per cell the mean of each column and the
half-width of its 95 % interval across boots (Student t, df = boots - 1;
the mean alone with one boot); "-" for the share of the guest's busy time
where no container logs (a quiet guest is busy a few 10 ms ticks a
second) or a log has none. The harness runs borrowd with --rescan-s 30
(a window holds a read of the engines' metadata, and its cost shows): the
last but one column is the sum with borrowd's default instead, one read
in 300 s (the sum, less the window's reads, plus a read's CPU over 300 s).
Exits 1 when a log has no header or no line of the table, or says its run
failed.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from noisy_logging_report import mean_ci

HEADER = re.compile(
    r"^# kernel (?P<kernel>\S+), cgroup \S+, (?P<cpus>\d+) CPUs; borrowd --mode (?P<mode>\w+); "
    r"quotas (?P<quota>\d+) us per 100 ms; (?P<logging>\d+) logging containers "
    r"\((?:(?P<cri>CRI: the daemon)|conmon) works (?P<work>\d+) us per "
    r"(?:50 ms|line, a line per 50 ms at most)\)"
)
COLUMNS = (
    "containers", "logging", "cpu", "bpf", "sum", "per100", "share", "writes",
    "lowered", "looks", "counts", "usage", "spared", "rounds", "scans", "scan_ms", "window",
)  # fmt: skip
# Logs from before the harness printed its reads of the metadata: "-" for them.
OLD_COLUMNS = tuple(c for c in COLUMNS if c not in ("scans", "scan_ms"))
SHOWN = (
    ("cpu", "borrowd (ms/s)", 3),
    ("bpf", "BPF (ms/s)", 3),
    ("sum", "sum (ms/s)", 3),
    ("share", "% of busy", 2),
    ("writes", "quota writes/s", 1),
    ("usage", "usage reads/s", 0),
    ("rounds", "rounds/s", 1),
    ("scans", "metadata scans", 1),
    ("scan_ms", "ms a scan", 1),
    ("sum_default", "sum at --rescan-s 300 (ms/s)", 3),
    ("window", "window (s)", 2),
)

Cell = tuple[str, str, str, str, int, int, int]


def read_log(path: Path) -> list[tuple[Cell, dict[str, float]]]:
    lines = path.read_text().splitlines()
    head = HEADER.match(lines[0]) if lines else None
    if not head:
        raise ValueError(f"{path}: no overhead-in-guest.sh header")
    if any(line.startswith("rc=") and not line.startswith("rc=0") for line in lines):
        raise ValueError(f"{path}: the run failed")
    rows = []
    for line in lines[2:]:
        if line.startswith("#") or line.startswith("rc=") or not line.strip():
            continue
        fields = line.split()
        columns = {len(COLUMNS): COLUMNS, len(OLD_COLUMNS): OLD_COLUMNS}.get(len(fields))
        if not columns or not fields[0].isdigit():
            continue
        values = dict.fromkeys(COLUMNS, float("nan"))
        values.update(zip(columns, (float("nan") if f == "-" else float(f) for f in fields), strict=True))
        # The harness runs borrowd with --rescan-s 30, so that a window
        # holds a scan: the sum with the default's one scan in 300 s instead.
        values["sum_default"] = (
            values["sum"] - values["scans"] * values["scan_ms"] / values["window"] + values["scan_ms"] / 300
        )
        if values["logging"] == 0:
            # The guest busy for a few 10 ms ticks a second: no share.
            values["share"] = float("nan")
        engine = "cri" if head["cri"] else "podman"
        cell = (head["kernel"], head["mode"], engine, head["cpus"], int(head["quota"]),
                int(head["work"]), int(values["containers"]))  # fmt: skip
        rows.append((cell, values))
    if not rows:
        raise ValueError(f"{path}: no line of the table")
    return rows


def fmt(xs: list[float], digits: int) -> str:
    if any(math.isnan(x) for x in xs):
        return "-"
    m, half = mean_ci(xs)
    assert m is not None
    return f"{m:.{digits}f}" + ("" if half is None else f" ± {half:.{digits}f}")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    cells: dict[tuple[Cell, int], list[dict[str, float]]] = {}
    try:
        for arg in argv:
            for cell, values in read_log(Path(arg)):
                cells.setdefault((cell, int(values["logging"])), []).append(values)
    except (OSError, ValueError) as e:
        print(f"agent_cost_report.py: {e}", file=sys.stderr)
        return 1
    print("| kernel | mode | engine | CPUs | quota (us) | containers | logging | "
          + " | ".join(title for _, title, _ in SHOWN) + " | boots |")  # fmt: skip
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in SHOWN)
          + " | ---: |")  # fmt: skip
    order = sorted(cells.items(), key=lambda c: (c[0][0][2], c[0][0][1], c[0][1], c[0][0][6]))
    for (cell, logging), rows in order:
        kernel, mode, engine, cpus, quota, _, containers = cell
        cols = [fmt([r[key] for r in rows], digits) for key, _, digits in SHOWN]
        print(f"| {kernel} | {mode} | {engine} | {cpus} | {quota} | {containers} | {logging} | "
              + " | ".join(cols) + f" | {len(rows)} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
