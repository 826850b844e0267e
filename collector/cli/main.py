"""``python3 -m collector record|demos``: the collector's own command line (no web dependencies).

The same functions back ``streamscope record`` and ``streamscope demos`` (webapp/commands/).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def print_demos(verbose: bool = False) -> None:
    from collector.demos import loops

    for line, demo in zip(loops.describe(), loops.DEMOS.values(), strict=False):
        print(line)
        if verbose:
            print(f"    teaches: {demo.teaches}")


def main(argv: Sequence[str] | None = None) -> int:
    from collector.cli.runner import add_record_arguments, record_description, request_from_args, run_record
    from collector.cli.usage import Parser, UsageError, parse
    from collector.errors import StreamscopeError

    parser = Parser(
        prog="python3 -m collector",
        description="Record PyTorch GPU traces.",
        epilog="Run `python3 -m collector COMMAND --help` for a command's arguments and options.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    rec = sub.add_parser(
        "record",
        help="record a demo (demo:NAME) or a script",
        description=record_description("python3 -m collector record"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_record_arguments(rec)
    dem = sub.add_parser("demos", help="list the built-in demos", description="List the built-in demos.")
    dem.add_argument("--verbose", "-v", action="store_true", help="also say what each demo teaches")
    try:
        args = parse(parser, argv)
    except UsageError as exc:
        print(exc.line(), file=sys.stderr)
        return exc.exit_code
    if args.command == "demos":
        print_demos(args.verbose)
        return 0
    if args.command != "record":
        parser.print_help()
        return 2
    try:
        return run_record(request_from_args(args))
    except StreamscopeError as exc:
        print(f"streamscope record: error: {exc}", file=sys.stderr)
        return exc.exit_code
