"""Python's garbage collections while recording, kept as host spans.

A collection holds the GIL, so the stack sampler (collector.recording.stacks) takes no sample during one: a full
collection, which walks every object the program holds (a quarter of a second in a Lightning loop, triggered by
whatever allocation tipped the count), would read as time in the frame sampled just before it. While the
recorder times GPU work with CUPTI (collector.recording.cupti_recorder, which samples the stacks), a
``gc.callbacks`` hook times each collection. Those of at least :data:`MIN_NS` become ``annotation`` rows named
by :func:`label` on the thread that ran them, and the sampled stretches they overlap are cut around them, with
the collection as the innermost frame of its part (:func:`split_samples`). The hook costs about 3 us a
collection (CPython builds its arguments): a loop making nothing but cyclic garbage, 236 young collections in
25 ms, ran 2.7% slower with it.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from collector.recording.stacks import SEP

MIN_NS = 100_000
"""Collections shorter than this are not kept (most of the young generation's: tens of microseconds)."""


def label(generation: int) -> str:
    """The name of a collection's annotation row and sampled frame."""
    return f"garbage collection (Python gc, generation {generation})"


class GcSpans:
    """Times Python's collections from :meth:`install` until the undo it returns is called: ``spans`` holds
    (thread id, generation, start_ns, end_ns) on ``time.monotonic_ns`` of each one that lasted :data:`MIN_NS`
    or more. Collections run one at a time, under the GIL."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, int, int, int]] = []
        self._started_ns = 0

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        now = time.monotonic_ns()
        if phase == "start":
            self._started_ns = now
            return
        started, self._started_ns = self._started_ns, 0
        if started and now - started >= MIN_NS:
            self.spans.append((threading.get_native_id(), int(info.get("generation", -1)), started, now))

    def install(self) -> Callable[[], None]:
        """Start timing collections; returns the undo that stops it."""
        gc.callbacks.append(self._on_gc)

        def undo() -> None:
            with contextlib.suppress(ValueError):
                gc.callbacks.remove(self._on_gc)

        return undo


def moved(
    spans: Sequence[tuple[int, int, int, int]], to: int, away_from: Collection[int | None]
) -> list[tuple[int, int, int, int]]:
    """``spans`` (as :attr:`GcSpans.spans`) with those run on a thread of ``away_from`` (the recorder's own: its
    stack sampler allocates too, and may tip the count) put on thread ``to``: a collection walks the program's
    objects and holds the GIL whichever thread tipped it."""
    return [(to if tid in away_from else tid, gen, start, end) for tid, gen, start, end in spans]


def as_annotations(spans: Sequence[tuple[int, int, int, int]]) -> list[tuple[int, str, int, int]]:
    """``spans`` (as :attr:`GcSpans.spans`) as annotation rows: (thread id, name, start_ns, end_ns)."""
    return [(tid, label(gen), start, end) for tid, gen, start, end in spans]


def split_samples(
    samples: Sequence[tuple[int, int, str]], spans: Sequence[tuple[int, int, int, int]], thread: int
) -> list[tuple[int, int, str]]:
    """``samples`` (start_ns, end_ns, folded stack) with each stretch that a collection of ``spans`` (as
    :attr:`GcSpans.spans`) on ``thread`` overlaps cut around it: the part inside the collection carries the
    stretch's stack with the collection as its innermost frame. Other stretches are kept as they are."""
    cuts = sorted((start, end, gen) for tid, gen, start, end in spans if tid == thread)
    if not cuts:
        return list(samples)
    ends = [end for _, end, _ in cuts]  # collections do not overlap: their ends are in order too
    out: list[tuple[int, int, str]] = []
    for start, end, stack in samples:
        at = start
        i = bisect.bisect_right(ends, start)
        while i < len(cuts) and cuts[i][0] < end:
            c_start, c_end, gen = cuts[i]
            if c_start > at:
                out.append((at, c_start, stack))
            inner = max(c_start, at), min(c_end, end)
            out.append((*inner, f"{stack}{SEP}{label(gen)}" if stack else label(gen)))
            at = inner[1]
            i += 1
        if at < end:
            out.append((at, end, stack))
    return out
