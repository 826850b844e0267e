"""The ``streamscope`` command line: ``main(argv) -> int``, one module per subcommand.

Each subcommand module in ``webapp.commands`` has a docstring (its help), ``add_arguments(parser)`` and
``run(args) -> int``; it imports heavy dependencies inside ``run``. Errors a user can fix raise
:class:`~webapp.commands.errors.CliError` (a leaf module, imported by the subcommands at module level); every
:class:`~collector.errors.StreamscopeError` leaves as one line on stderr and its exit code. A command line
argparse cannot parse is one line too (collector.cli.usage), exit code 2; ``--help`` prints the full help.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from collector import __version__
from collector.cli.usage import Parser, UsageError, parse
from collector.errors import StreamscopeError

SUBCOMMANDS = ("demos", "record", "convert", "merge", "analyze", "compare", "report", "serve")
"""Subcommand names, each the module webapp.commands.<name>."""


def _modules() -> dict[str, ModuleType]:
    return {name: importlib.import_module(f"webapp.commands.{name}") for name in SUBCOMMANDS}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="streamscope",
        description="See where GPU time goes in a PyTorch job: record, analyze, compare and browse traces.",
        epilog="Run `streamscope COMMAND --help` for a command's arguments and options.",
    )
    parser.add_argument("--version", action="version", version=f"streamscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in _modules().items():
        doc = (module.__doc__ or "").strip()
        p = sub.add_parser(name, help=doc.splitlines()[0] if doc else None, description=doc)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parse(parser, argv)
    except UsageError as exc:
        print(exc.line(), file=sys.stderr)
        return exc.exit_code
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args))
    except StreamscopeError as exc:
        print(f"streamscope {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
