#!/usr/bin/env python3
"""The noisy-logging study's report, from the raw data of noisy_logging.sh.

Reads every run under DIR/raw (DIR/raw/<parts>.<clock>/<vm>/: CSV, meta.json;
a run's run.json; older runs' DIR/raw/<vm>/ too) and the paper's table numbers
(experiments/paper_tables.json); writes DIR/report.md (the paper's values and
ours side by side, the stock kernel's baseline, every mode, the targets),
DIR/summary.json (every number of the report) and DIR/plots/*.png.

VMs of the same kernel, hierarchy and clock are boots of one configuration:
a cell's value is the mean over the boots that measured it, with its 95 %
interval across those boots (Student t, df = boots - 1; none with one boot).
A target is met only where every cell's interval lies inside it. The
plots' error bars are standard errors (summary.json has both). --no-plots
writes report.md and summary.json only (what check_noisy_logging.py
compares), without matplotlib.

The paper ran on bare metal, this study in QEMU TCG: compare ratios and
shares of a CPU, not absolute events/s.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PAPER = json.loads((HERE / "paper_tables.json").read_text())
MODES = ("off", "process", "thread", "incg", "agent", "agent-quota")
# The modes in which borrowd charges stock nerdctl's logging process.
AGENT_MODES = ("agent", "agent-quota")
# Sources of a row: the stock kernel (with stock nerdctl: charging nothing,
# or charged by borrowd through CFS quotas), then the patched kernel's modes.
SOURCES = ("stock", "stock-incg", "stock-agent", "stock-agent-quota", *MODES)
SOURCE_LABEL = {
    "stock": "stock kernel",
    "stock-incg": "stock, logger in ctr cgroup",
    "stock-agent": "stock, borrowd (quota mode)",
    "stock-agent-quota": "stock, borrowd --mode quota",
    "off": "patched, off",
    "process": "process",
    "thread": "thread",
    "incg": "logger in ctr cgroup",
    "agent": "borrowd (kernel file)",
    "agent-quota": "borrowd --mode quota",
}
BAR_LABEL = {
    "paper": "pap",
    "stock": "stk",
    "stock-incg": "sic",
    "stock-agent": "sbq",
    "stock-agent-quota": "sbQ",
    "off": "off",
    "process": "prc",
    "thread": "thr",
    "incg": "icg",
    "agent": "bdk",
    "agent-quota": "bdq",
}
COLOR = {
    "stock": "tab:red",
    "stock-incg": "tab:brown",
    "stock-agent": "tab:purple",
    "stock-agent-quota": "tab:pink",
    "off": "tab:orange",
    "process": "tab:blue",
    "thread": "tab:gray",
    "incg": "tab:green",
    "agent": "tab:cyan",
    "agent-quota": "tab:olive",
}
EXP1_CMDS = {"yes": "cmd1_yes", "lsmod": "cmd2_lsmod", "echo": "cmd3_echo"}
EXP1_TABLE2 = {"yes": "cmd1", "lsmod": "cmd2", "echo": "cmd3"}
EXP2_NOISY = ("cmd2", "cmd3", "cmd4")
CLOCK_NAME = {"icount": "instruction clock", "wall": "wall clock"}

# Targets (reported, not asserted), charging in process mode: issue 18.
# sysbench's CPU share within this much (relative) of its max-min fair
# share (fair_share()), in every noisy cell of either quota set.
TARGET_FAIR_PCT = 1.0
TARGET_EVENTS_RATIO = 0.97
TARGET_B_OVER_A = 99.5
TARGET_B_PLUS_C_POINTS = 0.5
TARGET_OVERHEAD_PCT = 0.1
TARGET_VS_INCG_POINTS = 0.5
# The stated resolution of a window's charge B against the logging
# process's CPU A, per logging process: A is read in 10 ms ticks at each end
# of the window and the logger charges in batches (every 10 ms while busy,
# longer under emulation), so a batch at each edge may fall in or out of
# the window (seen: up to 50 ms in a 4 s window of the full run, 48 ms in
# a 2 s one of the quick tier). check_noisy_logging.py holds B to it.
B_RESOLUTION_PTS = 1.0
B_RESOLUTION_US = 50_000
# The paper's N = 1 row (sysbench alone) holds the same number in its
# tables 3 and 8; its 0.24-0.57 % are the cmd1 rows of N = 2..5.
_T3, _T8 = PAPER["table3_events_without_mechanism"], PAPER["table8_events_with_mechanism"]
_N1 = _T3["N"].index(1)
_APART = [100 * abs(b - a) / a for n, a, b in zip(_T3["N"], _T3["cmd1"], _T8["cmd1"], strict=True) if n > 1]
PAPER_N1 = (
    f"The paper's N = 1 (sysbench alone) is {_T3['cmd1'][_N1]:.2f} events/s before and "
    f"{_T8['cmd1'][_N1]:.2f} after, the same number in its Tables 3 and 8 (no difference measured "
    f"there); its cmd1 rows at N = 2..5 are {min(_APART):.2f}-{max(_APART):.2f} % apart."
)

Row = dict[str, str]
Cells = dict[tuple[int, str, str], dict[str, Any]]


def read_csv(path: Path) -> list[Row]:
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def pct(part: str | int | float, wall: str | int | float) -> float:
    return 100.0 * float(part) / float(wall)


def fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def mean_se(xs: list[float]) -> tuple[float | None, float | None]:
    """Mean and standard error of the mean (None with fewer than 2 values)."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None
    m = statistics.fmean(xs)
    return m, (statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else None)


# Student t's two-sided 95 % quantile (0.975) for 1..30 degrees of freedom.
T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: int) -> float:
    """Student t's 97.5 % quantile (beyond 30 degrees of freedom within 0.002 of it)."""
    return T975[df - 1] if df <= len(T975) else 1.960 + 2.4 / df


def ci95(se: float | None, n: int) -> float | None:
    """The half-width of a mean's 95 % interval from its standard error over
    n values (Student t, n - 1 degrees of freedom); None without one."""
    return None if se is None or n < 2 else t975(n - 1) * se


def mean_ci(xs: list[float]) -> tuple[float | None, float | None]:
    """Mean and the half-width of its 95 % interval (None with fewer than 2 values)."""
    xs = [x for x in xs if x is not None]
    m, se = mean_se(xs)
    return m, ci95(se, len(xs))


PM_BOOTS_LOWER = "mean ± the half-width of its 95 % interval across boots (Student t, df = boots - 1)"
PM_BOOTS = "M" + PM_BOOTS_LOWER[1:] + "."


def fmt_interval(m: float, half: float | None, digits: int, unit: str = "") -> str:
    return "-" if half is None else f"{m - half:+.{digits}f} to {m + half:+.{digits}f}{unit}"


def fmt_pm(m: float | None, se: float | None, digits: int = 2) -> str:
    if m is None:
        return "-"
    return f"{m:.{digits}f}" if se is None else f"{m:.{digits}f} ± {se:.{digits}f}"


# --- the runs ------------------------------------------------------------------------


@dataclass
class Vm:
    dir: Path
    name: str
    kernel: str  # patched | stock
    hier: str
    clock: str  # icount | wall
    boot: str  # unique per boot
    meta: dict[str, Any]
    run: dict[str, Any] = field(default_factory=dict)


def vm_kind(name: str) -> str:
    return "stock" if re.match(r"(n1-)?stock", name) else "patched"


def load_vms(raw: Path) -> tuple[list[Vm], list[dict[str, Any]], list[tuple[Path, dict[str, Any]]]]:
    """The VMs with a meta.json, the runs' run.json, and the engines' VMs."""
    vms: list[Vm] = []
    runs: list[dict[str, Any]] = []
    engines: list[tuple[Path, dict[str, Any]]] = []
    run_dirs = [raw, *sorted(d for d in raw.iterdir() if d.is_dir() and (d / "run.json").exists())]
    for rd in run_dirs:
        run = json.loads((rd / "run.json").read_text()) if (rd / "run.json").exists() else {}
        if run:
            runs.append(run)
        for d in sorted(rd.iterdir()) if rd.is_dir() else []:
            if (d / "engines.csv").exists():
                engines.append((d, run))
            if not (d / "meta.json").exists():
                continue
            meta = json.loads((d / "meta.json").read_text())
            clock = run.get("clock") or ("icount" if run.get("icount") or "icount" in d.name else "wall")
            # Older runs: the overhead pair's clock is in its name.
            if rd == raw and "icount" in d.name:
                clock = "icount"
            elif rd == raw and d.name.startswith(("stock-v", "overhead-patched-v")):
                clock = "wall"
            vms.append(
                Vm(d, d.name, vm_kind(d.name), meta["hierarchy"], clock, f"{rd.name}/{d.name}", meta, run)
            )
    return vms, runs, engines


# --- experiment 1 --------------------------------------------------------------------

EXP1_KEYS = (
    "A",
    "B",
    "C",
    "B_plus_C",
    "A_minus_B",
    "B_over_A",
    "B_plus_C_minus_quota",
    "logging_cgroup",
    "paid",
    "dropped_ms",
    "log_kBps",
    "A_ms_per_MB",
)


def charges_us(r: Row) -> tuple[int, int, int]:
    """What was charged to the window's containers, paid and dropped, µs:
    the kernel's counters (cpu.stat), or where borrowd ran in its quota mode
    (no counter in the kernel) its accounts of the containers' groups."""
    if r.get("agent_mode") == "quota":
        return int(r["agent_borrowed_us"]), int(r["agent_paid_us"]), int(r["agent_dropped_us"])
    return int(r["charged_us"]), int(r["deducted_us"]), int(r["dropped_us"])


