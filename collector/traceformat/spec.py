"""The leaf of the file-format package: its error type and the names every reader and writer shares."""

from __future__ import annotations

from collector.errors import StreamscopeError

STREAMSCOPE_KEY = "streamscope"
"""Top-level key of the metadata object that marks our own files (see collector.traceformat.read)."""

GZIP_MAGIC = b"\x1f\x8b"
"""The first two bytes of a gzip file: how a compressed trace is recognised (never by its name)."""

DEFAULT_MAX_INFLATED_BYTES = 8 * 1024**3
"""A .json.gz that inflates past this many bytes is refused as a likely gzip bomb (configurable)."""


class TraceFileError(StreamscopeError, ValueError):
    """A trace file that cannot be read; the message is one line a user can act on (CLI exit 2)."""


def corrupt_gzip(exc: Exception) -> TraceFileError:
    """The error for gzip data that does not inflate (``exc``: zlib's error)."""
    return TraceFileError(f"gzip data does not inflate ({exc}); the .gz file is corrupt")
