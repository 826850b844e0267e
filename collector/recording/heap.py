"""Keep the C heap's freed memory while a recording stops, so its many column-sized arrays reuse pages.

Stopping a recording builds and drops hundreds of arrays of a few MB (a column of a million rows is 8 MB).
glibc's malloc maps each such block fresh and unmaps it when freed, so every new array pays page faults
and the kernel's zeroing of its pages again: about 1.3 ms per 8 MB array, and ten times that on memory a
virtual machine has not touched yet. :func:`steady_heap` makes blocks up to 32 MB (the largest glibc
allows) come from the heap and keeps freed heap memory while the block runs; afterwards the heap is
trimmed back. On other C libraries it does nothing.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024
"""glibc's ceiling for ``M_MMAP_THRESHOLD`` on 64-bit hosts: blocks up to this size come from the heap."""
TRIM_AFTER = 2 * MMAP_THRESHOLD_MAX
"""Trim threshold restored afterwards: what glibc's own adaptive setting reaches at that mmap threshold."""
KEEP_ALL = 2**31 - 1
"""Trim threshold within the block (the largest ``mallopt`` takes): nothing is given back."""


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.malloc_trim.argtypes = (ctypes.c_size_t,)
        return libc if hasattr(libc, "gnu_get_libc_version") else None
    except (OSError, AttributeError):
        return None


@contextmanager
def steady_heap() -> Iterator[None]:
    """Within the block, freed blocks of up to 32 MB stay in the heap for the next allocation (glibc only)."""
    libc = _libc()
    if libc is None:
        yield
        return
    libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)
    libc.mallopt(M_TRIM_THRESHOLD, KEEP_ALL)
    try:
        yield
    finally:
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_AFTER)
        libc.malloc_trim(0)
