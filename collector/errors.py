"""The one error base of Streamscope: every error a user can act on carries the exit code the CLI returns."""

from __future__ import annotations


class StreamscopeError(Exception):
    """A user-facing error: its message is one line that says what to do; ``exit_code`` is what the CLI returns."""

    exit_code: int = 2

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
