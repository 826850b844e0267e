"""Convert a trace (ours or torch.profiler's Chrome JSON) into a Streamscope trace file (.json or .json.gz).

The output opens in Perfetto (ui.perfetto.dev) and chrome://tracing unchanged.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from webapp.commands.analyze import TRACE_HELP
from webapp.commands.errors import CliError, check_input_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from webapp.commands.analyze import add_step_at_argument

    parser.add_argument("input", help=TRACE_HELP)
    parser.add_argument("output", help="file to write: .json or .json.gz (gzip)")
    add_step_at_argument(parser)


def run(args: argparse.Namespace) -> int:
    from collector.load import load_trace
    from collector.traceformat.write import OUTPUT_SUFFIXES, write_trace

    src, dst = Path(args.input), Path(args.output)
    check_input_file(src)
    if not dst.name.endswith(OUTPUT_SUFFIXES):
        raise CliError(f"{dst}: output must end in .json or .json.gz")
    if dst.exists() and dst.resolve() == src.resolve():
        raise CliError(f"{dst}: output would overwrite the input")
    if not dst.parent.is_dir():
        raise CliError(f"{dst.parent}: no such folder for the output")
    trace = load_trace(str(src), step_at=args.step_at)
    try:
        write_trace(trace, str(dst))
    except OSError as exc:
        raise CliError(f"{dst}: cannot write ({exc.strerror or exc})") from None
    print(f"wrote {dst}: {len(trace.intervals):,} intervals on {len(trace.lanes)} lanes, {len(trace.ranks)} rank(s)")
    return 0