def agent_columns(r: Row) -> dict[str, Any]:
    """borrowd's own numbers for a window (runs since it joined the study):
    its mode, its CPU (% of one CPU) and its quota writes per second."""
    if "agent_mode" not in r:
        return {}
    secs = int(r["wall_us"]) / 1e6
    return {
        "agent_mode": r["agent_mode"],
        "agent_cpu": pct(r["agent_cpu_us"], r["wall_us"]),
        "agent_charged": pct(r["agent_charged_us"], r["wall_us"]),
        "agent_regained": pct(r.get("agent_regained_us") or 0, r["wall_us"]),
        "quota_writes_per_s": int(r["agent_quota_writes"]) / secs,
    }


def exp1_rows(vm: Vm) -> list[dict[str, Any]]:
    out = []
    for r in read_csv(vm.dir / "exp1.csv"):
        wall = r["wall_us"]
        charged, deducted, dropped = charges_us(r)
        a, b, c = pct(r["logger_us"], wall), pct(charged, wall), pct(r["container_us"], wall)
        # incg: the logging process runs in the container's cgroup, whose
        # usage then counts it too; C is the container's own part.
        if r["mode"] == "incg":
            c = max(c - a, 0.0)
        mode = r["mode"]
        if vm.kernel == "stock":
            # The baseline; another mode on the stock kernel is its own source.
            mode = "stock" if mode == "off" else f"stock-{mode}"
        quota = 100.0 * int(r["quota_us"]) / int(r["period_us"])
        log_bytes = int(r["log_bytes"]) if r.get("log_bytes") else None
        b_over_a = 100.0 * b / a if a > 0 else None
        # B/A over its own edges where they were taken (a random point of
        # a period: at a period's start the logger writes a held-back
        # charge), the kernel's B; borrowd's quota mode keeps its accounts.
        if r.get("ratio_logger_us") and r.get("agent_mode") != "quota":
            ra, rb = int(r["ratio_logger_us"]), int(r["ratio_charged_us"])
            b_over_a = 100.0 * rb / ra if ra > 0 else None
        out.append(
            agent_columns(r)
            | {
                "cmd": r["cmd"],
                "quota_ms": round(int(r["quota_us"]) / 1000),
                "quota_pct": quota,
                "mode": mode,
                "A": a,
                "B": b,
                "C": c,
                "B_plus_C": b + c,
                "A_minus_B": a - b,
                "B_over_A": b_over_a,
                "B_plus_C_minus_quota": b + c - quota,
                "logging_cgroup": pct(r["logging_cgroup_us"], wall),
                "paid": pct(deducted, wall),
                "dropped_ms": dropped / 1000,
                "log_kBps": log_bytes / (int(wall) / 1e6) / 1e3 if log_bytes is not None else None,
                # The logging process's CPU per MB it logged: its cost at the
                # same output, whatever the output was.
                "A_ms_per_MB": (int(r["logger_us"]) / 1e3) / (log_bytes / 1e6) if log_bytes else None,
            }
        )
    return out


def exp1_cells(vms: list[Vm]) -> dict[tuple[str, int, str], dict[str, Any]]:
    """(cmd, quota_ms, source) -> per key (mean, se) over the boots, and the boots."""
    per: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for vm in vms:
        for r in exp1_rows(vm):
            per.setdefault((r["cmd"], r["quota_ms"], r["mode"]), []).append(r)
    cells = {}
    for key, rows in per.items():
        cell: dict[str, Any] = {"boots": len(rows), "quota_pct": rows[0]["quota_pct"]}
        for k in EXP1_KEYS:
            xs = [r[k] for r in rows if r[k] is not None]
            cell[k], cell[k + "_se"] = mean_se(xs)
            cell[k + "_ci"] = ci95(cell[k + "_se"], len(xs))
        cells[key] = cell
    return cells


Exp1 = dict[tuple[str, int, str], dict[str, Any]]
Exp2 = dict[tuple[int, str, str], dict[str, Any]]


def exp1_section(title: str, cells: Exp1, lsmod: list[int]) -> list[str]:
    out = [f"### Experiment 1, {title}: the logging process's CPU (shares of one CPU, %)", ""]
    if lsmod:
        out += [
            f"`lsmod` printed {min(lsmod)}-{max(lsmod)} lines in these guests (the kernel's optional "
            "modules loaded; the paper does not say how many its machine listed).",
            "",
        ]
    quotas = sorted({k[1] for k in cells}, reverse=True)
    cmds = [c for c in EXP1_CMDS if any(k[0] == c for k in cells)]
    out.append(
        "Without charging: CPU of the logging cgroup `/system.slice/containerd.service` "
        "(paper: Table 2), on the stock kernel and on the patched one with charging off. " + PM_BOOTS
    )
    out.append("")
    out.append("| command | quota | paper | stock kernel | patched, off |")
    out.append("|---|---|---|---|---|")
    t2 = PAPER["table2_logger_cgroup_cpu_without_mechanism"]
    for cmd in cmds:
        for q in quotas:
            paper = t2[EXP1_TABLE2[cmd]][t2["quota_ms"].index(q)] if q in t2["quota_ms"] else None
            vals = []
            for src in ("stock", "off"):
                x = cells.get((cmd, q, src))
                vals.append(fmt_pm(x["logging_cgroup"], x["logging_cgroup_ci"]) if x else "-")
            out.append(f"| {cmd} | {q} ms | {fmt(paper)} | " + " | ".join(vals) + " |")
    out.append("")
    out.append(
        "A = logging process, B = charged to the container, C = the container's own CPU; B+C against "
        "the quota; 'paid' = borrowing the kernel deducted from the container's quota in the window "
        "(B in a steady state); 'dropped' = charges the kernel's bound refused. Paper: Tables 5-7 "
        "(its thread-based charging). " + PM_BOOTS
    )
    out.append("")
    out.append("| command | quota | source | boots | A | B | C | B+C - quota | B/A % | paid | dropped ms |")
    out.append("|---" * 11 + "|")
    t5 = PAPER["tables5to7_with_mechanism"]
    for cmd in cmds:
        key = EXP1_CMDS[cmd]
        for q in quotas:
            if q in t5["quota_ms"]:
                a, b, c, bc, _ = t5[key][t5["quota_ms"].index(q)]
                out.append(
                    f"| {cmd} | {q} ms | paper | - | {a:.2f} | {b:.2f} | {c:.2f} | {bc - q:+.2f} | "
                    f"{100 * b / a:.1f} | - | - |"
                )
            for src in SOURCES:
                x = cells.get((cmd, q, src))
                if x is None:
                    continue
                out.append(
                    f"| {cmd} | {q} ms | {SOURCE_LABEL[src]} | {x['boots']} | {fmt_pm(x['A'], x['A_ci'])} | "
                    f"{fmt_pm(x['B'], x['B_ci'])} | {fmt_pm(x['C'], x['C_ci'])} | "
                    f"{fmt_pm(x['B_plus_C_minus_quota'], x['B_plus_C_minus_quota_ci'])} | "
                    f"{fmt(x['B_over_A'], 1)} | {fmt(x['paid'])} | {fmt(x['dropped_ms'], 0)} |"
                )
    out.append("")
    # What charging costs: the container's useful work (C) and the logging
    # process's CPU per MB logged, with and without.
    rows = []
    for cmd in cmds:
        for q in quotas:
            off = cells.get((cmd, q, "off"))
            for src in ("process", "thread", "incg"):
                x = cells.get((cmd, q, src))
                if not off or not x:
                    continue
                c_ratio = x["C"] / off["C"] if off["C"] else None
                a_ratio = (
                    x["A_ms_per_MB"] / off["A_ms_per_MB"] if x["A_ms_per_MB"] and off["A_ms_per_MB"] else None
                )
                rows.append(
                    f"| {cmd} | {q} ms | {SOURCE_LABEL[src]} | {fmt(off['C'])} | {fmt(x['C'])} | "
                    f"{fmt(c_ratio)} | {fmt(off['log_kBps'], 0)} | {fmt(x['log_kBps'], 0)} | "
                    f"{fmt(off['A_ms_per_MB'], 1)} | {fmt(x['A_ms_per_MB'], 1)} | {fmt(a_ratio)} |"
                )
    if rows:
        out += [
            "What charging costs the container: its own CPU C (the work it does) with the mode against "
            "`off`, and the logging process's CPU per MB it logged (ms/MB, the cost at the same output) "
            "with the mode against `off`.",
            "",
            "| command | quota | mode | C off | C mode | C ratio | log kB/s off | log kB/s mode "
            "| A ms/MB off | A ms/MB mode | A/MB ratio |",
            "|---" * 11 + "|",
            *rows,
            "",
        ]
    return out


# --- experiment 2 --------------------------------------------------------------------


def quota_set(r: Row) -> int:
    """The quotas' sum of an experiment 2 row, % of CPU 0 (100 before the
    headroom cells existed)."""
    return int(r.get("quota_sum_pct") or 100)


def sysbench_col(r: Row) -> str:
    """The column of sysbench's container's CPU in the window: the
    snapshots' (the window is sysbench's running time), or in older runs
    the container's whole life, read after it (the window then held its
    start and stop)."""
    return "sysbench_us" if "sysbench_us" in r else "sysbench_container_us"


def sysbench_us(r: Row) -> str:
    """sysbench's container's CPU in the window (sysbench_col)."""
    return r[sysbench_col(r)]


def fair_share(r: Row) -> float | None:
    """sysbench's max-min fair share of CPU 0, %: the N containers, each
    capped at its quota and all busy, share what the tasks outside them
    (containerd, shims, borrowd, kernel threads) left: min(quota, rest/N).
    The logging processes count as their containers' (they work for them).
    From the run queue's nanosecond time (CONFIG_SCHEDSTATS); None in older
    runs."""
    if not r.get("cpu0_run_us"):
        return None
    wall = int(r["wall_us"])
    ours = int(sysbench_us(r)) + int(r["container_us"])
    if r["mode"] != "incg":
        ours += int(r["logger_us"])
    other = max(int(r["cpu0_run_us"]) - ours, 0)
    quota = 100.0 * int(r["quota_us"]) / int(r["period_us"])
    return min(quota, 100.0 * (wall - other) / wall / int(r["n"]))


