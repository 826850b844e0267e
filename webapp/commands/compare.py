"""Compare two runs: metrics side by side, per-op changes, findings fixed/new/unchanged.

With --fail-if-slower PCT the command exits 1 when B's median step time is more than PCT slower than A's
(for CI gates on traces); otherwise it exits 0. Bad input exits 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys


def parse_percent(text: str) -> float:
    """'5%' or '5' -> 0.05. Raises ValueError for anything else or a negative bound."""
    raw = text.strip()
    value = float(raw[:-1] if raw.endswith("%") else raw)
    if not math.isfinite(value) or value < 0:
        raise ValueError(text)
    return value / 100.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="baseline trace (.json or .json.gz)")
    parser.add_argument("b", metavar="B", help="trace to compare with the baseline")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument(
        "--fail-if-slower",
        metavar="PCT",
        default=None,
        help="exit 1 when B's median step time is more than PCT (e.g. 5%%) above A's",
    )


def run(args: argparse.Namespace) -> int:
    from webapp.analysis import compare
    from webapp.analysis.report import comparison_text
    from webapp.cli import CliError
    from webapp.commands.analyze import load

    bound = None
    if args.fail_if_slower is not None:
        try:
            bound = parse_percent(args.fail_if_slower)
        except ValueError:
            raise CliError(f"--fail-if-slower {args.fail_if_slower!r}: expected a percentage such as 5%") from None
    a, b = load(args.a), load(args.b)
    try:
        result = compare(a, b)
    except ValueError as exc:
        raise CliError(f"cannot compare: {exc}") from None
    change = result.step_time_change
    failed = bound is not None and change == change and change > bound
    if args.json:
        out = result.to_dict()
        out["fail_if_slower"] = bound
        out["failed"] = failed
        json.dump(out, sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(f"A: {args.a}\nB: {args.b}\n")
        print(comparison_text(result))
        verdict = "-" if change != change else f"{change * 100:+.1f}%"
        print(f"\nmedian step time B vs A: {verdict}")
        if bound is not None:
            print(f"{'FAIL' if failed else 'ok'}: bound +{bound * 100:.1f}%")
    return 1 if failed else 0
