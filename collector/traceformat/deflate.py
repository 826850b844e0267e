"""Write chunks of text to a file, plain or as one gzip member, preparing and compressing chunks in threads.

:class:`Sink` writes small parts at once and, given a function that makes chunk ``i`` (bytes-like) and the
number of chunks, has worker threads make and compress chunks ahead of the writer, which appends them in
order. Each chunk is raw deflate from a fresh compressor ending on a byte boundary (``Z_SYNC_FLUSH``); an
empty final block ends the member, so the file is an ordinary single-member gzip (as pigz writes it). Each
worker also takes its chunk's CRC-32, and the writer combines them (:func:`crc32_combine`), so no pass over
the whole text runs in one thread. zlib and the chunk functions this is used with (pyarrow compute) release
the GIL, so the threads run in parallel.
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


_CRC_POLY = 0xEDB88320  # CRC-32 (gzip's), bits reflected


def _multmodp(a: int, b: int) -> int:
    """a * b modulo the CRC-32 polynomial (reflected bit order, as zlib's crc32_combine)."""
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if a & (m - 1) == 0:
                return p
        m >>= 1
        b = (b >> 1) ^ _CRC_POLY if b & 1 else b >> 1


def _x2n_table() -> list[int]:
    table, p = [1 << 30], 1 << 30  # x^1
    for _ in range(31):
        p = _multmodp(p, p)
        table.append(p)
    return table


_X2N = _x2n_table()  # x^(2^k) modulo the polynomial


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of ``a + b`` from ``crc32(a)``, ``crc32(b)`` and ``len(b)`` (zlib's crc32_combine)."""
    p, k = 1 << 31, 3  # x^0; shift crc1 by 8 * len2 bits
    while len2:
        if len2 & 1:
            p = _multmodp(_X2N[k & 31], p)
        len2 >>= 1
        k += 1
    return _multmodp(p, crc1 & 0xFFFFFFFF) ^ (crc2 & 0xFFFFFFFF)


MAX_WORKERS = 16


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform says, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers() -> int:
    """Threads for writing: the CPUs this process may run on, at most :data:`MAX_WORKERS`."""
    return max(1, min(MAX_WORKERS, usable_cpus()))


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
        self.append_compressed(compressed, zlib.crc32(data), memoryview(data).nbytes)

    def append_compressed(self, compressed: bytes, crc: int, size: int) -> None:
        """Append a part by what :meth:`compress` made of it and its text's CRC-32 and size in bytes."""
        self._crc = crc32_combine(self._crc, crc, size)
        self._size += size
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

        def job(i: int) -> tuple[Any, bytes, int, int]:
            data = make(i)
            if stream is None:
                return data, b"", 0, 0
            return data, stream.compress(data), zlib.crc32(data), memoryview(data).nbytes

        def put(data: Any, compressed: bytes, crc: int, size: int) -> None:
            if stream is not None:
                stream.append_compressed(compressed, crc, size)
            else:
                self._out.write(data)

        if count == 1:  # a short recording's one chunk: no thread to start
            put(*job(0))
            return
        with ThreadPoolExecutor(threads) as pool:
            pending: dict[int, Future[tuple[Any, bytes, int, int]]] = {}
            for i in range(min(count, 2 * threads)):
                pending[i] = pool.submit(job, i)
            for i in range(count):
                done = pending.pop(i).result()
                if i + 2 * threads < count:
                    pending[i + 2 * threads] = pool.submit(job, i + 2 * threads)
                put(*done)

    def close(self) -> None:
        """End the gzip member (nothing to do for plain text)."""
        if self._stream is not None:
            self._stream.close()