def exp2_cells(cells: list[Row], runs: list[Row], qset: int = 100) -> Cells:
    """Experiment 2's cells of one quota set (100: the reference study's;
    else the headroom cells) of one boot."""
    rates: dict[tuple[int, str, str], list[float]] = {}
    p95s: dict[tuple[int, str, str], list[float]] = {}
    for r in runs:
        if quota_set(r) != qset:
            continue
        key = (int(r["n"]), r["cmd"], r["mode"])
        rates.setdefault(key, []).append(float(r["events_per_s"]))
        if r.get("p95_ms"):
            p95s.setdefault(key, []).append(float(r["p95_ms"]))
    result = {}
    for r in cells:
        if quota_set(r) != qset:
            continue
        key = (int(r["n"]), r["cmd"], r["mode"])
        ev = rates.get(key, [])
        wall = r["wall_us"]
        logger, container = pct(r["logger_us"], wall), pct(r["container_us"], wall)
        if r["mode"] == "incg":
            container = max(container - logger, 0.0)
        sb_cpu_s = int(sysbench_us(r)) / 1e6
        events = statistics.fmean(ev) * int(r["sysbench_runs"]) * int(r["sysbench_time_s"]) if ev else None
        fair = fair_share(r)
        sb_cpu = pct(sysbench_us(r), wall)
        result[key] = agent_columns(r) | {
            "events_mean": statistics.fmean(ev) if ev else None,
            "events_sd": statistics.stdev(ev) if len(ev) > 1 else 0.0,
            "runs": ev,
            "p95_ms": statistics.fmean(p95s[key]) if key in p95s else None,
            # sysbench's events per second of the CPU it got: what emulation
            # makes of a CPU share.
            "events_per_cpu_s": events / sb_cpu_s if events and sb_cpu_s else None,
            "sysbench_cpu": sb_cpu,
            "fair_share": fair,
            "to_fair": sb_cpu / fair if fair else None,
            "quota_pct": 100.0 * int(r["quota_us"]) / int(r["period_us"]),
            "noisy_A": logger,
            "noisy_B": pct(charges_us(r)[0], wall),
            "noisy_paid": pct(charges_us(r)[1], wall),
            "noisy_C": container,
            "logging_cgroup": pct(r["logging_cgroup_us"], wall),
            "cpu0_idle": pct(r["cpu0_idle_us"], wall) if r.get("cpu0_idle_us") else None,
            "cpu0_switches_per_s": (
                int(r["nr_cpu0_switches"]) / (int(wall) / 1e6) if r.get("nr_cpu0_switches") else None
            ),
        }
    return result


def baseline(cells: Cells, n: int, mode: str) -> dict[str, Any] | None:
    """The cmd1 cell of the same N and mode (older runs: cmd1 in `off` only)."""
    return cells.get((n, "cmd1", mode)) or cells.get((n, "cmd1", "off"))


def boot_ratios(cells: Cells, n: int, cmd: str, mode: str) -> tuple[float | None, float | None, float | None]:
    """Events/s ratio, its within-boot standard error, CPU share ratio."""
    base, x = baseline(cells, n, mode), cells.get((n, cmd, mode))
    if not base or not x or not base["events_mean"] or x["events_mean"] is None:
        return None, None, None
    r = x["events_mean"] / base["events_mean"]
    se = None
    if len(base["runs"]) > 1 and len(x["runs"]) > 1:
        rel = (x["events_sd"] / x["events_mean"]) ** 2 / len(x["runs"])
        rel += (base["events_sd"] / base["events_mean"]) ** 2 / len(base["runs"])
        se = r * math.sqrt(rel)
    cpu = x["sysbench_cpu"] / base["sysbench_cpu"] if base["sysbench_cpu"] else None
    return r, se, cpu


def exp2_group(vms: list[Vm], qset: int = 100) -> dict[str, Any]:
    """Experiment 2 (the quota set qset) over the boots of one kernel,
    hierarchy and clock: per (n, cmd, source) the boots' values, the
    ratios' mean and error bar."""
    per_boot: list[tuple[str, Cells]] = []
    for vm in vms:
        c = exp2_cells(read_csv(vm.dir / "exp2.csv"), read_csv(vm.dir / "exp2_runs.csv"), qset)
        if vm.kernel == "stock":
            c = {(n, cmd, "stock" if m == "off" else f"stock-{m}"): v for (n, cmd, m), v in c.items()}
        if c:
            per_boot.append((vm.boot, c))
    keys = sorted({k for _, c in per_boot for k in c})
    out: dict[tuple[int, str, str], dict[str, Any]] = {}
    for n, cmd, mode in keys:
        vals = [c[(n, cmd, mode)] for _, c in per_boot if (n, cmd, mode) in c]
        cell: dict[str, Any] = {"boots": len(vals)}
        for k in (
            "events_mean",
            "sysbench_cpu",
            "noisy_A",
            "noisy_B",
            "noisy_C",
            "logging_cgroup",
            "cpu0_idle",
            "cpu0_switches_per_s",
            "events_per_cpu_s",
            "quota_pct",
            "p95_ms",
            "fair_share",
            "to_fair",
        ):
            xs = [v[k] for v in vals if v[k] is not None]
            cell[k], cell[k + "_se"] = mean_se(xs)
            cell[k + "_ci"] = ci95(cell[k + "_se"], len(xs))
        cell["runs"] = [x for v in vals for x in v["runs"]]
        # Per boot, for the differences between modes of the same boot.
        cell["sysbench_cpu_by_boot"] = {
            b: c[(n, cmd, mode)]["sysbench_cpu"] for b, c in per_boot if (n, cmd, mode) in c
        }
        cell["to_fair_by_boot"] = {
            b: c[(n, cmd, mode)]["to_fair"]
            for b, c in per_boot
            if (n, cmd, mode) in c and c[(n, cmd, mode)]["to_fair"] is not None
        }
        if n > 1 and cmd != "cmd1":
            rs = {b: boot_ratios(c, n, cmd, mode) for b, c in per_boot if (n, cmd, mode) in c}
            ev = [r[0] for r in rs.values() if r[0] is not None]
            cpu = [r[2] for r in rs.values() if r[2] is not None]
            cell["ratio"], cell["ratio_se"] = mean_se(ev)
            cell["ratio_ci"] = ci95(cell["ratio_se"], len(ev))
            if len(ev) == 1:
                # One boot: the error bar of its runs (no interval across boots).
                cell["ratio_se"] = next(iter(rs.values()))[1]
            cell["cpu_ratio"], cell["cpu_ratio_se"] = mean_se(cpu)
            cell["cpu_ratio_ci"] = ci95(cell["cpu_ratio_se"], len(cpu))
            cell["ratio_boots"], cell["cpu_ratio_boots"] = ev, cpu
            cell["ratio_by_boot"] = {b: r[0] for b, r in rs.items() if r[0] is not None}
            cell["cpu_ratio_by_boot"] = {b: r[2] for b, r in rs.items() if r[2] is not None}
        out[(n, cmd, mode)] = cell
    return out


def exp2_section(title: str, cells: Exp2, note: str) -> list[str]:
    out = [f"### Experiment 2, {title}: sysbench next to N-1 noisy containers", ""]
    if note:
        out += [note, ""]
    sources = [s for s in SOURCES if any(k[2] == s for k in cells)]
    t3, t8 = PAPER["table3_events_without_mechanism"], PAPER["table8_events_with_mechanism"]
    out.append(
        "sysbench events/s, " + PM_BOOTS_LOWER + " (paper: Tables 3 and 8, before and "
        "after, bare metal: only the ratios compare). Every source has its own cmd1 baseline."
    )
    out.append("")
    header = "| N | command | paper before | paper after | " + " | ".join(SOURCE_LABEL[s] for s in sources)
    out.append(header + " |")
    out.append("|---" * (4 + len(sources)) + "|")
    for n in sorted({k[0] for k in cells}):
        for cmd in ("cmd1", *EXP2_NOISY):
            if not any((n, cmd, s) in cells for s in sources) and not (n == 1 and cmd == "cmd1"):
                continue
            i = t3["N"].index(n) if n in t3["N"] else None
            vals = []
            for s in sources:
                x = cells.get((n, cmd, s))
                if x is None and n == 1 and s != "stock":
                    x = cells.get((n, cmd, "off"))
                vals.append(fmt_pm(x["events_mean"], x["events_mean_ci"], 1) if x else "-")
            paper = (fmt(t3[cmd][i], 1), fmt(t8[cmd][i], 1)) if i is not None else ("-", "-")
            out.append(f"| {n} | {cmd} | {paper[0]} | {paper[1]} | " + " | ".join(vals) + " |")
    out.append("")
    t4, t9 = PAPER["table4_ratio_without_mechanism"], PAPER["table9_ratio_with_mechanism"]
    for key, what in (("ratio", "events/s"), ("cpu_ratio", "CPU share (its container's CPU time)")):
        if key == "ratio":
            paper_note, head = "paper: Tables 4 and 9", header
        else:
            # The paper measured no CPU share: its columns here are its
            # events/s ratios, labelled as such.
            paper_note = (
                "the paper measured no CPU share: its columns are its events/s ratios, Tables 4 and 9"
            )
            head = header.replace(
                "paper before | paper after", "paper before, events/s | paper after, events/s"
            )
        out.append(
            f"sysbench's {what} ratio to its cmd1 baseline of the same N and source ({paper_note}), "
            + PM_BOOTS_LOWER
            + "; one boot: its mean alone."
        )
        out.append("")
        out.append(head + " |")
        out.append("|---" * (4 + len(sources)) + "|")
        for n in sorted({k[0] for k in cells} - {1}):
            for cmd in EXP2_NOISY:
                if not any((n, cmd, s) in cells for s in sources):
                    continue
                i = t4["N"].index(n)
                vals = [
                    fmt_pm(cells[(n, cmd, s)].get(key), cells[(n, cmd, s)].get(key + "_ci"), 3)
                    if (n, cmd, s) in cells
                    else "-"
                    for s in sources
                ]
                paper = f"| {n} | {cmd} | {t4[cmd][i]:.2f} | {t9[cmd][i]:.2f} | "
                out.append(paper + " | ".join(vals) + " |")
        out.append("")
    out.append(
        "Where the CPU went (shares of one CPU over the sysbench runs, %, mean across boots): sysbench; "
        "the noisy containers' own CPU (C), their logging processes' (A) and the part charged (B), "
        "summed over the N-1 noisy containers; the logging cgroup; CPU 0's idle time and task "
        "switches per second; sysbench's events per CPU second; its fair share (its quota, or what "
        "the tasks outside the containers left divided by N if less) and the 95th percentile of its "
        "event latency (ms: sysbench's own, 0.01 ms)."
    )
    out.append("")
    out += cpu_table(cells)
    return out


