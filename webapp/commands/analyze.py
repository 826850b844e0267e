"""Analyze a run: metrics, findings with their cost and fix, and the what-if estimate.

RUN is a Streamscope trace or a torch.profiler trace (.json or .json.gz). Prints a readable report, or
with --json the whole analysis (metrics, per-rank and per-step tables, ops, syncs, findings, what-if).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


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


def load(path: str, step_at: str | None = None) -> Any:
    """Read a trace for analysis; a missing file or a trace that cannot be analysed is a CliError."""
    from collector.load import load_trace
    from webapp.cli import CliError

    if not Path(path).is_file():
        raise CliError(f"{path}: no such file")
    return load_trace(path, step_at=step_at)


def run(args: argparse.Namespace) -> int:
    from webapp.analysis import analyze
    from webapp.analysis.report import analysis_text
    from webapp.cli import CliError

    trace = load(args.run, args.step_at)
    try:
        result = analyze(trace)
    except ValueError as exc:
        raise CliError(f"{args.run}: cannot analyse: {exc}") from None
    if args.json:
        json.dump(result.to_dict(), sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
    else:
        workload = trace.meta.workload or trace.meta.source
        print(analysis_text(result, title=f"{args.run} ({workload})" if workload else args.run))
    return 0
