"""Write chunks of text to a file, plain or as one gzip member, preparing and compressing chunks in threads.

:class:`Sink` writes small parts at once and, given a function that makes chunk ``i`` (bytes-like) and the
number of chunks, has worker threads make and compress chunks ahead of the writer, which appends them in
order. Each chunk is raw deflate from a fresh compressor ending on a byte boundary (``Z_SYNC_FLUSH``); an
empty final block ends the member, so the file is an ordinary single-member gzip (as pigz writes it). zlib
and the chunk functions this is used with (pyarrow compute) release the GIL, so the threads run in parallel.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
"""gzip member header: deflate, no flags, mtime 0, no extra flags, unknown OS."""


def workers() -> int:
    """Threads for writing: the CPUs this process may run on, at most 8."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus))


class GzipStream:
    """One gzip member written from parts compressed independently (see the module docstring)."""

    def __init__(self, out: IO[bytes], level: int = 3) -> None:
        self._out, self._level = out, level
        self._crc, self._size = 0, 0
        out.write(GZIP_HEADER)

    def compress(self, data: Any) -> bytes:
        """``data`` as raw deflate ending on a byte boundary (thread-safe; call :meth:`append` in order)."""
        c = zlib.compressobj(self._level, zlib.DEFLATED, -zlib.MAX_WBITS)
        return c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)

    def append(self, data: Any, compressed: bytes) -> None:
        """Append a part: its text (for the checksum and size) and what :meth:`compress` made of it."""
        self._crc = zlib.crc32(data, self._crc)
        self._size += memoryview(data).nbytes
        self._out.write(compressed)

    def close(self) -> None:
        """End the member: an empty final block, the CRC-32 and the size mod 2**32."""
        self._out.write(zlib.compressobj(self._level, zlib.DEFLATED, -zlib.MAX_WBITS).flush(zlib.Z_FINISH))
        self._out.write(struct.pack("<II", self._crc & 0xFFFFFFFF, self._size & 0xFFFFFFFF))


class Sink:
    """Where a trace's text goes: ``out`` as is, or (``gzip``) through one :class:`GzipStream`."""

    def __init__(self, out: IO[bytes], gzip: bool, level: int = 3) -> None:
        self._out = out
        self._stream = GzipStream(out, level) if gzip else None

    def write(self, data: Any) -> None:
        """Append ``data`` now (in this thread)."""
        if self._stream is not None:
            self._stream.append(data, self._stream.compress(data))
        else:
            self._out.write(data)

    def write_chunks(self, make: Callable[[int], Any], count: int, threads: int = 0) -> None:
        """Append ``make(0) .. make(count - 1)`` in order, each made (and compressed) in a worker thread, at
        most 2 chunks per thread in flight."""
        threads = threads or workers()
        stream = self._stream

        def job(i: int) -> tuple[Any, bytes]:
            data = make(i)
            return data, stream.compress(data) if stream is not None else b""

        with ThreadPoolExecutor(threads) as pool:
            pending: dict[int, Future[tuple[Any, bytes]]] = {}
            for i in range(min(count, 2 * threads)):
                pending[i] = pool.submit(job, i)
            for i in range(count):
                data, compressed = pending.pop(i).result()
                if i + 2 * threads < count:
                    pending[i + 2 * threads] = pool.submit(job, i + 2 * threads)
                if stream is not None:
                    stream.append(data, compressed)
                else:
                    self._out.write(data)

    def close(self) -> None:
        """End the gzip member (nothing to do for plain text)."""
        if self._stream is not None:
            self._stream.close()
