"""Usage errors of both command lines (``streamscope`` and ``python3 -m collector``): one line, exit code 2.

argparse prints its whole usage block before a usage error; :class:`Parser` raises :class:`UsageError`
instead, and :func:`parse` also blames arguments no parser took on the subcommand they followed. ``--help``
and ``--version`` print as argparse prints them.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from collector.errors import StreamscopeError


class UsageError(StreamscopeError):
    """A command line argparse cannot parse; ``prog`` is the (sub)command it was given to (exit code 2)."""

    def __init__(self, message: str, prog: str) -> None:
        super().__init__(message)
        self.prog = prog

    def line(self) -> str:
        """What the command prints on stderr: ``PROG: error: MESSAGE (see PROG --help)``."""
        return f"{self.prog}: error: {self} (see {self.prog} --help)"


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors raise UsageError rather than print the usage block and exit.
    Its subparsers are of this class too (``add_subparsers`` makes them of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.prog)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, except that arguments no parser took are the error of the subcommand they
    were given to (``dest="command"`` of the subparsers), not of the top-level command. Raises UsageError."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = getattr(args, "command", None)
        prog = f"{parser.prog} {command}" if command else parser.prog
        raise UsageError(f"unrecognized arguments: {' '.join(extra)}", prog)
    return args
