"""Analyze a run: metrics, findings with their cost and fix, and the what-if estimate.

RUN is a Streamscope trace or a torch.profiler trace, plain or gzip (recognised by its bytes, whatever its
name). Prints a readable report, or with --json the whole analysis (metrics, per-rank and per-step tables,
ops, syncs, findings, what-if; meta.error: the recorded script's error, '' when it did not fail). A run
whose script failed says so under its title.

Several RUNs (or a zip of them) are the ranks of one job: each rank is loaded, analysed and indexed in
a process of its own (--workers N, or Ray tasks with --ray auto|ADDRESS|local), and only per-rank
summaries are joined: one line per rank (median step, clock offset, collectives it arrived last in, wait
inside collectives per step) and the rank that arrives last. That summary has no findings or what-if:
merge the ranks and analyze the merged run for those.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webapp.commands.errors import CliError, check_input_file

if TYPE_CHECKING:
    from webapp.progress import Progress
    from webapp.report import PreparedRun

TRACE_HELP = "trace file (Streamscope or torch.profiler; plain or gzip)"
"""How the subcommands' help names an input trace."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from webapp.commands.rankfiles import add_parallel_arguments

    parser.add_argument(
        "run",
        nargs="+",
        metavar="RUN",
        help=f"{TRACE_HELP}; several, or a zip of them, for the ranks of one job",
    )
    parser.add_argument("--json", action="store_true", help="print the analysis as JSON")
    add_step_at_argument(parser)
    add_parallel_arguments(parser)


def add_step_at_argument(parser: argparse.ArgumentParser) -> None:
    """``--step-at SPEC``, shared by analyze and convert."""
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
    from webapp.formatting import fmt_bytes

    check_input_file(path)
    if progress is None:
        return load_trace(path, step_at=step_at)
    with progress.stage(f"reading {Path(path).name} ({fmt_bytes(Path(path).stat().st_size)})"):
        return load_trace(path, step_at=step_at)


def analysed(trace: Any, path: str, progress: Progress | None = None) -> Any:
    """analyze(trace) as a progress stage; a trace that cannot be analysed is a CliError."""
    from contextlib import nullcontext

    from webapp.analysis import analyze

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
    from webapp.commands.rankfiles import check_workers
    from webapp.progress import Progress

    check_workers(args)
    runs = list(args.run)
    from collector.ranks.rankzip import is_rank_zip

    if len(runs) > 1 or is_rank_zip(runs[0]):
        return _run_ranks(args, runs)
    if args.ray:
        raise CliError("--ray spreads the ranks of one job: give several rank files or a zip of them")
    args.run = runs[0]
    progress = Progress("analyze")
    trace = load(args.run, args.step_at, progress)
    result = analysed(trace, args.run, progress)
    progress.done(f"{len(trace.intervals):,} intervals, {len(result.findings)} findings")
    if args.json:
        json.dump({**result.to_dict(), "meta": {"error": trace.meta.error}}, sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(analysis_text(result, title=heading(args.run, trace.meta)))
    return 0


def heading(path: str, meta: Any) -> str:
    """The report's first lines: the run and what ran, then the recorded script's error, if it failed."""
    workload = meta.workload or meta.source
    lines = [f"{path} ({workload})" if workload else path]
    if meta.error:
        lines.append(f"The recorded script failed: {meta.error}")
    return "\n".join(lines)


def _run_ranks(args: argparse.Namespace, runs: list[str]) -> int:
    import shlex
    import tempfile

    from webapp.commands.rankfiles import rank_paths
    from webapp.rankwork import join_summaries, run_per_rank, summarize_rank

    if args.step_at:
        raise CliError("--step-at takes one run; merge the ranks first to set where their steps start")
    with tempfile.TemporaryDirectory(prefix="streamscope-ranks-") as scratch:
        paths = rank_paths(runs, Path(scratch))
        summaries = run_per_rank(summarize_rank, paths, workers=args.workers, ray=args.ray)
    joined = join_summaries(summaries)
    if args.json:
        json.dump(joined, sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
        return 0
    n = joined["collective_count"]
    print(f"{len(summaries)} ranks, {sum(s.intervals for s in summaries):,} intervals, {n} collectives matched")
    for row in joined["ranks"]:
        print(rank_line(row, n))
    top = joined["straggler"]
    if top:
        print(f"rank {top['rank']} arrives last in {top['last_frac']:.0%} of the collectives")
    print(
        "This is the per-rank summary, which scales to thousands of ranks. For the findings, their costs and "
        "the what-if, merge the ranks and analyze the merged run:\n"
        f"  streamscope merge {shlex.join(runs)} --out merged.json.gz && streamscope analyze merged.json.gz"
    )
    return 0


def rank_line(row: dict[str, Any], collectives: int) -> str:
    """One rank of the per-rank summary (a ``ranks`` record of webapp.rankwork.join_summaries), each number
    with its unit and what it is per: the median step, the clock offset, the collectives it arrived last in
    and its wait inside collectives per step (as the merged run's per-rank breakdown has it)."""
    wait = row.get("wait_per_step_ns")
    waited = "-" if wait is None else f"{wait / 1e6:.2f} ms"
    return (
        f"  rank {row['rank']:>4} {row['host'] or '?':<12} median step {row['step_time_median_ns'] / 1e6:8.2f} ms  "
        f"clock offset {row['offset_ns'] / 1e3:+9.1f} us  last in {row['last_count']:>4} of {collectives}  "
        f"waited {waited:>9} per step"
    )
