"""Python's garbage collections timed while recording, and the sampled stretches they cut."""

from __future__ import annotations

import gc
import threading

import pytest

from collector.recording import gcspans
from collector.recording.gcspans import GcSpans, as_annotations, label, moved, split_samples


def _timed_full_collection() -> GcSpans:
    """One full collection, timed by a fresh GcSpans that is undone after it."""
    spans = GcSpans()
    undo = spans.install()
    try:
        gc.collect()
    finally:
        undo()
    return spans


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_a_full_collection_is_timed_on_its_thread_until_undone() -> None:
    held = [Node() for _ in range(200_000)]  # a full collection walks them all: milliseconds
    spans = _timed_full_collection()
    assert spans._on_gc not in gc.callbacks
    assert len(spans.spans) == 1, spans.spans
    tid, generation, start, end = spans.spans[0]
    assert tid == threading.get_native_id() and generation == 2
    assert end - start >= gcspans.MIN_NS
    assert as_annotations(spans.spans) == [(tid, "garbage collection (Python gc, generation 2)", start, end)]
    gc.collect()  # undone: no longer timed
    assert len(spans.spans) == 1
    del held


def test_collections_shorter_than_the_floor_are_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gcspans, "MIN_NS", 10**12)
    assert _timed_full_collection().spans == []


def test_sampled_stretches_are_cut_around_the_collections_of_their_thread() -> None:
    samples = [(0, 10, "main (t.py:1);step (t.py:5)"), (10, 20, "main (t.py:1);load (t.py:9)"), (20, 30, "")]
    spans = [(7, 2, 5, 12), (8, 0, 1, 3), (7, 0, 25, 26)]  # thread 8's collection is not the sampled thread's
    gc2, gc0 = label(2), label(0)
    assert split_samples(samples, spans, thread=7) == [
        (0, 5, "main (t.py:1);step (t.py:5)"),
        (5, 10, f"main (t.py:1);step (t.py:5);{gc2}"),
        (10, 12, f"main (t.py:1);load (t.py:9);{gc2}"),
        (12, 20, "main (t.py:1);load (t.py:9)"),
        (20, 25, ""),
        (25, 26, gc0),
        (26, 30, ""),
    ]
    assert split_samples(samples, spans, thread=9) == samples


def test_collections_the_recorders_own_thread_tipped_are_put_on_the_main_thread() -> None:
    spans = [(5, 0, 1, 2), (9, 2, 3, 4), (6, 1, 5, 6)]
    assert moved(spans, to=5, away_from={9}) == [(5, 0, 1, 2), (5, 2, 3, 4), (6, 1, 5, 6)]
