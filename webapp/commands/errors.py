"""The command line's error type: a leaf module, so every subcommand imports it at module level and
webapp.cli, which loads the subcommands, imports none of them back."""

from __future__ import annotations

from collector.errors import StreamscopeError


class CliError(StreamscopeError):
    """A bad command line or a missing input file: one line on stderr, exit code 2 unless told otherwise."""
