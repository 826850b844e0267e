"""Merge the trace files of a job's ranks into one multi-rank run, clocks aligned on their collectives.

  streamscope merge run.rank0.json.gz run.rank1.json.gz --out run.json.gz
  streamscope merge ranks.zip --out run.json.gz --workers 8

Files may come in a zip (its trace members are the ranks). Each rank's file is read in a
process of its own (--workers, or Ray tasks with --ray), then the ranks are joined in this one.

Each file holds one rank (Streamscope's own or torch.profiler's, whose distributedInfo names the rank).
Ranks on different hosts are lined up on the ends of their collectives (docs/multi-rank.md); the offset
and residual error of each rank are printed and kept in the run's metadata.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from webapp.commands.errors import CliError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    from webapp.commands.rankfiles import add_parallel_arguments

    parser.add_argument("inputs", nargs="+", metavar="FILE", help="one trace per rank, or a zip of them")
    parser.add_argument("--out", "-o", required=True, metavar="FILE", help="merged trace to write (.json or .json.gz)")
    parser.add_argument("--no-align", action="store_true", help="keep each rank's clock as recorded")
    add_parallel_arguments(parser)


def run(args: argparse.Namespace) -> int:
    import tempfile

    from collector.ranks.merge import alignment_rows, merge_traces
    from collector.traceformat.write import OUTPUT_SUFFIXES, write_trace
    from webapp.commands.rankfiles import check_workers, rank_paths
    from webapp.rankwork import load_rank, run_per_rank

    check_workers(args)
    dst = Path(args.out)
    if not dst.name.endswith(OUTPUT_SUFFIXES):
        raise CliError(f"{dst}: output must end in .json or .json.gz")
    if any(dst.exists() and Path(p).is_file() and dst.resolve() == Path(p).resolve() for p in args.inputs):
        raise CliError(f"{dst}: output would overwrite an input")
    with tempfile.TemporaryDirectory(prefix="streamscope-merge-") as scratch:
        paths = rank_paths(list(args.inputs), Path(scratch))
        traces = run_per_rank(load_rank, paths, workers=args.workers, ray=args.ray)
        trace = merge_traces(traces, [Path(p).name for p in paths], align=not args.no_align)
    try:
        write_trace(trace, str(dst))
    except OSError as exc:
        raise CliError(f"{dst}: cannot write ({exc.strerror or exc})") from None
    print(f"wrote {dst}: {len(trace.ranks)} ranks, {len(trace.intervals):,} intervals")
    for row in alignment_rows(trace):
        print(
            f"  rank {row['rank']} ({row.get('host') or '?'}): clock offset {row['offset_ns'] / 1e3:+.1f} us, "
            f"residual {row['residual_ns'] / 1e3:.1f} us over {row['anchors']} collectives"
        )
    return 0
