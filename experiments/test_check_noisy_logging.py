#!/usr/bin/env python3
"""check_noisy_logging.py on a kept run, and on corrupted copies of it; TAP.

Usage: test_check_noisy_logging.py [--run DIR] [--agent-run DIR] [--check FILE]
                                   [--any-failure] [--v3-only]

The first test: the check passes on the kept run (DIR, default
experiments/results/full). Then each test copies the run into a temporary
directory, damages the copy one way (charges, cells, boots, exits, logs,
kernels, clocks, the report), rewrites report.md and summary.json from the
damaged raw data where a real run would have written them so (only the
hand-edit tests leave them stale), and passes if the check fails on it
with the failure that names the damage (a `not ok` line holding the
expected words). The same for the kept run of borrowd's agent modes
(--agent-run, default experiments/results/agent; skipped where there is
none) and its own damage: the kernel counting charges in the quota mode,
borrowd in the wrong mode, charging a token share, the agent cells run with
the patched nerdctl. A run with v3's record (vm.json, A at the
scheduler's resolution, sysbench's percentiles) gets its damage too: A and
its tick count apart, a percentile not in sysbench's log, a baseline that
booted the patched image, a seed not the host's, commits hidden; with
--v3-only that damage alone (any run of that kind, the quick tier's too).
A run whose experiment 1 windows run from one period's start to another's
gets that damage too: a window opened halfway into a period, and agent
windows said to be aligned that are not. B/A's own
edges are made up on the copy (a quarter of a period after the window's,
which the check takes), then damaged: a period and a half off, B short of
A over them.
--check runs another version of the check (e.g. an
older one from git); --any-failure counts any failure as caught (for a
check whose test names differ). No VM, a few seconds.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import noisy_logging_report as report

HERE = Path(__file__).resolve().parent

Row = dict[str, str]


class Copy:
    """A kept run's copy: raw/ (one run), report.md, summary.json, plots/."""

    def __init__(self, src: Path, dst: Path) -> None:
        self.root = dst
        for name in ("raw", "plots"):
            if (src / name).is_dir():
                shutil.copytree(src / name, dst / name)
        for name in ("report.md", "summary.json"):
            if (src / name).is_file():
                shutil.copy2(src / name, dst / name)
        (self.run,) = [d for d in (dst / "raw").iterdir() if d.is_dir()]

    def vm(self, name: str) -> Path:
        return self.run / name

    def edit_csv(self, path: Path, change: Callable[[Row], Row | None]) -> int:
        """Rewrites path with change applied to every row (None: the row
        goes); returns how many rows it changed or removed."""
        with path.open() as f:
            reader = csv.DictReader(f)
            fields, old = reader.fieldnames or [], list(reader)
        new, changed = [], 0
        for r in old:
            r2 = change(dict(r))
            changed += r2 != r
            if r2 is not None:
                new.append(r2)
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
            w.writeheader()
            w.writerows(new)
        assert changed, f"nothing changed in {path}"
        return changed

    def edit_json(self, path: Path, change: Callable[[dict], None]) -> None:
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data) + "\n")

    def scale_rates(self, vm: str, keep: Callable[[Row], bool], factor: float) -> None:
        """sysbench's rates of the matching runs times factor, in
        exp2_runs.csv and in sysbench's logs alike."""
        d = self.vm(vm)
        scaled: dict[str, dict[int, str]] = {}

        def change(r: Row) -> Row:
            if keep(r):
                r["events_per_s"] = f"{float(r['events_per_s']) * factor:.2f}"
                scaled.setdefault(log_name(r), {})[int(r["run"])] = r["events_per_s"]
            return r

        self.edit_csv(d / "exp2_runs.csv", change)
        for name, runs in scaled.items():
            log = d / name
            parts = re.split(r"(events per second:\s*)([0-9.]+)", log.read_text())
            # parts: text, (label, rate, text)...: the i-th rate is run i.
            for i in runs:
                parts[3 * i - 1] = runs[i]
            log.write_text("".join(parts))

    def regenerate(self) -> None:
        """report.md and summary.json as the report script writes them from raw/."""
        result = report.render(self.root / "raw", None)
        assert result is not None
        text, summary = result
        (self.root / "report.md").write_text(text)
        (self.root / "summary.json").write_text(report.dump_summary(summary))


