"""Upload files on disk, before they are loaded: gzip inflated to disk (never to memory), events counted.

Both read in chunks of CHUNK_BYTES, so memory stays at a few chunks whatever the file holds. An event is
counted by its ``"ph"`` key (every Chrome trace event has one); a ``"ph"`` inside a string only makes the
count, and so the memory estimate, a little larger.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO

CHUNK_BYTES = 1 << 20
GZIP_INPUT_BYTES = 1 << 14
"""Compressed bytes fed to zlib per call: no output cap is needed, so no unconsumed input to track."""
GZIP_MAGIC = b"\x1f\x8b"
_KEY = b'"ph"'


class InflateLimit(Exception):
    """The gzip inflates past the limit; ``args[0]`` is the limit in bytes."""


class EventCounter:
    """Counts ``"ph"`` keys over a stream of chunks (a key split across two chunks is counted once)."""

    def __init__(self) -> None:
        self.events = 0
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        joined = self._tail + chunk[: len(_KEY) - 1]
        self.events += joined.count(_KEY) + chunk.count(_KEY)
        self._tail = chunk[-(len(_KEY) - 1) :]


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def count_events(path: Path) -> int:
    """Events in a plain JSON trace file (see the module docstring)."""
    counter = EventCounter()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_BYTES):
            counter.feed(chunk)
    return counter.events


def inflate_to_disk(
    src: Path, dest: Path, limit_bytes: int, stop: Callable[[], bool] = lambda: False
) -> tuple[int, int]:
    """Inflate the gzip file ``src`` (one or more members) into ``dest``; return (bytes, events).

    Raises InflateLimit once more than ``limit_bytes`` come out (``dest`` then holds the first ones; the
    caller removes it), ValueError for corrupt or truncated data. ``stop()`` is asked every chunk; when
    true, inflating ends early (the caller checks why).
    """
    counter = EventCounter()
    size = 0
    with open(src, "rb") as fin, open(dest, "wb") as fout:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            while chunk := fin.read(GZIP_INPUT_BYTES):  # deflate inflates at most ~1032x: 17 MB per call
                while chunk:
                    piece = inflater.decompress(chunk)
                    size += len(piece)
                    if size > limit_bytes:
                        raise InflateLimit(limit_bytes)
                    counter.feed(piece)
                    fout.write(piece)
                    chunk = b""
                    if inflater.eof and inflater.unused_data.strip(b"\0"):  # another gzip member follows
                        chunk, inflater = inflater.unused_data, zlib.decompressobj(16 + zlib.MAX_WBITS)
                if stop():
                    return size, counter.events
        except zlib.error as exc:
            raise ValueError(f"gzip data does not inflate ({exc}); the .gz file is corrupt") from None
        if not inflater.eof:
            raise ValueError("gzip data ends early; the .gz file is truncated")
    return size, counter.events


def copy_limited(stream: IO[bytes], dest: Path, limit_bytes: int) -> int:
    """Copy ``stream`` into ``dest`` in chunks; return the bytes written. Raises InflateLimit past
    ``limit_bytes``."""
    written = 0
    with open(dest, "wb") as fh:
        while chunk := stream.read(CHUNK_BYTES):
            written += len(chunk)
            if written > limit_bytes:
                raise InflateLimit(limit_bytes)
            fh.write(chunk)
    return written