def cpu_table(cells: Exp2) -> list[str]:
    out = [
        "| N | command | source | sysbench | fair share | noisy C | noisy A | noisy B | logging cgroup "
        "| idle | switches/s | events per CPU s | p95 ms |",
        "|---" * 13 + "|",
    ]
    for (n, cmd, s), x in sorted(cells.items()):
        out.append(
            f"| {n} | {cmd} | {SOURCE_LABEL.get(s, s)} | {fmt(x['sysbench_cpu'])} | {fmt(x['fair_share'])} | "
            f"{fmt(x['noisy_C'])} | {fmt(x['noisy_A'])} | {fmt(x['noisy_B'])} | "
            f"{fmt(x['logging_cgroup'])} | {fmt(x['cpu0_idle'])} | "
            f"{fmt(x['cpu0_switches_per_s'], 0)} | {fmt(x['events_per_cpu_s'], 0)} | {fmt(x['p95_ms'])} |"
        )
    out.append("")
    return out


def headroom_section(title: str, cells: Exp2, pct_sum: int) -> list[str]:
    """The headroom cells: the quotas add up to less than CPU 0, so what a
    noisy container takes beyond its quota shows in sysbench's share."""
    out = [
        f"### Experiment 2 with headroom, {title}: the quotas add up to {pct_sum} % of CPU 0",
        "",
        f"N containers of quota {pct_sum}/N ms per 100 ms. sysbench's CPU share against its fair "
        "share (its quota, or what the tasks outside the containers left divided by N if less), "
        + PM_BOOTS_LOWER
        + ". Where a noisy container's logging process goes uncharged, the logging cgroup takes CPU "
        "0 beyond the quotas and sysbench falls below its share.",
        "",
        "| N | command | source | sysbench / fair share |",
        "|---|---|---|---|",
    ]
    for (n, cmd, s), x in sorted(cells.items()):
        out.append(f"| {n} | {cmd} | {SOURCE_LABEL.get(s, s)} | {fmt_pm(x['to_fair'], x['to_fair_ci'], 3)} |")
    out += ["", "Where the CPU went (as in experiment 2 above):", ""]
    out += cpu_table(cells)
    return out