def log_name(r: Row) -> str:
    """The sysbench log of an experiment 2 row (a headroom cell's named
    after its quotas' sum)."""
    cell = f"{r['n']}-{r['cmd']}-{r['mode']}"
    q = r.get("quota_sum_pct", "100")
    return f"sysbench-{cell if q == '100' else f'h{q}-{cell}'}.log"


def noisy(r: Row) -> tuple[str, ...]:
    """An experiment 2 row's cell: quota set, N, command, mode."""
    return (r.get("quota_sum_pct", "100"), r["n"], r["cmd"], r["mode"])


# --- the damage ------------------------------------------------------------------------


def partial_charging(c: Copy) -> None:
    for vm in ("patched-v2-b1", "patched-v2-b2", "patched-v1-b1", "patched-v1-b2"):
        for f in ("exp1.csv", "exp2.csv"):

            def sixty(r: Row) -> Row:
                if r["mode"] == "process":
                    r["charged_us"] = str(round(0.6 * int(r["logger_us"])))
                return r

            c.edit_csv(c.vm(vm) / f, sixty)


def over_charging(c: Copy) -> None:
    def over(r: Row) -> Row:
        if exp1_cell(r) == ("yes", "50000", "process"):
            tol = report.B_RESOLUTION_PTS / 100 * int(r["wall_us"]) + report.B_RESOLUTION_US
            r["charged_us"] = str(int(r["logger_us"]) + round(tol) + 10_000)
        return r

    c.edit_csv(c.vm("patched-v2-b1") / "exp1.csv", over)


def process_worse_than_off(c: Copy) -> None:
    """N = 2 cmd2 in process mode: 95 % of what off left sysbench, in CPU
    share and in events/s, in every v2 boot."""
    for d in sorted(c.run.glob("patched-v2-b[0-9]*")):
        vm = d.name
        cells = {noisy(r): r for r in csv.DictReader((d / "exp2.csv").open())}
        off = cells[("100", "2", "cmd2", "off")]

        col = report.sysbench_col(off)

        def worse(r: Row, off: Row = off, col: str = col) -> Row:
            if noisy(r) == ("100", "2", "cmd2", "process"):
                share = int(off[col]) / int(off["wall_us"])
                r[col] = str(round(0.95 * share * int(r["wall_us"])))
            return r

        c.edit_csv(d / "exp2.csv", worse)
        runs = {
            (r["mode"], r["run"]): float(r["events_per_s"])
            for r in csv.DictReader((d / "exp2_runs.csv").open())
            if noisy(r)[:3] == ("100", "2", "cmd2")
        }
        for run in [run for mode, run in runs if mode == "process"]:
            factor = 0.95 * runs[("off", run)] / runs[("process", run)]
            c.scale_rates(
                vm,
                lambda r, run=run: (*noisy(r), r["run"]) == ("100", "2", "cmd2", "process", run),
                factor,
            )


def missing_boot(c: Copy) -> None:
    shutil.rmtree(c.vm("patched-v1-b2"))


def missing_cell(c: Copy) -> None:
    c.edit_csv(
        c.vm("stock-v1-b1") / "exp1.csv",
        lambda r: None if (r["cmd"], r["quota_us"]) == ("yes", "20000") else r,
    )


def missing_cell_plan_too(c: Copy) -> None:
    """A cell gone from one boot, its meta.json's count lowered to match."""
    d = c.vm("patched-v2-b2")
    key = ("100", "2", "cmd2", "process")
    c.edit_csv(d / "exp2.csv", lambda r: None if noisy(r) == key else r)
    c.edit_csv(d / "exp2_runs.csv", lambda r: None if noisy(r) == key else r)
    (d / "sysbench-2-cmd2-process.log").unlink()
    c.edit_json(d / "meta.json", lambda m: m["cells"].update(exp2=m["cells"]["exp2"] - 1))


def exited_non_zero(c: Copy) -> None:
    c.edit_json(c.vm("stock-v1-b2") / "host.json", lambda h: h.update(exit=1))


def did_not_finish(c: Copy) -> None:
    (c.vm("n1-stock-v2-b3") / "host.json").unlink()


