"""One clock: place CUDA event times on the host's monotonic clock through anchor events.

An anchor is a CUDA event recorded on an idle device and waited for, paired with the host time
(``time.monotonic_ns``) read right after the wait returns. Event times are read as milliseconds after the
first anchor (``cudaEventElapsedTime``); two anchors (start and stop) give offset and rate, so drift between
the GPU and host clocks over a long run is corrected. A host wait that ends because GPU work finished then
ends, on the timeline, where that work ends (both carry the same wake-up latency).

The CUPTI timings put everything on the wall clock (Kineto's, ``time.time_ns``): :func:`clock_pair`
readings and :class:`ClockLine` map the monotonic clock of the recorder's hooks, and CUPTI's own clock, onto it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ClockMap:
    """Linear map from event milliseconds (after the first anchor) to host nanoseconds."""

    host0_ns: int
    ns_per_ms: float = 1e6

    @classmethod
    def from_anchors(cls, host0_ns: int, host1_ns: int | None = None, elapsed1_ms: float | None = None) -> ClockMap:
        """From the first anchor's host time and, optionally, a second anchor (host ns, event ms after the first).

        A second anchor closer than 10 ms to the first, or implying a rate off by more than 0.1%, is ignored.
        """
        if host1_ns is None or elapsed1_ms is None or elapsed1_ms < 10.0:
            return cls(host0_ns)
        rate = (host1_ns - host0_ns) / elapsed1_ms
        if abs(rate / 1e6 - 1.0) > 1e-3:
            return cls(host0_ns)
        return cls(host0_ns, rate)

    def to_host_ns(self, elapsed_ms: np.ndarray) -> np.ndarray:
        """Host ns (int64) of event times given as float ms after the first anchor."""
        return self.host0_ns + np.rint(np.asarray(elapsed_ms, dtype=np.float64) * self.ns_per_ms).astype(np.int64)


def take_anchor(event_cls: Any, stream: Any, clock: Callable[[], int], tries: int = 5) -> tuple[Any, int]:
    """Record ``tries`` events on an idle ``stream``, wait for each; keep the one waited for the least.

    Returns ``(event, host_ns)``: the host time read right after that event's wait returned. ``clock`` is
    a zero-argument callable returning ns (injected for tests).
    """
    best: tuple[Any, int] | None = None
    best_wait = None
    for _ in range(tries):
        ev = event_cls(enable_timing=True)
        t0 = clock()
        ev.record(stream)
        ev.synchronize()
        t1 = clock()
        if best_wait is None or t1 - t0 < best_wait:
            best, best_wait = (ev, t1), t1 - t0
    if best is None:
        raise ValueError("take_anchor needs tries >= 1")
    return best


def clock_pair(other: Callable[[], int] = time.time_ns, tries: int = 5) -> tuple[int, int]:
    """(monotonic ns, ``other()`` ns; wall clock by default) read as close together as this host allows
    (the reading of ``tries`` bracketed by the shortest pair of monotonic readings)."""
    best = None
    for _ in range(tries):
        m0 = time.monotonic_ns()
        w = other()
        m1 = time.monotonic_ns()
        if best is None or m1 - m0 < best[0]:
            best = (m1 - m0, (m0 + m1) // 2, w)
    assert best is not None
    return best[1], best[2]


class ClockLine:
    """One clock's ns -> another's, the line through two (this, other) pairs: monotonic -> wall (Kineto's
    clock) with :func:`clock_pair` readings, or the inverse line of any two pairs with :meth:`inverse`."""

    def __init__(self, p0: tuple[int, int], p1: tuple[int, int]) -> None:
        self.m0, self.w0 = p0
        dm = p1[0] - p0[0]
        self.rate = (p1[1] - p0[1]) / dm if dm > 1_000_000 else 1.0

    def __call__(self, mono_ns: int) -> int:
        return self.w0 + round((mono_ns - self.m0) * self.rate)

    def array(self, ns: np.ndarray) -> np.ndarray:
        """The line applied to an int64 array (exact to the ns for spans of hours)."""
        offset = np.asarray(ns, dtype=np.int64) - self.m0
        return self.w0 + offset + np.rint(offset * (self.rate - 1.0)).astype(np.int64)

    @staticmethod
    def inverse(p0: tuple[int, int], p1: tuple[int, int]) -> ClockLine:
        """The line from the pairs' second clock to their first."""
        return ClockLine((p0[1], p0[0]), (p1[1], p1[0]))
