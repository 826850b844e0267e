"""Analyze a run: metrics, findings with their cost and fix, and the what-if estimate.

RUN is a Streamscope trace or a torch.profiler trace (.json or .json.gz). Prints a readable report, or
with --json the whole analysis (metrics, per-rank and per-step tables, ops, syncs, findings, what-if).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webapp.progress import Progress
    from webapp.report import PreparedRun


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", help="trace file: .json or .json.gz (Streamscope or torch.profiler)")
    parser.add_argument("--json", action="store_true", help="print the analysis as JSON")
    parser.add_argument(
        "--step-at",
        metavar="SPEC",
        default=None,
        help="where steps start: FILE:LINE (host work from that source line) or a record_function/NVTX name; "
        "overrides the steps found in the trace",
    )


def load(path: str, step_at: str | None = None, progress: Progress | None = None) -> Any:
    """Read a trace for analysis; a missing file or a trace that cannot be analysed is a CliError.
    ``progress`` shows the read as a stage (on a terminal)."""
    from collector.load import load_trace
    from webapp.cli import CliError
    from webapp.formatting import fmt_bytes

    if not Path(path).is_file():
        raise CliError(f"{path}: no such file")
    if progress is None:
        return load_trace(path, step_at=step_at)
    with progress.stage(f"reading {Path(path).name} ({fmt_bytes(Path(path).stat().st_size)})"):
        return load_trace(path, step_at=step_at)


def analysed(trace: Any, path: str, progress: Progress | None = None) -> Any:
    """analyze(trace) as a progress stage; a trace that cannot be analysed is a CliError."""
    from contextlib import nullcontext

    from webapp.analysis import analyze
    from webapp.cli import CliError

    with progress.stage(f"analysing {len(trace.intervals):,} intervals") if progress else nullcontext():
        try:
            return analyze(trace)
        except ValueError as exc:
            raise CliError(f"{path}: cannot analyse: {exc}") from None


def prepared(path: str, step_at: str | None, progress: Progress) -> PreparedRun:
    """Load, analyse and index one run for a report, each a progress stage."""
    from webapp.report import prepare_run
    from webapp.report.names import stem

    trace = load(path, step_at, progress)
    result = analysed(trace, path, progress)
    with progress.stage("indexing the timeline"):
        return prepare_run(trace, stem(path), result)


def run(args: argparse.Namespace) -> int:
    from webapp.analysis.report import analysis_text
    from webapp.progress import Progress

    progress = Progress("analyze")
    trace = load(args.run, args.step_at, progress)
    result = analysed(trace, args.run, progress)
    progress.done(f"{len(trace.intervals):,} intervals, {len(result.findings)} findings")
    if args.json:
        json.dump(result.to_dict(), sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
    else:
        workload = trace.meta.workload or trace.meta.source
        print(analysis_text(result, title=f"{args.run} ({workload})" if workload else args.run))
    return 0