def report_edited(c: Copy) -> None:
    f = c.root / "report.md"
    text = f.read_text()
    # (The met column is the last, or the one before the one-boot cells'.)
    new = re.sub(r"\| (?:no|not resolved) \|((?: [^|\n]* \|)?)\n", r"| yes |\1\n", text, count=1)
    assert new != text
    f.write_text(new)


def summary_edited(c: Copy) -> None:
    f = c.root / "summary.json"
    summary = json.loads(f.read_text())
    first = next(iter(summary["overhead"].values()))
    first["delta_pct"] = -first["delta_pct"]
    f.write_text(report.dump_summary(summary))


def rates_not_logged(c: Copy) -> None:
    def faster(r: Row) -> Row:
        if (*noisy(r), r["run"]) == ("100", "2", "cmd2", "process", "1"):
            r["events_per_s"] = f"{float(r['events_per_s']) * 1.05:.2f}"
        return r

    c.edit_csv(c.vm("patched-v1-b1") / "exp2_runs.csv", faster)


def baseline_patched_nerdctl(c: Copy) -> None:
    c.edit_json(c.vm("stock-v2-b1") / "meta.json", lambda m: m.update(nerdctl="patched 1.7.7-cfsb"))


def baseline_patched_kernel(c: Copy) -> None:
    kernel = json.loads((c.vm("patched-v1-b1") / "meta.json").read_text())["kernel"]
    c.edit_json(c.vm("stock-v1-b1") / "meta.json", lambda m: m.update(kernel=kernel))


def exp1_cell(r: Row) -> tuple[str, ...]:
    """An experiment 1 row's cell: command, quota, mode."""
    return (r["cmd"], r["quota_us"], r["mode"])


def cell_edited(
    vm: str,
    file: str,
    key: tuple[str, ...],
    cell: Callable[[Row], tuple[str, ...]],
    change: Callable[[Row], None],
) -> Callable[[Copy], None]:
    """The damage: change applied to the rows of one cell (key, as cell
    names a row) in one VM's file."""

    def damage(c: Copy) -> None:
        def edit(r: Row) -> Row:
            if cell(r) == key:
                change(r)
            return r

        c.edit_csv(c.vm(vm) / file, edit)

    return damage