# --- plots ---------------------------------------------------------------------------


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_ratios(title: str, cells: Exp2, path: Path) -> None:
    plt = pyplot()
    t4, t9 = PAPER["table4_ratio_without_mechanism"], PAPER["table9_ratio_with_mechanism"]
    fig, axes = plt.subplots(2, 3, figsize=(14, 8), sharey=True)
    for row, (key, what) in enumerate((("ratio", "events/s"), ("cpu_ratio", "CPU share"))):
        for ax, cmd in zip(axes[row], EXP2_NOISY, strict=True):
            if key == "ratio":
                ax.plot(t4["N"], t4[cmd], "o--", color="tab:red", alpha=0.5, label="paper before")
                ax.plot(t9["N"], t9[cmd], "o--", color="tab:green", alpha=0.5, label="paper after")
            present = [s for s in SOURCES if any(k[2] == s for k in cells)]
            for j, s in enumerate(present):
                pts = [(n, cells[(n, cmd, s)]) for n in range(2, 6) if (n, cmd, s) in cells]
                pts = [(n, x) for n, x in pts if x.get(key) is not None]
                # Side by side around N, so that equal values stay visible.
                dx = (j - (len(present) - 1) / 2) * 0.07
                if pts:
                    ax.errorbar(
                        [p[0] + dx for p in pts],
                        [p[1][key] for p in pts],
                        yerr=[p[1].get(key + "_se") or 0.0 for p in pts],
                        fmt="s-",
                        capsize=3,
                        color=COLOR[s],
                        label=f"ours, {SOURCE_LABEL[s]}",
                    )
            ax.axhline(1.0, color="black", linewidth=0.5)
            ax.set_ylim(0, 1.2)
            ax.set_xlim(0, 5.5)
            ax.set_title(f"{cmd}: {PAPER['commands_exp2'][cmd]}", fontsize=8)
            ax.set_xlabel("N containers")
            ax.set_xticks(range(0, 6))
        axes[row][0].set_ylabel(f"sysbench {what} / its cmd1 baseline")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.suptitle(
        f"Experiment 2, {title}: sysbench's events/s (top) and CPU share (bottom), ± SE", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_abc(title: str, cells: Exp1, path: Path) -> None:
    plt = pyplot()
    t5 = PAPER["tables5to7_with_mechanism"]
    quotas = sorted({k[1] for k in cells}, reverse=True)
    cmds = [c for c in EXP1_CMDS if any(k[0] == c for k in cells)]
    fig, axes = plt.subplots(
        1, len(cmds), figsize=(max(5 * len(cmds) + 1, 10), 4.8), sharey=True, squeeze=False
    )
    sources = ["paper", *(s for s in SOURCES if any(k[2] == s for k in cells))]
    width = 0.8 / len(sources)
    for ax, cmd in zip(axes[0], cmds, strict=True):
        for j, src in enumerate(sources):
            xs, bs, cs, unch, err = [], [], [], [], []
            for i, q in enumerate(quotas):
                if src == "paper":
                    if q not in t5["quota_ms"]:
                        continue
                    a, b, c, _, _ = t5[EXP1_CMDS[cmd]][t5["quota_ms"].index(q)]
                    e = 0.0
                else:
                    x = cells.get((cmd, q, src))
                    if x is None:
                        continue
                    a, b, c = x["A"], x["B"], x["C"]
                    e = x["B_plus_C_se"] or 0.0
                xs.append(i + (j - (len(sources) - 1) / 2) * width)
                bs.append(b)
                cs.append(c)
                unch.append(max(a - b, 0.0))
                err.append(e)
            if not xs:
                continue
            ax.bar(xs, cs, width, color="tab:blue", label="C container" if j == 0 else None)
            ax.bar(xs, bs, width, bottom=cs, color="tab:orange", label="B charged" if j == 0 else None)
            tops = [b + c for b, c in zip(bs, cs, strict=True)]
            ax.errorbar(xs, tops, yerr=err, fmt="none", ecolor="black", capsize=2, linewidth=0.8)
            ax.bar(
                xs,
                unch,
                width,
                bottom=tops,
                color="none",
                edgecolor="tab:red",
                hatch="//",
                label="A-B not charged" if j == 0 else None,
            )
            for x0 in xs:
                ax.text(x0, 101, BAR_LABEL[src], ha="center", fontsize=5, rotation=90)
        for i, q in enumerate(quotas):
            ax.hlines(q, i - 0.45, i + 0.45, color="black", linewidth=1)
        ax.set_xticks(range(len(quotas)))
        ax.set_xticklabels([f"{q} ms" for q in quotas])
        ax.set_title(cmd, fontsize=9)
    axes[0][0].set_ylabel("% of one CPU (line: the quota; ± SE of B+C)")
    axes[0][0].set_ylim(0, 115)
    axes[0][0].legend(fontsize=7, loc="center right")
    fig.suptitle(
        f"Experiment 1, {title}: logging CPU (A), charged (B), container (C)\nbars: "
        + ", ".join(f"{BAR_LABEL[s]} = {SOURCE_LABEL.get(s, s)}" for s in sources),
        fontsize=8,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# --- overhead ------------------------------------------------------------------------


def boot_kind(vm: Vm) -> str:
    """What a boot did before sysbench alone: nothing (the overhead part's
    boots), or experiment 1 (the experiments' boots). On the instruction
    clock the two differ by 0.2 %, far more than the kernels: compared
    apart."""
    # (Older runs: stock-v2, overhead-patched-v2 and their -icount- pair.)
    older = re.search(r"-b\d+$", vm.name) is None and vm.name.startswith(("stock", "overhead-"))
    return "sysbench alone" if vm.name.startswith("n1-") or older else "experiments"


def overhead_runs(vms: list[Vm]) -> dict[tuple[str, str, str], dict[str, list[list[float]]]]:
    """The N = 1 sysbench runs' events/s, one list per boot, per kernel, per
    overhead comparison: hierarchy, clock and kind of boot."""
    per: dict[tuple[str, str, str], dict[str, list[list[float]]]] = {}
    for vm in vms:
        ev = [float(r["events_per_s"]) for r in read_csv(vm.dir / "exp2_runs.csv") if r["n"] == "1"]
        if ev:
            key = (vm.hier, vm.clock, boot_kind(vm))
            per.setdefault(key, {}).setdefault(vm.kernel, []).append(ev)
    return per


def overhead_key(key: tuple[str, str, str]) -> str:
    """An overhead comparison's key in the summary."""
    return " ".join(key)


def overhead(vms: list[Vm]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """N = 1 events/s per boot, stock vs patched, per hierarchy, clock and
    kind of boot."""
    per = {
        key: {kernel: [statistics.fmean(ev) for ev in boots] for kernel, boots in k.items()}
        for key, k in overhead_runs(vms).items()
    }
    out = {}
    for key, k in per.items():
        s, p = k.get("stock", []), k.get("patched", [])
        if not s or not p:
            continue
        ms, mp = statistics.fmean(s), statistics.fmean(p)
        se = None
        if len(s) > 1 and len(p) > 1:
            se = (
                100
                * (mp / ms)
                * math.sqrt(
                    (statistics.stdev(p) / mp) ** 2 / len(p) + (statistics.stdev(s) / ms) ** 2 / len(s)
                )
            )
        # The interval's degrees of freedom: the smaller kernel's boots - 1
        # (the conservative choice for two samples of unequal spread).
        ci = ci95(se, min(len(s), len(p)))
        out[key] = {
            "stock": s,
            "patched": p,
            "delta_pct": 100 * (mp - ms) / ms,
            "delta_se_pct": se,
            "delta_ci_pct": ci,
        }
    return out


def overhead_section(ov: dict[tuple[str, str, str], dict[str, Any]]) -> list[str]:
    if not ov:
        return []
    out = [
        "### Overhead",
        "",
        "sysbench alone (N = 1, quota 100 ms / 100 ms) on the stock kernel (stock nerdctl) and on the "
        "patched kernel (charging unused): each boot's mean events/s; the delta's 95 % interval "
        "(Student t, df = the fewer kernel's boots - 1). " + PAPER_N1 + " Boots that ran "
        "sysbench alone and boots that ran it after experiment 1 are compared apart.",
        "",
        "| hierarchy | clock | boots | stock, per boot | patched, per boot | delta | 95 % interval |",
        "|---|---|---|---|---|---|---|",
    ]
    for (hier, clock, kind), x in sorted(ov.items()):
        out.append(
            f"| {hier} | {CLOCK_NAME[clock]} | {kind} | {', '.join(f'{v:.2f}' for v in x['stock'])} | "
            f"{', '.join(f'{v:.2f}' for v in x['patched'])} | {x['delta_pct']:+.3f} % | "
            f"{fmt_interval(x['delta_pct'], x['delta_ci_pct'], 3, ' %')} |"
        )
    out.append("")
    return out


def throughput_section(vms: list[Vm], summary: dict[str, Any]) -> list[str]:
    tp: dict[tuple[str, str], dict[str, list[float]]] = {}
    for vm in vms:
        for r in read_csv(vm.dir / "throughput.csv"):
            tp.setdefault((vm.hier, vm.clock), {}).setdefault(r["mode"], []).append(
                int(r["log_bytes"]) / int(r["window_us"]) * 1e3
            )
    if not tp:
        return []
    out = [
        "Logging throughput, `yes` without quota, kB/s of json log, windows alternating off / process "
        "(mean ± the half-width of its 95 % interval across the windows):",
        "",
        "| hierarchy | clock | off | process |",
        "|---|---|---|---|",
    ]
    summary["throughput_kBps"] = {f"{h} {c}": v for (h, c), v in tp.items()}
    for (h, c), v in sorted(tp.items()):
        out.append(
            f"| {h} | {CLOCK_NAME[c]} | {fmt_pm(*mean_ci(v.get('off', [])), 0)} | "
            f"{fmt_pm(*mean_ci(v.get('process', [])), 0)} |"
        )
    out.append("")
    return out


def engines_section(engines: list[tuple[Path, dict[str, Any]]], summary: dict[str, Any]) -> list[str]:
    rows = []
    for d, run in engines:
        for r in read_csv(d / "engines.csv"):
            wall = int(r["wall_us"])
            a = pct(int(r["worker_ns"]) / 1000, wall)
            b, c = pct(r["charged_us"], wall), pct(r["container_us"], wall)
            ev = float(r["sysbench_events_per_s"]) if r["sysbench_events_per_s"] not in ("", "-") else None
            alone = float(r["alone_events_per_s"]) if r["alone_events_per_s"] not in ("", "-") else None
            rows.append(
                {
                    "engine": r["engine"],
                    "mode": r["mode"],
                    "clock": run.get("clock", "wall"),
                    "A": a,
                    "B": b,
                    "C": c,
                    "B_over_A": 100 * b / a if a > 0 else None,
                    "neighbour_ratio": ev / alone if ev and alone else None,
                    # What kubelet (cAdvisor) shows of it: the share of
                    # periods throttled (kept from runs before it was).
                    "throttled_pct": 100 * int(r["throttled_periods"]) / int(r["periods"])
                    if int(r.get("periods") or 0) > 0
                    else None,
                }
            )
    summary["engines"] = rows
    if not rows:
        return []
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["engine"], r["mode"], r["clock"]), []).append(r)
    out = [
        "### Unchanged engines with borrowd",
        "",
        "A container floods its output (`yes`) under a quota of 50 ms per 100 ms; its engine's worker "
        "copies it on the same CPU: Podman's conmon and stock nerdctl's logging process (one per "
        "container: borrowd's process rule), dockerd and containerd's CRI plugin (one for all: the "
        "thread rule). Without borrowd "
        "(off), with it, and with it pacing the worker (`--pace`: a worker stopped while its "
        "container owes more than two periods' quota) where the run had that mode; a sysbench "
        "neighbour's events/s against sysbench alone "
        "(tools/tests/engines-in-guest.sh). Shares of one CPU, %; "
        + PM_BOOTS_LOWER
        + " (one boot: its value). Throttled: the share of the "
        "container's periods in which it was throttled (cpu.stat, which cAdvisor exports to "
        "kubelet as container_cpu_cfs_throttled_periods_total over ..._periods_total).",
        "",
        "| engine | mode | clock | boots | worker A | charged B | container C | B+C | B/A % | throttled % "
        "| neighbour / alone |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    # The engines as the run ran them; per engine off, borrowd, pace.
    engine_order = list(dict.fromkeys(r["engine"] for r in rows))
    mode_order = {m: i for i, m in enumerate(("off", "borrowd", "pace"))}
    for (engine, mode, clock), rs in sorted(
        groups.items(), key=lambda kv: (engine_order.index(kv[0][0]), mode_order.get(kv[0][1], 9), kv[0][2])
    ):

        def cell(key: str, digits: int, rs: list[dict[str, Any]] = rs) -> str:
            xs = [r[key] for r in rs if r[key] is not None]
            if not xs:
                return "-"
            m, half = mean_ci(xs)
            return fmt_pm(m, half, digits)

        for r in rs:
            r["B_plus_C"] = r["B"] + r["C"]
        out.append(
            f"| {engine} | {mode} | {CLOCK_NAME[clock]} | {len(rs)} | {cell('A', 2)} | {cell('B', 2)} | "
            f"{cell('C', 2)} | {cell('B_plus_C', 2)} | {cell('B_over_A', 1)} | {cell('throttled_pct', 1)} | "
            f"{cell('neighbour_ratio', 3)} |"
        )
    out.append("")
    return out


# --- the agent: borrowd's quota mode against the kernel's file -------------------------

# The comparison's sources, in its order: the stock kernel without and with
# borrowd (its quota mode there), borrowd on the patched kernel with the
# kernel's file and with its quota mode forced, the patched logger, the
# logger in its container's cgroup.
AGENT_SOURCES = ("stock", "stock-agent", "stock-agent-quota", "agent", "agent-quota", "process", "incg")
# Differences paired per boot (both sources ran in the same VM): what the
# quota mode gives up against the kernel's file; what borrowd gives a stock
# kernel; borrowd with the kernel's file against the patched logger.
AGENT_PAIRS = (
    ("agent-quota", "agent", "quota mode - kernel file (patched kernel)"),
    ("stock-agent", "stock", "borrowd (quota mode) - nothing (stock kernel)"),
    ("agent", "process", "borrowd (kernel file) - patched logger"),
)
AGENT_EXP1 = (
    ("A", "A", 2),
    ("B_over_A", "B/A %", 1),
    ("BC_over_quota", "(B+C)/quota %", 1),
    ("paid", "paid", 2),
    ("regained", "regained", 2),
    ("agent_cpu", "agent CPU", 2),
    ("quota_writes_per_s", "quota writes/s", 2),
)
AGENT_EXP2 = (
    ("sysbench_cpu", "sysbench CPU", 2),
    ("events", "events/s", 1),
    ("cpu_ratio", "CPU-share ratio", 3),
    ("ratio", "events/s ratio", 3),
    ("BC_over_quota", "noisy (B+C)/quota %", 1),
    ("paid", "noisy paid", 2),
    ("regained", "regained", 2),
    ("B_over_A", "B/A %", 1),
    ("agent_cpu", "agent CPU", 2),
    ("quota_writes_per_s", "quota writes/s", 2),
)
AGENT_PAIRED = {
    "exp1": ("BC_over_quota", "paid", "agent_cpu", "quota_writes_per_s"),
    "exp2": ("sysbench_cpu", "cpu_ratio", "ratio", "BC_over_quota", "agent_cpu", "quota_writes_per_s"),
}

Boots = dict[str, dict[str, float | None]]  # per boot: metric -> value


def client_use(a: float, b: float, c: float, source: str) -> float:
    """What the client used and was charged: B + C, or in incg, where the
    logger runs in the container's cgroup and nothing is charged, A + C."""
    return a + c if source.endswith("incg") else b + c


def agent_exp1(vms: list[Vm]) -> dict[tuple[str, int, str], Boots]:
    """Experiment 1 per (cmd, quota, source): per boot the comparison's metrics."""
    out: dict[tuple[str, int, str], Boots] = {}
    for vm in vms:
        for r in exp1_rows(vm):
            if r["mode"] not in AGENT_SOURCES:
                continue
            src = r["mode"]
            out.setdefault((r["cmd"], r["quota_ms"], src), {})[vm.boot] = {
                "A": r["A"],
                "B_over_A": None if src.endswith("incg") else r["B_over_A"],
                "BC_over_quota": 100 * client_use(r["A"], r["B"], r["C"], src) / r["quota_pct"],
                "paid": r["paid"],
                "regained": r.get("agent_regained") if r.get("agent_mode") == "quota" else None,
                "agent_cpu": r.get("agent_cpu") if r.get("agent_mode") not in (None, "none") else None,
                "quota_writes_per_s": r.get("quota_writes_per_s")
                if r.get("agent_mode") not in (None, "none")
                else None,
            }
    return out


def agent_exp2(vms: list[Vm]) -> dict[tuple[int, str, str], Boots]:
    """Experiment 2 per (N, cmd, source), N > 1: per boot the comparison's metrics."""
    out: dict[tuple[int, str, str], Boots] = {}
    for vm in vms:
        c = exp2_cells(read_csv(vm.dir / "exp2.csv"), read_csv(vm.dir / "exp2_runs.csv"))
        if vm.kernel == "stock":
            c = {(n, cmd, "stock" if m == "off" else f"stock-{m}"): v for (n, cmd, m), v in c.items()}
        for (n, cmd, src), x in c.items():
            if n < 2 or src not in AGENT_SOURCES:
                continue
            ratio, _, cpu_ratio = boot_ratios(c, n, cmd, src) if cmd != "cmd1" else (None, None, None)
            a, b, cc = x["noisy_A"], x["noisy_B"], x["noisy_C"]
            agent = x.get("agent_mode") not in (None, "none")
            out.setdefault((n, cmd, src), {})[vm.boot] = {
                "sysbench_cpu": x["sysbench_cpu"],
                "events": x["events_mean"],
                "cpu_ratio": cpu_ratio,
                "ratio": ratio,
                "BC_over_quota": 100 * client_use(a, b, cc, src) / ((n - 1) * x["quota_pct"]),
                "paid": x["noisy_paid"],
                "regained": x.get("agent_regained") if x.get("agent_mode") == "quota" else None,
                "B_over_A": 100 * b / a if a > 0 and not src.endswith("incg") else None,
                "agent_cpu": x.get("agent_cpu") if agent else None,
                "quota_writes_per_s": x.get("quota_writes_per_s") if agent else None,
            }
    return out


def summarize(boots: Boots, keys: tuple[tuple[str, str, int], ...]) -> dict[str, Any]:
    """Per metric the boots' mean and its 95 % interval's half-width."""
    cell: dict[str, Any] = {"boots": len(boots)}
    for k, _, _ in keys:
        xs = [v[k] for v in boots.values() if v.get(k) is not None]
        m, half = mean_ci(xs)
        cell[k] = {"mean": m, "ci95": half, "n": len(xs)}
    return cell


def paired(boots_a: Boots, boots_b: Boots, key: str) -> tuple[float, float | None, int] | None:
    """Source a minus source b, per boot that ran both: mean, half-width, boots."""
    d = [
        va[key] - vb[key]
        for b, va in boots_a.items()
        if b in boots_b and va.get(key) is not None and (vb := boots_b[b]).get(key) is not None
    ]
    if not d:
        return None
    m, half = interval_of(d)
    return m, half, len(d)


def agent_section(vms: list[Vm], summary: dict[str, Any]) -> list[str]:
    """borrowd on the stock kernel (its quota mode) and on the patched one
    (the kernel's file, and its quota mode forced) against the stock kernel
    alone, the patched logger and the logger in its container's cgroup; per
    hierarchy and cell, with the differences paired per boot."""
    groups = sorted({(v.hier, v.clock) for v in vms}, key=lambda x: (x[0] != "v2", x[1]))
    per = {}
    for hier, clock in groups:
        g = [v for v in vms if v.hier == hier and v.clock == clock and not v.name.startswith("n1-")]
        e1, e2 = agent_exp1(g), agent_exp2(g)
        if any(k[2] in AGENT_MODES or k[2].startswith("stock-agent") for k in [*e1, *e2]):
            per[(hier, clock)] = (e1, e2)
    if not per:
        return []
    out = [
        "## borrowd: the quota mode against the kernel's file",
        "",
        "Why change the kernel: borrowd (tools/borrowd) charges stock nerdctl's logging process to its "
        "container on any kernel, by lowering the container's CFS quota for the next periods where the "
        "kernel lacks `cpu.cfs.borrowing_us` (its quota mode), or through that file. Sources: the stock "
        "kernel without borrowd and with it (auto mode: the quota mode there); the patched kernel with "
        "borrowd in auto mode (the kernel's file) and with its quota mode forced (`--mode quota`); the "
        "patched logger charging itself (`process`); the logger moved into its container's cgroup "
        "(`incg`). borrowd ran on CPU 0 with the containers (`--engines containerd --scan-ms 200`, no "
        "`--pace`), started for each cell before its containers and stopped after it. A = the logging "
        "processes' CPU, B = what was charged (the kernel's borrowed counter; in the quota mode, which "
        "the kernel does not count, borrowd's accounts of the containers' groups, what its bound "
        "dropped included as the kernel's counter includes it), C = the containers' own CPU; (B+C)/quota "
        "is what the containers used and were charged against their quotas (incg: A+C, the logger "
        "inside the quota); paid = the part of the charges the containers' quotas paid in the window "
        "(the kernel's deducted counter, or borrowd's paid account), % of one CPU; regained = what the "
        "containers used beyond their quotas after borrowd's quota writes (a write refills the runtime), "
        "which its quota mode counts and charges back on top of B, % of one CPU; agent CPU = "
        "borrowd's own CPU (getrusage: its BPF programs' time is in the tasks they run in), % of one "
        "CPU; quota writes = its writes of cpu.max / cpu.cfs_quota_us per "
        "second. " + PM_BOOTS,
        "",
    ]
    summary["agent"] = {}
    for (hier, clock), (e1, e2) in per.items():
        gkey = f"{hier} {clock}"
        sg: dict[str, Any] = {"exp1": {}, "exp2": {}, "paired": []}
        summary["agent"][gkey] = sg
        out += [f"### cgroup {hier}, {CLOCK_NAME[clock]}", ""]
        if e1:
            out += [
                "Experiment 1 (one container; shares of one CPU, %):",
                "",
                "| command | quota | source | boots | " + " | ".join(h for _, h, _ in AGENT_EXP1) + " |",
                "|---" * (4 + len(AGENT_EXP1)) + "|",
            ]
            for (cmd, q, src), boots in sorted(
                e1.items(),
                key=lambda x: (list(EXP1_CMDS).index(x[0][0]), -x[0][1], AGENT_SOURCES.index(x[0][2])),
            ):
                cell = summarize(boots, AGENT_EXP1)
                sg["exp1"][f"{cmd}:{q}:{src}"] = cell
                vals = [fmt_pm(cell[k]["mean"], cell[k]["ci95"], d) for k, _, d in AGENT_EXP1]
                out.append(
                    f"| {cmd} | {q} ms | {SOURCE_LABEL[src]} | {cell['boots']} | " + " | ".join(vals) + " |"
                )
            out.append("")
        if e2:
            out += [
                "Experiment 2 (sysbench next to N-1 noisy containers; its CPU share, %, events/s and their "
                "ratios to its cmd1 baseline of the same N and source; the noisy containers' (B+C) over "
                "their quotas' sum):",
                "",
                "| N | command | source | boots | " + " | ".join(h for _, h, _ in AGENT_EXP2) + " |",
                "|---" * (4 + len(AGENT_EXP2)) + "|",
            ]
            for (n, cmd, src), boots in sorted(
                e2.items(), key=lambda x: (x[0][0], x[0][1], AGENT_SOURCES.index(x[0][2]))
            ):
                cell = summarize(boots, AGENT_EXP2)
                sg["exp2"][f"{n}:{cmd}:{src}"] = cell
                vals = [fmt_pm(cell[k]["mean"], cell[k]["ci95"], d) for k, _, d in AGENT_EXP2]
                out.append(
                    f"| {n} | {cmd} | {SOURCE_LABEL[src]} | {cell['boots']} | " + " | ".join(vals) + " |"
                )
            out.append("")
        rows = []
        names = {
            "exp1": {k: h for k, h, _ in AGENT_EXP1},
            "exp2": {k: h for k, h, _ in AGENT_EXP2},
        }
        for a, b, what in AGENT_PAIRS:
            for exp, cells in (("exp1", e1), ("exp2", e2)):
                for key in sorted(k for k in cells if k[2] == a):
                    other = (key[0], key[1], b)
                    if other not in cells:
                        continue
                    where = f"{key[0]} {key[1]} ms" if exp == "exp1" else f"N={key[0]} {key[1]}"
                    for metric in AGENT_PAIRED[exp]:
                        d = paired(cells[key], cells[other], metric)
                        if d is None:
                            continue
                        m, half, nb = d
                        rows.append(
                            f"| {what} | {exp} {where} | {names[exp][metric]} | {nb} | {m:+.3f} | "
                            f"{fmt_interval(m, half, 3)} |"
                        )
                        sg["paired"].append(
                            {
                                "pair": [a, b],
                                "exp": exp,
                                "cell": where,
                                "metric": metric,
                                "effect": m,
                                "ci95": half,
                                "boots": nb,
                            }
                        )
        if rows:
            out += [
                "Differences paired per boot (both sources in the same VM): the mean and its 95 % "
                "interval (Student t, df = boots - 1; '-': one boot).",
                "",
                "| difference | cell | metric | boots | effect | 95 % interval |",
                "|---|---|---|---|---|---|",
                *rows,
                "",
            ]
    return out


# --- targets -------------------------------------------------------------------------


def interval_of(xs: list[float]) -> tuple[float, float | None]:
    """Mean of xs and the half-width of its 95 % interval (None with one value)."""
    m, half = mean_ci(xs)
    assert m is not None
    return m, half


def targets_section(summary: dict[str, Any]) -> list[str]:
    """Each target, judged per cell by the cell's 95 % interval across boots:
    met only where every cell's interval lies inside the target."""
    out = [
        "## Targets (charging in process mode)",
        "",
        "Per cell the mean and its 95 % interval across boots (Student t, df = boots - 1; the N = 1 "
        "delta: df = the fewer kernel's boots - 1). A target is judged on the cells measured in more "
        "than one boot (the full tier's headline cells) and met only where every such cell's interval "
        "lies inside it; a cell whose interval lies wholly outside misses it, one whose interval "
        "straddles the bound leaves it open. Cells measured in one boot (the full tier's grid, the "
        "quick tier) have no interval: their worst mean stands in the last column, not judged (with "
        "no other cells: not resolved). A target on the instruction clock is judged only from cells "
        "measured there.",
        "",
        "| target | resolution | cells | worst cell: mean [95 % interval] | inside / outside / open | met "
        "| one boot: cells, worst mean |",
        "|---|---|---|---|---|---|---|",
    ]
    summary["targets"] = []

    # A cell: (mean, half-width or None, label); inside(lo, hi) -> bool.
    def line(
        name: str,
        cells: list[tuple[float, float | None, str]],
        lo: float,
        hi: float,
        band: bool,
        resolution: str,
        digits: int = 3,
    ) -> None:
        if not cells:
            out.append(f"| {name} | {resolution} | 0 | not measured | - | - | - |")
            return
        judged = [(m, h, w) for m, h, w in cells if h is not None]
        single = [(m, w) for m, h, w in cells if h is None]
        inside = sum(lo <= m - h and m + h <= hi for m, h, _ in judged)
        outside = sum(m + h < lo or m - h > hi for m, h, _ in judged)
        opened = len(judged) - inside - outside

        # The worst: the lowest mean for a lower bound, the farthest from 0 for a band.
        def badness(m: float) -> float:
            return -abs(m) if band else m

        one = "-"
        if single:
            sm, swhere = min(single, key=lambda c: badness(c[0]))
            one = f"{len(single)}, {sm:.{digits}f} ({swhere})"
        half: float | None = None
        if judged:
            m, half, where = min(judged, key=lambda c: badness(c[0]))
            shown = f"{m:.{digits}f} [{m - half:.{digits}f}, {m + half:.{digits}f}] ({where})"
            met = "yes" if inside == len(judged) else "no" if outside else "not resolved"
        else:
            m, where = sm, swhere
            shown, met = "-", "not resolved"
        out.append(
            f"| {name} | {resolution} | {len(judged)} | {shown} | {inside} / {outside} / {opened} | {met} "
            f"| {one} |"
        )
        summary["targets"].append(
            {
                "target": name,
                "resolution": resolution,
                "cells": len(judged),
                "inside": inside,
                "outside": outside,
                "open": opened,
                "met": met,
                "worst": {"mean": m, "ci95": half, "cell": where},
                "one_boot_cells": len(single),
            }
        )

    groups = summary["groups"]
    fair, ev, boa, bcq, incg = [], [], [], [], []
    # sysbench against its fair share where nothing logs (cmd1, N > 1, any
    # mode): what the scheduler itself leaves it, beside the target's cells.
    unlogged = []
    for g, gs in groups.items():
        for qset in ("exp2", "headroom"):
            for k, x in gs.get(qset, {}).items():
                n, cmd, mode = k.split(":")
                if cmd == "cmd1" and n != "1" and x.get("to_fair") is not None:
                    unlogged.append(100 * (x["to_fair"] - 1))
                if mode == "process" and cmd != "cmd1" and n != "1" and x.get("to_fair") is not None:
                    fair.append(
                        (
                            100 * (x["to_fair"] - 1),
                            x.get("to_fair_ci") and 100 * x["to_fair_ci"],
                            f"{g}{' headroom' if qset == 'headroom' else ''} N={n} {cmd}, %",
                        )
                    )
        for k, x in gs.get("exp2", {}).items():
            n, cmd, mode = k.split(":")
            if mode != "process" or cmd == "cmd1" or n == "1":
                continue
            where = f"{g} N={n} {cmd}"
            if x.get("ratio") is not None and gs["clock"] == "icount":
                ev.append((x["ratio"], x.get("ratio_ci"), where))
            inc = gs["exp2"].get(f"{n}:{cmd}:incg")
            if inc:
                # Process mode and incg of the same boot: paired per boot.
                pb, ib = x.get("sysbench_cpu_by_boot", {}), inc.get("sysbench_cpu_by_boot", {})
                d = [pb[b] - ib[b] for b in pb if b in ib]
                if d:
                    incg.append((*interval_of(d), f"{where}, pt"))
        for k, x in gs.get("exp1", {}).items():
            cmd, q, mode = k.split(":")
            if mode != "process":
                continue
            if x.get("B_over_A") is not None:
                boa.append((x["B_over_A"], x.get("B_over_A_ci"), f"{g} {cmd} {q} ms"))
            bcq.append((x["B_plus_C_minus_quota"], x.get("B_plus_C_minus_quota_ci"), f"{g} {cmd} {q} ms, pt"))
    inf = math.inf
    f = TARGET_FAIR_PCT
    line(
        f"sysbench CPU share within ±{f:g} % of its fair share (sysbench / fair - 1)",
        fair,
        -f,
        f,
        True,
        "1 µs of CPU (cgroup and run-queue counters) in a window of 2 s or more",
        2,
    )
    line(
        f"sysbench events/s ratio ≥ {TARGET_EVENTS_RATIO} (instruction clock)",
        ev,
        TARGET_EVENTS_RATIO,
        inf,
        False,
        "0.01 events/s (sysbench's print)",
    )
    ares = (
        "A: 1 µs (the scheduler's count) where the run has it, else 10 ms ticks; B: a charge batch "
        "may fall either side of the window's edges"
    )
    line(f"B/A ≥ {TARGET_B_OVER_A} %", boa, TARGET_B_OVER_A, inf, False, ares, 2)
    p = TARGET_B_PLUS_C_POINTS
    line(f"B+C - quota within ±{p} pt", bcq, -p, p, True, ares, 2)
    ov = [
        (x["delta_pct"], x.get("delta_ci_pct"), f"{k}, %")
        for k, x in summary["overhead"].items()
        if " icount " in k
    ]
    o = TARGET_OVERHEAD_PCT
    line(
        f"N = 1 events/s, patched vs stock, within ±{o} % (instruction clock)",
        ov,
        -o,
        o,
        True,
        "0.01 events/s (sysbench's print)",
    )
    i = TARGET_VS_INCG_POINTS
    line(
        f"sysbench CPU share within ±{i} pt of the logger-in-container-cgroup mode's (process - incg, "
        "paired per boot)",
        incg,
        -i,
        i,
        True,
        "1 µs of CPU in a window of 2 s or more",
        2,
    )
    if unlogged:
        out += [
            "",
            f"Where nothing logs (cmd1, N > 1, every source: {len(unlogged)} cells) sysbench got "
            f"{min(unlogged):+.2f} to {max(unlogged):+.2f} % of its fair share: what CFS's bandwidth "
            "control gives it with no logging process at all, the reference for the fair-share target.",
        ]
    out += [
        "",
        "The worst cell: the lowest mean for a lower bound, the mean farthest from 0 for a band. "
        "B/A's resolution: A, the logging process's "
        "CPU, is the scheduler's count of its threads (µs; in runs before it was recorded, 10 ms ticks "
        "read at each end of the window: ±0.5 to 2.4 % of A in those cells), "
        "and charges lag at the window's edges; `check_noisy_logging.py` holds every window's B to A "
        f"within ±({B_RESOLUTION_PTS:g} % of the window + {B_RESOLUTION_US // 1000} ms) per logging "
        "process.",
        "",
    ]
    return out


def resolution_section(summary: dict[str, Any]) -> list[str]:
    """Whether the boots resolve the effects: per cell of experiment 2,
    process mode's ratio minus off's, paired per boot, with its 95 % interval."""
    rows = []
    for g, gs in summary["groups"].items():
        for k, x in gs.get("exp2", {}).items():
            n, cmd, mode = k.split(":")
            off = gs["exp2"].get(f"{n}:{cmd}:off")
            if mode != "process" or cmd == "cmd1" or not off:
                continue
            for key, what in (("ratio", "events/s"), ("cpu_ratio", "CPU share")):
                pb, ob = x.get(key + "_by_boot", {}), off.get(key + "_by_boot", {})
                d = [pb[b] - ob[b] for b in pb if b in ob]
                if d:
                    rows.append((g, n, cmd, what, *interval_of(d), len(d)))
    summary["resolution"] = [
        {"group": g, "n": n, "cmd": c, "ratio": w, "effect": e, "ci95": h, "boots": b}
        for g, n, c, w, e, h, b in rows
    ]
    if not rows:
        return []
    out = [
        "## Resolution",
        "",
        "Charging's effect on sysbench: process mode's ratio minus off's, per boot (both modes ran in "
        "every patched boot), its mean and 95 % interval across boots (Student t, df = boots - 1); "
        "resolved where the interval excludes 0 ('-': one boot, no interval).",
        "",
        "| group | N | command | ratio | boots | effect | 95 % interval | resolved |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for g, n, c, w, e, h, b in rows:
        res = "-" if h is None else "yes" if abs(e) > h else "no"
        out.append(f"| {g} | {n} | {c} | {w} | {b} | {e:+.3f} | {fmt_interval(e, h, 3)} | {res} |")
    out.append("")
    return out


def render(raw: Path, plots: Path | None) -> tuple[str, dict[str, Any]] | None:
    """The report's text and summary from the runs under raw, and the plots
    into plots (None: none drawn); None without raw data."""
    vms, runs, engines = load_vms(raw) if raw.is_dir() else ([], [], [])
    if not vms and not engines:
        return None
    summary: dict[str, Any] = {"runs": runs, "groups": {}, "hierarchies": {}}
    body: list[str] = []
    # One configuration per hierarchy and clock; the kernels side by side.
    for hier, clock in sorted({(v.hier, v.clock) for v in vms}, key=lambda x: (x[0] != "v2", x[1])):
        group = [v for v in vms if v.hier == hier and v.clock == clock]
        e1 = {}
        e2: dict[tuple[int, str, str], dict[str, Any]] = {}
        hr: dict[tuple[int, str, str], dict[str, Any]] = {}
        headroom = max((v.meta.get("headroom_pct", 0) for v in group), default=0)
        for kernel in ("stock", "patched"):
            kv = [v for v in group if v.kernel == kernel]
            e1.update(exp1_cells(kv))
            e2.update(exp2_group(kv))
            if headroom:
                hr.update(exp2_group(kv, headroom))
        if not e1 and not any(k[0] > 1 for k in e2):
            continue
        metas = [v.meta for v in group]
        m0 = next((v.meta for v in group if v.kernel == "patched"), metas[0])
        boots = len(
            {v.boot for v in group if v.kernel == "patched" and not v.name.startswith(("n1-", "overhead-"))}
        )
        opts = (
            f"{CLOCK_NAME[clock]}, {boots} boot(s); "
            f"sysbench {m0['sysbench_runs']} x {m0['sysbench_time_s']} s"
            + (", sysbench burst" if any(m.get("sysbench_burst") for m in metas) else "")
        )
        title = f"cgroup {hier}, {opts}"
        tag = f"{hier}" if clock == "icount" else f"{hier}_{clock}"
        gkey = f"{hier} {clock}"
        summary["groups"][gkey] = {
            "hierarchy": hier,
            "clock": clock,
            "boots": boots,
            "exp1": {f"{c}:{q}:{m}": x for (c, q, m), x in e1.items()},
            "exp2": {f"{n}:{c}:{m}": x for (n, c, m), x in e2.items()},
            "headroom": {f"{n}:{c}:{m}": x for (n, c, m), x in hr.items()},
        }
        summary["hierarchies"][gkey] = summary["groups"][gkey]
        body += [f"## cgroup {hier}, {CLOCK_NAME[clock]}", ""]
        if e1:
            lsmod = [m["lsmod_lines"] for m in metas if "lsmod_lines" in m]
            body += exp1_section(title, e1, lsmod)
            if plots:
                plot_abc(title, e1, plots / f"exp1_abc_{tag}.png")
            body += [f"![A/B/C bars, {hier}](plots/exp1_abc_{tag}.png)", ""]
        if any(k[0] > 1 for k in e2):
            body += exp2_section(title, e2, "")
            if plots:
                plot_ratios(title, e2, plots / f"exp2_ratio_{tag}.png")
            body += [f"![ratios vs N, {hier}](plots/exp2_ratio_{tag}.png)", ""]
        if hr:
            body += headroom_section(title, hr, headroom)
    ov = overhead(vms)
    summary["overhead"] = {overhead_key(key): x for key, x in ov.items()}
    body += overhead_section(ov)
    body += throughput_section([v for v in vms if v.kernel == "patched"], summary)
    body += engines_section(engines, summary)
    m0 = vms[0].meta if vms else {}
    secs = sum(r.get("seconds", 0) for r in runs)
    head = [
        "# Noisy logging: the reference study, reproduced",
        "",
        f"Tier: **{', '.join(sorted({r.get('tier', '?') for r in runs}) or {m0.get('tier', '?')})}**; "
        + (
            f"{len(runs)} run(s) ("
            + "; ".join(
                f"{r.get('parts', '?')} on the "
                + CLOCK_NAME[r.get("clock", "icount" if r.get("icount") else "wall")]
                for r in runs
            )
            + f"), measured in {secs // 60} min on a {runs[0]['host_cpus']}-CPU host. "
            if runs
            else ""
        )
        + (
            f"Kernel {m0['kernel']} (patched) and the stock kernel from the same source; "
            f"{m0['runtime']}, containerd {m0['containerd']}, sysbench {m0['sysbench']}. "
            f"QEMU TCG, {m0['cpus']} vCPUs, everything pinned to CPU 0; period 100 ms. "
            f"Windows: {m0['exp1_window_s']} s after {m0['exp1_settle_s']} s"
            + (", from one period's start to another's" if m0.get("exp1_window_edges") == "period" else "")
            + (
                ", B/A from edges at a random point of a period after each"
                if m0.get("exp1_ratio_edges") == "random"
                else ""
            )
            + " (experiment 1); "
            f"{m0['sysbench_runs']} sysbench runs of {m0['sysbench_time_s']} s per cell and boot "
            "(experiment 2). On the instruction clock (QEMU -icount) a guest second is 10^9 "
            "instructions while a vCPU runs."
            if m0
            else ""
        ),
        "",
        *provenance_lines(runs),
        "The paper ran on bare metal (cgroup v1, Linux 5.4, a 4-core i7-6600U); this study runs in an "
        "emulated machine: compare shares of a CPU and ratios, not absolute events/s. Sources: the "
        "stock kernel with stock nerdctl (the paper's 'before'); the patched kernel with charging off "
        "(a check that the series changes nothing unused), in `process` mode (all of the logging "
        "process's CPU, the default), in `thread` mode (the copying threads only: the paper's rule, "
        "but not the paper's 'after': it runs unpaced and the series' bound drops what a group "
        "cannot pay, where the paper's kernel kept every charge, so its B + C runs far past the quota "
        "when `yes` floods), and with the logging process moved into its container's cgroup (`incg`, "
        "nothing charged: what Podman's conmon_cgroup or a pod does)."
        + (
            " The agent modes: stock nerdctl's logging process charged by borrowd, on the stock kernel "
            "in its quota mode, on the patched kernel through the kernel's file (`agent`) and in its "
            "quota mode forced (`agent-quota`); their comparison is the section on borrowd below. "
            + ("Not run here: " + ", ".join(missing) + "." if missing else "Every source ran.")
            if (missing := agent_run_missing(vms)) is not None
            else ""
        ),
        "",
    ]
    text = "\n".join(
        head + targets_section(summary) + resolution_section(summary) + agent_section(vms, summary) + body
    )
    return text + "\n", summary


def provenance_lines(runs: list[dict[str, Any]]) -> list[str]:
    """What the runs measured with (run.json's record; older runs have none)."""
    out = []
    for r in runs:
        if "commit" not in r:
            continue
        commits = r.get("commits", [r["commit"]])
        span = (
            f"**spans {len(commits)} commits** ({', '.join(c[:12] for c in commits)}: resumed across them)"
            if r.get("spans_commits")
            else f"commit {r['commit'][:12]}"
        )
        dirty = f", with {r['tree_changes']} changed tracked file(s)" if r.get("tree_changes") else ""
        kernels = "; ".join(f"{k} {v['release']}" for k, v in sorted(r.get("kernels", {}).items()))
        out.append(
            f"Run {r.get('parts', '?')}: {span}{dirty}; kernels {kernels}; {r.get('qemu', '?')}; host CPU "
            f"{r.get('host_cpu', '?')} (hashes of the series, kernels, configurations and binaries: "
            "run.json)."
        )
    commits = {c for r in runs for c in r.get("commits", [r["commit"]] if "commit" in r else [])}
    if len(runs) > 1:
        out.append(
            f"**{len(runs)} runs are pooled here** (their boots count together where they measured the same "
            "cells)" + (f", made at {len(commits)} different commits." if len(commits) > 1 else ".")
        )
    return [*out, ""] if out else []


def agent_run_missing(vms: list[Vm]) -> list[str] | None:
    """For a run with the agent modes, the sources of the study it did not
    run (None: no agent mode ran)."""
    ran = {
        ("stock-" if v.kernel == "stock" else "") + m for v in vms for m in v.meta.get("modes", "").split(",")
    }
    ran = {"stock" if m == "stock-off" else m for m in ran}
    if not ran & {"agent", "agent-quota", "stock-agent", "stock-agent-quota"}:
        return None
    return [
        SOURCE_LABEL[s]
        for s in ("stock", "off", "process", "thread", "incg", "agent", "agent-quota")
        if s not in ran
    ]


def dump_summary(summary: dict[str, Any]) -> str:
    return json.dumps(summary, indent=1, default=str) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dir", type=Path, help="the results directory of noisy_logging.sh")
    parser.add_argument(
        "--no-plots", action="store_true", help="write report.md and summary.json only (no matplotlib)"
    )
    args = parser.parse_args()
    raw = args.dir / "raw"
    plots = None if args.no_plots else args.dir / "plots"
    if plots:
        plots.mkdir(exist_ok=True)
    result = render(raw, plots)
    if result is None:
        print(
            f"noisy_logging_report: no raw data in {raw} (run experiments/noisy_logging.sh)", file=sys.stderr
        )
        return 1
    text, summary = result
    (args.dir / "report.md").write_text(text)
    (args.dir / "summary.json").write_text(dump_summary(summary))
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
