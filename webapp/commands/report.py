"""Write a self-contained HTML report of a run, or of two runs compared (one file, opens offline).

RUN (and B) are Streamscope or torch.profiler traces. The report holds the run page: metrics, findings
with their fixes and source lines, the what-if estimate, the step chart and tables, and an interactive
timeline within a size budget: the whole run at full detail when it fits, else every step as fine as the
budget allows; it lists what is coarse. With B it is the comparison page. --mlflow / --wandb also log the
headline metrics and the report to those trackers (optional extras).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from webapp.commands.analyze import TRACE_HELP
from webapp.commands.errors import CliError


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mlflow", action="store_true", help="log headline metrics and the report to MLflow")
    parser.add_argument(
        "--wandb",
        metavar="PROJECT",
        nargs="?",
        const="streamscope",
        default=None,
        help="log headline metrics and the report to Weights & Biases (project default: streamscope)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", help=TRACE_HELP)
    parser.add_argument("b", metavar="B", nargs="?", default=None, help="a second trace: compare RUN (A) with it")
    parser.add_argument("--out", "-o", metavar="FILE", default=None, help="HTML file to write (default: <RUN>.html)")
    parser.add_argument(
        "--budget-mb",
        metavar="MiB",
        type=float,
        default=None,
        help="timeline data embedded in the file, compressed, in MiB (default: 2.5, less what the file would pass 5 "
        "MiB by)",
    )
    parser.add_argument("--step-at", metavar="SPEC", default=None, help="where steps start, as for `analyze`")
    add_export_arguments(parser)


def check_folder(path: Path) -> None:
    """A report path whose folder does not exist is a CliError (checked before the long work)."""

    if not path.parent.is_dir():
        raise CliError(f"{path.parent}: no such folder for the report")


def write_html(path: Path, text: str) -> int:
    """Write the report; returns its size in bytes. A missing folder or a write error is a CliError."""

    check_folder(path)
    data = text.encode("utf-8")
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise CliError(f"{path}: cannot write ({exc.strerror or exc})") from None
    return len(data)


def budget(args: argparse.Namespace) -> int | None:
    """The timeline data budget asked for, in bytes; None: the default (fitted to the file's bound)."""
    if args.budget_mb is None:
        return None
    if not 0.05 <= args.budget_mb <= 500:
        raise CliError(f"--budget-mb {args.budget_mb}: expected a size between 0.05 and 500 (MiB)")
    return int(args.budget_mb * 2**20)


def run(args: argparse.Namespace) -> int:
    from webapp.commands.analyze import prepared
    from webapp.formatting import fmt_bytes
    from webapp.progress import Progress
    from webapp.report import compare_report, run_report
    from webapp.report.export import export, headline_metrics
    from webapp.report.names import stem

    progress = Progress("report")
    size_budget = budget(args)
    out = Path(args.out or (f"{stem(args.run)}-vs-{stem(args.b)}.html" if args.b else f"{stem(args.run)}.html"))
    check_folder(out)
    a = prepared(args.run, args.step_at, progress)
    if args.b is None:
        with progress.stage("writing the report"):
            size = write_html(out, run_report(a, size_budget))
        metrics = headline_metrics(a.analysis.metrics)
        name = a.name
    else:
        b = prepared(args.b, args.step_at, progress)
        with progress.stage("writing the comparison report"):
            result, _, text = compare_report(a, b, None, size_budget)
            size = write_html(out, text)
        metrics = headline_metrics(b.analysis.metrics, {"step_time_change_frac": result.step_time_change})
        name = f"{b.name} vs {a.name}"
    with progress.stage("exporting"):
        sent = export(metrics, out, name, mlflow=args.mlflow, wandb=args.wandb)
    progress.done(f"wrote {out} ({fmt_bytes(size)})")
    print(f"wrote {out} ({fmt_bytes(size)})")
    for line in sent:
        print(f"logged to {line}")
    return 0
