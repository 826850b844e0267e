"""The command line's error type: a leaf module, so every subcommand imports it at module level and
webapp.cli, which loads the subcommands, imports none of them back."""

from __future__ import annotations

import os

from collector.errors import StreamscopeError


class CliError(StreamscopeError):
    """A bad command line or a missing input file: one line on stderr, exit code 2 unless told otherwise."""


def check_input_file(path: str | os.PathLike[str]) -> None:
    """Raise CliError unless ``path`` is a file to read, saying what it is instead (missing, a folder)."""
    if os.path.isfile(path):
        return
    if os.path.isdir(path):
        raise CliError(f"{path}: is a folder, not a trace file")
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    raise CliError(f"{path}: not a regular file")
