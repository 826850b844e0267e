"""The ``streamscope`` command line: ``main(argv) -> int``, one module per subcommand.

Each subcommand module in ``webapp.commands`` has a docstring (its help), ``add_arguments(parser)`` and
``run(args) -> int``; it imports heavy dependencies inside ``run``. Errors a user can fix raise
:class:`CliError` (exit 2, one line on stderr).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from collector import __version__

SUBCOMMANDS = ("demos", "record", "convert", "analyze", "compare", "serve")
"""Subcommand names, each the module webapp.commands.<name> (only those that exist are offered)."""


class CliError(Exception):
    """An error with a one-line message and the exit code to leave with."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _available() -> dict[str, ModuleType]:
    modules: dict[str, ModuleType] = {}
    for name in SUBCOMMANDS:
        try:
            modules[name] = importlib.import_module(f"webapp.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"webapp.commands.{name}":
                raise
    return modules


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamscope",
        description="See where GPU time goes in a PyTorch job: record, analyze, compare and browse traces.",
    )
    parser.add_argument("--version", action="version", version=f"streamscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in _available().items():
        doc = (module.__doc__ or "").strip()
        p = sub.add_parser(name, help=doc.splitlines()[0] if doc else None, description=doc)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args))
    except CliError as exc:
        print(f"streamscope {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ValueError as exc:
        from collector.traceformat.spec import TraceFileError

        if not isinstance(exc, TraceFileError):
            raise
        print(f"streamscope {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
