#!/usr/bin/env python3
"""Summarise TAP/KTAP result files and compare upstream test_cpu runs.

Usage: tap_summary.py [--same-or-better STOCK.tap PATCHED.tap] FILE.tap...

Counts the innermost test results of each file (KUnit nests its cases one
level below the suite line; kselftest results are not nested), prints a
line per file and a closing "N passed, N failed, N skipped" line, and exits
non-zero if anything failed. --same-or-better adds one check: every test
that passed in STOCK also passes in PATCHED.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

RESULT = re.compile(r"^(?P<indent>\s*)(?P<status>not ok|ok) (?P<num>\d+)\s*-?\s*(?P<rest>.*)$")


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


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--same-or-better", nargs=2, metavar=("STOCK", "PATCHED"), action="append", default=[])
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args(argv)

    passed = failed = skipped = 0
    for path in args.files:
        if not path.is_file():
            print(f"{path}: missing (the suite did not run)")
            failed += 1
            continue
        res = parse(path.read_text(errors="replace"))
        if not (res.passed or res.failed or res.skipped):
            print(f"{path}: no test results")
            failed += 1
            continue
        print(f"{path}: {len(res.passed)} passed, {len(res.failed)} failed, {len(res.skipped)} skipped")
        for name in res.failed:
            print(f"  FAILED {name}")
        passed += len(res.passed)
        failed += len(res.failed)
        skipped += len(res.skipped)

    for stock_path, patched_path in args.same_or_better:
        stock = (
            parse(Path(stock_path).read_text(errors="replace")) if Path(stock_path).is_file() else Results()
        )
        patched = (
            parse(Path(patched_path).read_text(errors="replace"))
            if Path(patched_path).is_file()
            else Results()
        )
        regressed = [t for t in stock.passed if t not in patched.passed]
        print(
            f"upstream tests passing on stock: {len(stock.passed)}/{len(stock.passed) + len(stock.failed)}, "
            f"on patched: {len(patched.passed)}/{len(patched.passed) + len(patched.failed)}"
        )
        if stock.passed and not regressed:
            print(f"ok: every test that passes on stock passes on patched ({stock_path} vs {patched_path})")
            passed += 1
        else:
            print(f"not ok: regressions on patched: {', '.join(regressed) or 'stock ran no test'}")
            failed += 1

    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
