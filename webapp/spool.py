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

from collector.traceformat.spec import GZIP_MAGIC

CHUNK_BYTES = 1 << 20
GZIP_INPUT_BYTES = 1 << 14
"""Compressed bytes fed to zlib per call: no output cap is needed, so no unconsumed input to track."""
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


MAX_FIELD_BYTES = 64 * 1024
"""Bytes kept of the form fields beside the file in a multipart upload (all together)."""


class MultipartFile:
    """A ``multipart/form-data`` body parsed while it arrives: the data of the part named ``field`` (the
    first one with a filename) goes to ``write``, never to memory; the other fields (at most MAX_FIELD_BYTES
    in all) are kept in ``fields``. Parts of other files are dropped. ``error`` is a one-line message once
    the body is malformed (later input is then ignored); ``filename`` is "" until the file part begins.
    """

    def __init__(self, boundary: bytes, write: Callable[[bytes], object], field: str = "file") -> None:
        from werkzeug.sansio.multipart import MultipartDecoder

        self._decoder = MultipartDecoder(boundary, max_form_memory_size=4 * CHUNK_BYTES)
        self._write = write
        self._field = field
        self._target: str | None = None  # "file", a field name, or None (dropped)
        self._kept = 0
        self.filename = ""
        self.fields: dict[str, str] = {}
        self.error = ""

    def feed(self, data: bytes | None) -> None:
        """Parse the next bytes of the body (None: the body has ended)."""
        if self.error:
            return
        from werkzeug.sansio.multipart import NEED_DATA, Data, Epilogue, Field, File

        try:
            self._decoder.receive_data(data)
            while (event := self._decoder.next_event()) is not NEED_DATA and not isinstance(event, Epilogue):
                if isinstance(event, File):
                    first = event.name == self._field and not self.filename
                    self._target = "file" if first else None
                    if first:
                        self.filename = event.filename or "upload"
                elif isinstance(event, Field):
                    self._target = event.name if event.name != self._field else None
                    self.fields.setdefault(event.name, "")
                elif isinstance(event, Data):
                    self._take(event.data)
        except Exception as exc:  # noqa: BLE001 - werkzeug raises ValueError and HTTPException subclasses
            self.error = f"malformed multipart upload ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"

    def _take(self, data: bytes) -> None:
        if self._target == "file":
            self._write(data)
        elif self._target is not None and self._kept + len(data) <= MAX_FIELD_BYTES:
            self._kept += len(data)
            self.fields[self._target] += data.decode("utf-8", "replace")
