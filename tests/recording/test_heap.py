"""collector.recording.heap: freed column-sized arrays are reused without new page faults while a recording stops."""

from __future__ import annotations

import resource

import numpy as np
import pytest

from collector.recording import heap

pytestmark = pytest.mark.skipif(heap._libc() is None, reason="needs glibc's mallopt")

COLUMN = 1_000_000  # int64 rows: an 8 MB array, a stop's usual column


def _faults_of_reuse() -> int:
    """Page faults taken by three rounds of eight columns held together and dropped (after one such round),
    as a stop's phases make and drop their columns."""

    def one_round() -> None:
        held = [np.full(COLUMN, i, dtype=np.int64) for i in range(8)]
        del held

    one_round()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        one_round()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_steady_heap_reuses_freed_columns() -> None:
    pages_per_column = COLUMN * 8 // resource.getpagesize()
    with heap.steady_heap():
        inside = _faults_of_reuse()
    assert inside < pages_per_column  # 24 columns made: fewer faults than one fresh column has pages


def test_steady_heap_gives_memory_back_after() -> None:
    with heap.steady_heap():
        kept = [np.ones(COLUMN, dtype=np.int64) for _ in range(8)]
        rss_full = _rss_kb()
        del kept
    assert _rss_kb() < rss_full - 32 * 1024  # the 64 MB held inside was trimmed from the heap afterwards


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
