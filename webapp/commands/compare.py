"""Compare two runs: metrics side by side, per-op changes, findings fixed/new/unchanged.

With --fail-if-slower PCT the command exits 1 when B's median step time is more than PCT slower than A's
(for CI gates on traces); otherwise it exits 0. Bad input exits 2. --report FILE writes the comparison as
one self-contained HTML file whatever the verdict; --markdown prints a short Markdown summary (for a
pull-request comment or $GITHUB_STEP_SUMMARY) instead of the text report.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from webapp.commands.analyze import TRACE_HELP
from webapp.commands.errors import CliError
from webapp.commands.report import add_export_arguments


def parse_percent(text: str) -> float:
    """'5%' or '5' -> 0.05. Raises ValueError for anything else or a negative bound."""
    raw = text.strip()
    value = float(raw[:-1] if raw.endswith("%") else raw)
    if not math.isfinite(value) or value < 0:
        raise ValueError(text)
    return value / 100.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help=f"baseline {TRACE_HELP}")
    parser.add_argument("b", metavar="B", help="trace to compare with the baseline")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the comparison as JSON")
    out.add_argument("--markdown", action="store_true", help="print a short Markdown summary")
    parser.add_argument(
        "--report", metavar="FILE", default=None, help="also write the comparison as a self-contained HTML file"
    )
    parser.add_argument(
        "--fail-if-slower",
        metavar="PCT",
        default=None,
        help="exit 1 when B's median step time is more than PCT (e.g. 5%%) above A's",
    )
    parser.add_argument("--step-at", metavar="SPEC", default=None, help="where steps start, as for `analyze`")
    add_export_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from webapp.analysis.compare import compare_analyses
    from webapp.analysis.report import comparison_text
    from webapp.commands.analyze import analysed, load
    from webapp.commands.report import check_folder, write_html
    from webapp.progress import Progress
    from webapp.report import compare_report, markdown_summary, prepare_run, verdict_of
    from webapp.report.export import export, headline_metrics
    from webapp.report.names import stem

    bound = None
    if args.fail_if_slower is not None:
        try:
            bound = parse_percent(args.fail_if_slower)
        except ValueError:
            raise CliError(f"--fail-if-slower {args.fail_if_slower!r}: expected a percentage such as 5%") from None
    progress = Progress("compare")
    if args.report:
        check_folder(Path(args.report))
    a, b = load(args.a, args.step_at, progress), load(args.b, args.step_at, progress)
    ra, rb = analysed(a, args.a, progress), analysed(b, args.b, progress)
    try:
        result = compare_analyses(ra, rb, a, b)
    except ValueError as exc:
        raise CliError(f"cannot compare: {exc}") from None
    verdict = verdict_of(result, bound)
    report = Path(args.report) if args.report else None
    if report is not None:
        with progress.stage("writing the comparison report"):
            pa, pb = prepare_run(a, stem(args.a), ra), prepare_run(b, stem(args.b), rb)
            write_html(report, compare_report(pa, pb, bound)[2])
    if args.mlflow or args.wandb:
        with progress.stage("exporting"):
            metrics = headline_metrics(rb.metrics, {"step_time_change_frac": result.step_time_change})
            sent = export(metrics, report, f"{stem(args.b)} vs {stem(args.a)}", mlflow=args.mlflow, wandb=args.wandb)
        for line in sent:
            print(f"logged to {line}", file=sys.stderr)
    progress.done(verdict.text)
    if args.json:
        out = result.to_dict()
        out["fail_if_slower"] = bound
        out["failed"] = verdict.failed
        out["report"] = str(report) if report else None
        json.dump(out, sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
    elif args.markdown:
        sys.stdout.write(markdown_summary(result, stem(args.a), stem(args.b), verdict, str(report) if report else None))
    else:
        print(f"A: {args.a}\nB: {args.b}\n")
        print(comparison_text(result))
        print(f"\n{verdict.text}")
        if report is not None:
            print(f"report: {report}")
    return 1 if verdict.failed else 0
