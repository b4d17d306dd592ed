#!/usr/bin/env python3
"""Summarise TAP/KTAP result files and compare upstream test_cpu runs.

Usage: tap_summary.py [--info FILE]... [--same-or-better STOCK PATCHED[,PATCHED...]] FILE.tap...

Counts the innermost test results of each FILE (KUnit nests its cases one
level below the suite line; kselftest results are not nested), prints a
line per file and a closing "N passed, N failed, N skipped" line, and exits
non-zero if anything failed. A FILE whose top-level results do not match
its plans ("1..N", one per suite the file holds) counts as a failure: a
suite that stopped early, or numbered a result twice.

--info FILE lists a file's results without counting them: the upstream
test_cpu results, which are judged only by comparison. --same-or-better adds
one check: every test that passed in STOCK passes in PATCHED, or in one of
several PATCHED runs (upstream tests with tight timing tolerances can fail
once under emulation on any kernel). --regressions STOCK PATCHED... only
prints the tests that passed on STOCK and in none of the PATCHED runs, and
exits 1 if there are any.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

RESULT = re.compile(r"^(?P<indent>\s*)(?P<status>not ok|ok) (?P<num>\d+)\s*-?\s*(?P<rest>.*)$")
PLAN = re.compile(r"^1\.\.(?P<count>\d+)")


@dataclass
class Results:
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def parse(text: str) -> Results:
    """Results of the most deeply nested test lines in a TAP/KTAP text."""
    lines = [m for m in map(RESULT.match, text.splitlines()) if m]
    res = Results()
    if not lines:
        return res
    depth = max(len(m["indent"]) for m in lines)
    for m in lines:
        if len(m["indent"]) != depth:
            continue
        name, _, directive = m["rest"].partition("#")
        name = name.strip()
        directive = directive.strip().upper()
        if directive.startswith("SKIP"):
            res.skipped.append(name)
        elif m["status"] == "ok" or directive.startswith("XFAIL"):
            res.passed.append(name)
        else:
            res.failed.append(name)
    return res


def plan_mismatch(text: str) -> str | None:
    """Why the top-level results disagree with the plans, or None."""
    lines = text.splitlines()
    results = sum(1 for m in map(RESULT.match, lines) if m and not m["indent"])
    plans = [int(m["count"]) for m in map(PLAN.match, lines) if m]
    if not plans:
        return f"no plan for its {results} results"
    if sum(plans) != results:
        return f"plan of {sum(plans)} ({', '.join(f'1..{n}' for n in plans)}) but {results} results"
    return None


def load(path: str | Path) -> Results:
    p = Path(path)
    return parse(p.read_text(errors="replace")) if p.is_file() else Results()


def regressions(stock_path: str, patched_paths: list[str]) -> tuple[Results, list[str]]:
    """Tests that passed on stock and in none of the patched runs."""
    stock = load(stock_path)
    passed_on_patched = {t for p in patched_paths for t in load(p).passed}
    return stock, [t for t in stock.passed if t not in passed_on_patched]


def describe(path: Path, res: Results) -> str:
    return f"{path}: {len(res.passed)} passed, {len(res.failed)} failed, {len(res.skipped)} skipped"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--info", type=Path, action="append", default=[])
    ap.add_argument("--same-or-better", nargs=2, metavar=("STOCK", "PATCHED"), action="append", default=[])
    ap.add_argument("--regressions", nargs="+", metavar="FILE")
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args(argv)

    if args.regressions:
        if len(args.regressions) < 2:
            ap.error("--regressions needs STOCK and at least one PATCHED file")
        _, regressed = regressions(args.regressions[0], args.regressions[1:])
        print("\n".join(regressed))
        return 1 if regressed else 0

    for path in args.info:
        res = load(path)
        print(f"{describe(path, res)} (listed, judged by the comparison below)")
        for name in res.failed:
            print(f"  failed {name}")

    passed = failed = skipped = 0
    for path in args.files:
        if not path.is_file():
            print(f"{path}: missing (the suite did not run)")
            failed += 1
            continue
        text = path.read_text(errors="replace")
        res = parse(text)
        if not (res.passed or res.failed or res.skipped):
            print(f"{path}: no test results")
            failed += 1
            continue
        print(describe(path, res))
        for name in res.failed:
            print(f"  FAILED {name}")
        why = plan_mismatch(text)
        if why:
            print(f"  FAILED the results: {why}")
            failed += 1
        passed += len(res.passed)
        failed += len(res.failed)
        skipped += len(res.skipped)

    for stock_path, patched_arg in args.same_or_better:
        patched_paths = patched_arg.split(",")
        stock, regressed = regressions(stock_path, patched_paths)
        print(
            f"upstream tests passing on stock: {len(stock.passed)} of {len(stock.passed) + len(stock.failed)}"
        )
        if stock.passed and not regressed:
            print(
                f"ok: every upstream test that passes on stock passes on patched "
                f"({len(patched_paths)} patched run(s))"
            )
            passed += 1
        else:
            print(f"not ok: regressions on patched: {', '.join(regressed) or 'stock ran no test'}")
            failed += 1

    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
