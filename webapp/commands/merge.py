"""Merge the trace files of a job's ranks into one multi-rank run, clocks aligned on their collectives.

  streamscope merge run.rank0.json.gz run.rank1.json.gz --out run.json.gz

Each file holds one rank (Streamscope's own or torch.profiler's, whose distributedInfo names the rank).
Ranks on different hosts are lined up on the ends of their collectives (docs/multi-rank.md); the offset
and residual error of each rank are printed and kept in the run's metadata.
"""

from __future__ import annotations

import argparse
from pathlib import Path

OUTPUT_SUFFIXES = (".json", ".json.gz")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("inputs", nargs="+", metavar="FILE", help="one trace per rank: .json or .json.gz")
    parser.add_argument("--out", "-o", required=True, metavar="FILE", help="merged trace to write (.json or .json.gz)")
    parser.add_argument("--no-align", action="store_true", help="keep each rank's clock as recorded")


def run(args: argparse.Namespace) -> int:
    from collector.merge import alignment_rows, merge_files
    from collector.traceformat.write import write_trace
    from webapp.cli import CliError

    paths = [Path(p) for p in args.inputs]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise CliError(f"{missing[0]}: no such file")
    dst = Path(args.out)
    if not dst.name.endswith(OUTPUT_SUFFIXES):
        raise CliError(f"{dst}: output must end in .json or .json.gz")
    if any(dst.exists() and dst.resolve() == p.resolve() for p in paths):
        raise CliError(f"{dst}: output would overwrite an input")
    trace = merge_files([str(p) for p in paths], align=not args.no_align)
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