def half_charged(r: Row) -> None:
    r["charged_us"] = str(max(int(r["logger_us"]) // 2, 1000))


def charged(
    vm: str, file: str, key: tuple[str, ...], cell: Callable[[Row], tuple[str, ...]]
) -> Callable[[Copy], None]:
    return cell_edited(vm, file, key, cell, half_charged)


def borrowd_token(c: Copy) -> None:
    def token(r: Row) -> Row:
        if (r["engine"], r["mode"]) == ("podman", "borrowd"):
            r["charged_us"] = str(int(r["worker_ns"]) // 1000 // 20)
        return r

    c.edit_csv(c.vm("engines-v2-b1") / "engines.csv", token)


def resolvable_slowdown(c: Copy) -> float:
    """A slowdown of the patched kernel at N = 1 that the run's boots of
    sysbench alone resolve: 1 %, or twice the half-width of their delta's
    95 % interval and 0.2 % where that is more (one slow boot widens it)."""
    overhead = json.loads((c.root / "summary.json").read_text())["overhead"]
    half = max(x.get("delta_ci_pct") or 0 for k, x in overhead.items() if k.endswith("sysbench alone"))
    return max(1.0, 2 * half + 0.2) / 100


def overhead_regression(c: Copy) -> None:
    slower = 1 - resolvable_slowdown(c)
    for b in (1, 2, 3):
        c.scale_rates(f"n1-patched-v2-b{b}", lambda r: r["n"] == "1", slower)


def one_overhead_boot(c: Copy) -> None:
    """The quick tier's overhead part: one boot per kernel."""
    for d in c.run.glob("n1-*-b[2-9]"):
        shutil.rmtree(d)
    c.edit_json(c.run / "run.json", lambda r: r.update(overhead_boots=1))


def runs_per_overhead_boot(c: Copy) -> int:
    """sysbench's runs in each boot of sysbench alone (the fewest)."""
    return min(len(list(csv.DictReader((d / "exp2_runs.csv").open()))) for d in c.run.glob("n1-*-b[0-9]*"))


def overhead_regression_one_boot(c: Copy) -> None:
    """One boot per kernel, every run of the patched kernel's 1 % slower
    than the stock kernel's fastest (the one-boot rule compares the
    fastest runs: the boots' own difference is not the damage)."""
    one_overhead_boot(c)
    stock, patched = (fastest_rate(c, f"n1-{k}-v2-b1") for k in ("stock", "patched"))
    c.scale_rates("n1-patched-v2-b1", lambda r: r["n"] == "1", 0.99 * stock / patched)


def fastest_rate(c: Copy, vm: str) -> float:
    """The VM's fastest sysbench run, events/s."""
    return max(float(r["events_per_s"]) for r in csv.DictReader((c.vm(vm) / "exp2_runs.csv").open()))


def agent_windows_claimed(c: Copy) -> None:
    """Every VM's meta.json says that experiment 1's agent windows run from
    one period's start to another's, which the kept run's do not (borrowd's
    --stats came between the period's start and the snapshot)."""
    for meta in c.run.glob("*/meta.json"):
        if (meta.parent / "exp1.csv").exists():
            c.edit_json(meta, lambda m: m.update(exp1_agent_window_edges="period"))


def window_anywhere(r: Row) -> None:
    """A window opened halfway into a period (and closed a period later)."""
    r["wall_us"] = str(int(r["wall_us"]) + int(r["period_us"]) // 2)


def with_ratio_edges(c: Copy) -> None:
    """The copy as if B/A had edges of its own in every VM's experiment 1
    (meta.json's exp1_ratio_edges "random"): a quarter of a period after
    the window's, A and B over them the window's."""
    for table in c.run.glob("*/exp1.csv"):
        with table.open() as f:
            reader = csv.DictReader(f)
            fields, old = list(reader.fieldnames or []), list(reader)
        for r in old:
            r["ratio_wall_us"] = str(int(r["wall_us"]) + int(r["period_us"]) // 4)
            r["ratio_logger_us"], r["ratio_charged_us"] = r["logger_us"], r["charged_us"]
        with table.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields + RATIO_COLUMNS, lineterminator="\n")
            w.writeheader()
            w.writerows(old)
        c.edit_json(table.parent / "meta.json", lambda m: m.update(exp1_ratio_edges="random"))


RATIO_COLUMNS = ["ratio_wall_us", "ratio_logger_us", "ratio_charged_us"]


def ratio_edges_then(change: Callable[[Row], None]) -> Callable[[Copy], None]:
    """The damage: B/A's own edges (with_ratio_edges), then change to
    experiment 1's yes at 50 ms in process mode (v2, first boot)."""
    edit = cell_edited("patched-v2-b1", "exp1.csv", ("yes", "50000", "process"), exp1_cell, change)

    def damage(c: Copy) -> None:
        with_ratio_edges(c)
        edit(c)

    return damage


def ratio_far(r: Row) -> None:
    """B/A's edges a period and a half after the window's."""
    r["ratio_wall_us"] = str(int(r["wall_us"]) + 3 * int(r["period_us"]) // 2)


def ratio_short(r: Row) -> None:
    """Over B/A's edges, B a tenth short of A."""
    r["ratio_charged_us"] = str(int(r["ratio_logger_us"]) * 9 // 10)


class Skip(Exception):
    """A change the run cannot take (its reason)."""


def overhead_one_run_disturbed(c: Copy) -> None:
    """One boot per kernel, one of the patched kernel's runs 2 % slower
    (something else ran in the guest then): no regression. (A boot of one
    run has no other run to tell a disturbed one by.)"""
    if runs_per_overhead_boot(c) < 2:
        raise Skip("one sysbench run per boot of sysbench alone")
    one_overhead_boot(c)
    c.scale_rates("n1-patched-v2-b1", lambda r: (r["n"], r["run"]) == ("1", "1"), 0.98)


def run_clock(c: Copy) -> None:
    c.edit_json(c.run / "run.json", lambda r: r.update(clock="wall", icount=False))


def vm_clock(c: Copy) -> None:
    c.edit_json(c.vm("patched-v2-b2") / "host.json", lambda h: h.update(clock="wall"))


def stale_plot(c: Copy) -> None:
    shutil.copy2(c.root / "plots/exp1_abc_v2.png", c.root / "plots/exp1_abc_v2_wall.png")


def agent_cell(c: Copy, mode: str, change: Callable[[Row], None], stock: bool = False) -> None:
    """change applied to the first busy experiment-1 cell of mode in the
    first VM of the kernel (busy: its logging process used a tenth of a CPU)."""
    vm = sorted(v for v in c.run.iterdir() if v.name.startswith("stock-" if stock else "patched-"))[0]
    done = False

    def first(r: Row) -> Row:
        nonlocal done
        if not done and r["mode"] == mode and int(r["logger_us"]) > int(r["wall_us"]) // 10:
            change(r)
            done = True
        return r

    c.edit_csv(vm / "exp1.csv", first)


def quota_mode_in_kernel(c: Copy) -> None:
    agent_cell(c, "agent-quota", lambda r: r.update(charged_us=r["agent_borrowed_us"]))


def wrong_agent_mode(c: Copy) -> None:
    def quota(r: Row) -> None:
        r.update(agent_mode="quota", agent_borrowed_us=r["charged_us"], charged_us="0")

    agent_cell(c, "agent", quota)


def agent_token(c: Copy) -> None:
    agent_cell(c, "agent", lambda r: r.update(agent_borrowed_us=str(int(r["logger_us"]) // 20)), stock=True)


def agent_patched_nerdctl(c: Copy) -> None:
    vm = sorted(v for v in c.run.iterdir() if v.name.startswith("patched-"))[0]
    c.edit_json(vm / "meta.json", lambda m: m.update(agent_nerdctl="patched 1.7.7-cfsb"))


# --- the damage a run with the record of v3 (vm.json, the scheduler's A,
# sysbench's percentiles) can show; any run of that kind, whatever its VMs.


def first_vm(c: Copy, prefix: str) -> Path:
    return sorted(v for v in c.run.iterdir() if v.name.startswith(prefix) and (v / "exp1.csv").is_file())[0]


def ticks_disagree(c: Copy) -> None:
    def more(r: Row) -> Row:
        if r["mode"] == "process":
            r["logger_ticks_us"] = str(int(r["logger_ticks_us"]) + 60_000)
        return r

    c.edit_csv(first_vm(c, "patched-") / "exp1.csv", more)


def p95_not_logged(c: Copy) -> None:
    done = []

    def double(r: Row) -> Row:
        if not done:
            r["p95_ms"] = f"{2 * float(r['p95_ms']) + 1:.2f}"
            done.append(r)
        return r

    c.edit_csv(first_vm(c, "patched-") / "exp2_runs.csv", double)


def other_image(c: Copy) -> None:
    patched = json.loads((first_vm(c, "patched-") / "vm.json").read_text())["image_sha256"]
    c.edit_json(first_vm(c, "stock-") / "vm.json", lambda v: v.update(image_sha256=patched))


def seed_not_given(c: Copy) -> None:
    c.edit_json(first_vm(c, "patched-") / "meta.json", lambda m: m.update(seed=m["seed"] + 1))


def commits_hidden(c: Copy) -> None:
    c.edit_json(c.run / "run.json", lambda r: r.update(commits=[*r["commits"], "0" * 40]))


@dataclass
class Damage:
    name: str
    apply: Callable[[Copy], None]
    caught_by: str  # words of the `not ok` line that must name it
    regenerate: bool = True


DAMAGE = [
    Damage("partial charging: process mode charges 60 % of A", partial_charging, "process mode charged B"),
    Damage("over-charging beyond the stated resolution (experiment 1)", over_charging, "> A"),
    Damage(
        "process mode worse than off (N = 2 cmd2: 95 % of off's CPU share and events/s)",
        process_worse_than_off,
        "process mode leaves sysbench",
    ),
    Damage("a missing boot (patched-v1-b2)", missing_boot, "patched-v1-b2 missing"),
    Damage("a missing cell (experiment 1, stock-v1-b1)", missing_cell, "every cell of experiment 1"),
    Damage(
        "a missing cell with its plan lowered to match",
        missing_cell_plan_too,
        "experiment 2 lacks 100:2:cmd2:process",
    ),
    Damage("a VM that exited non-zero", exited_non_zero, "stock-v1-b2: exit 1"),
    Damage("a VM that did not finish (no host.json)", did_not_finish, "n1-stock-v2-b3: no host.json"),
    Damage("report.md edited by hand (a target called met)", report_edited, "report.md is what", False),
    Damage(
        "summary.json edited by hand (an N = 1 delta's sign)", summary_edited, "summary.json is what", False
    ),
    Damage("a CSV rate that disagrees with sysbench's log", rates_not_logged, "sysbench-2-cmd2-process.log"),
    Damage("a baseline with the patched nerdctl", baseline_patched_nerdctl, "stock-v2-b1: nerdctl patched"),
    Damage("a baseline on the patched kernel", baseline_patched_kernel, "stock-v1-b1: kernel"),
    Damage(
        "charges under off (experiment 2)",
        charged("patched-v2-b1", "exp2.csv", ("100", "2", "cmd2", "off"), noisy),
        "with nothing to charge",
    ),
    Damage(
        "charges under incg (experiment 1)",
        charged("patched-v1-b2", "exp1.csv", ("yes", "20000", "incg"), exp1_cell),
        "with nothing to charge",
    ),
    Damage(
        "charges on the stock kernel (experiment 2)",
        charged("stock-v2-b2", "exp2.csv", ("100", "2", "cmd2", "off"), noisy),
        "with nothing to charge",
    ),
    Damage("borrowd charging a token share (Podman, 5 % of the worker)", borrowd_token, "under 85%"),
    Damage(
        "an overhead regression at N = 1 (patched 1 % slower, or more where the boots resolve only more)",
        overhead_regression,
        "not slower than stock",
    ),
    Damage(
        "an overhead regression at N = 1, one boot per kernel (every patched run 1 % slower than stock's "
        "fastest)",
        overhead_regression_one_boot,
        "not slower than stock",
    ),
    Damage("run.json's clock disagrees with the VMs", run_clock, "clock wall, the run's directory"),
    Damage("a VM's clock disagrees with run.json", vm_clock, "patched-v2-b2 ran on wall"),
    Damage("a stale plot (in no report)", stale_plot, "stale", False),
]


V3_DAMAGE = [
    Damage("A and its tick count 60 ms apart (a thread's time lost)", ticks_disagree, "in ticks"),
    Damage("a 95th percentile that disagrees with sysbench's log", p95_not_logged, "p95_ms"),
    Damage("a baseline VM that booted the patched kernel's image", other_image, "other than run.json's"),
    Damage("a boot whose seed is not the one the host gave", seed_not_given, "not the one the host gave"),
    Damage("a run resumed across commits that does not say so", commits_hidden, "spans_commits"),
]


# Where experiment 1's windows run from one period's start to another's.
PERIOD_DAMAGE = [
    Damage(
        "a window of experiment 1 opened halfway into a period",
        cell_edited("patched-v2-b1", "exp1.csv", ("yes", "50000", "process"), exp1_cell, window_anywhere),
        "not a whole number of periods",
    ),
    Damage(
        "agent windows of experiment 1 said to hold whole periods that do not",
        agent_windows_claimed,
        "agent: ",
    ),
]


# B/A's own edges: made up on the copy (the kept run may be older).
RATIO_DAMAGE = [
    Damage(
        "B/A's edges a period and a half after the window's", ratio_edges_then(ratio_far), "than a period"
    ),
    Damage("B a tenth short of A over B/A's edges", ratio_edges_then(ratio_short), "process mode charged"),
]


AGENT_DAMAGE = [
    Damage(
        "the kernel counting borrowd's quota-mode charges", quota_mode_in_kernel, "with nothing to charge"
    ),
    Damage("borrowd in its quota mode where the kernel has the file", wrong_agent_mode, "not kernel"),
    Damage("borrowd charging a token share (5 %, stock kernel)", agent_token, "under 85%"),
    Damage("the agent cells with the patched nerdctl", agent_patched_nerdctl, "the agent modes ran nerdctl"),
]


def run_check(check: Path, d: Path) -> tuple[int, list[str]]:
    p = subprocess.run([sys.executable, str(check), str(d)], capture_output=True, text=True, check=False)
    return p.returncode, [line for line in p.stdout.splitlines() if line.startswith("not ok")] + (
        [f"stderr: {p.stderr.strip()[-300:]}"] if p.stderr.strip() else []
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", type=Path, default=HERE / "results/full", help="the kept run")
    parser.add_argument(
        "--agent-run", type=Path, default=HERE / "results/agent", help="the kept run of the agent modes"
    )
    parser.add_argument(
        "--check", type=Path, default=HERE / "check_noisy_logging.py", help="the check to test"
    )
    parser.add_argument(
        "--any-failure", action="store_true", help="any failure of the check counts as caught"
    )
    parser.add_argument(
        "--v3-only",
        action="store_true",
        help="only the damage any run with v3's record can show (e.g. a quick-tier run), on --run",
    )
    args = parser.parse_args()
    print("TAP version 13")
    failed = n = 0
    v3 = any((args.run / "raw").glob("*/*/vm.json"))
    periods = any(
        json.loads(m.read_text()).get("exp1_window_edges") == "period"
        for m in (args.run / "raw").glob("*/patched-*/meta.json")
    )
    runs = [(args.run, DAMAGE if not args.v3_only else []), (args.agent_run, AGENT_DAMAGE)]
    if args.v3_only:
        runs = runs[:1]
    for run, damage in runs:
        n += 1
        if run == args.agent_run and not (run / "raw").is_dir():
            print(f"ok {n} the check passes on the kept run ({run.name}) # SKIP no such run")
            for dmg in damage:
                n += 1
                print(f"ok {n} the check fails on {dmg.name} # SKIP no agent run")
            continue
        if run == args.run:
            damage = damage + V3_DAMAGE + PERIOD_DAMAGE + RATIO_DAMAGE
        rc, bad = run_check(args.check, run)
        ok = rc == 0
        failed += not ok
        print(f"{'ok' if ok else 'not ok'} {n} the check passes on the kept run ({run.name})")
        for line in bad[:10]:
            print(f"# {line}")
        for dmg in damage:
            n += 1
            if dmg in V3_DAMAGE and not v3:
                print(
                    f"ok {n} the check fails on {dmg.name} # SKIP a run from before vm.json and v3's columns"
                )
                continue
            if dmg in PERIOD_DAMAGE and not periods:
                print(f"ok {n} the check fails on {dmg.name} # SKIP windows not at a period's start")
                continue
            failed += not try_damage(args, run, dmg, n)
        if run == args.run:
            for name, apply in HARMLESS:
                n += 1
                failed += not try_harmless(args, run, name, apply, n)
    print(f"1..{n}")
    return 1 if failed else 0


def try_damage(args: argparse.Namespace, run: Path, dmg: Damage, i: int) -> bool:
    """Test i: the check fails on a copy of run with dmg done to it."""
    with tempfile.TemporaryDirectory(prefix="study-check-") as tmp:
        try:
            c = Copy(run, Path(tmp))
            dmg.apply(c)
            if dmg.regenerate:
                c.regenerate()
        except Exception as e:  # the run lacks what the damage needs
            print(f"not ok {i} the check fails on {dmg.name}\n# could not damage the copy: {e!r}")
            return False
        rc, bad = run_check(args.check, c.root)
    named = [line for line in bad if dmg.caught_by in line]
    ok = rc != 0 and (args.any_failure or bool(named))
    print(f"{'ok' if ok else 'not ok'} {i} the check fails on {dmg.name}")
    for line in (named or bad)[:3] if rc else ["# the check passed"]:
        print(f"# {line[:300]}" if not line.startswith("#") else line)
    return ok


# Changes to a kept run that are no damage: the check still passes.
HARMLESS = [
    ("one boot per kernel, one of the patched kernel's runs 2 % slower", overhead_one_run_disturbed),
    ("B/A's edges a quarter of a period after the window's, A and B the window's", with_ratio_edges),
]


def try_harmless(
    args: argparse.Namespace, run: Path, name: str, apply: Callable[[Copy], None], i: int
) -> bool:
    """Test i: the check passes on a copy of run changed by apply."""
    with tempfile.TemporaryDirectory(prefix="study-check-") as tmp:
        c = Copy(run, Path(tmp))
        try:
            apply(c)
        except Skip as why:
            print(f"ok {i} the check passes on {name} # SKIP {why}")
            return True
        c.regenerate()
        rc, bad = run_check(args.check, c.root)
    print(f"{'ok' if rc == 0 else 'not ok'} {i} the check passes on {name}")
    for line in bad[:3]:
        print(f"# {line[:300]}")
    return rc == 0


if __name__ == "__main__":
    sys.exit(main())
