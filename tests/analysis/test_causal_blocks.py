"""A run over the replay's node budget is replayed in blocks of windows: the rows kept are those of the chosen
windows (GPU work with the call that launched it), whatever the number of rows placed at a time."""

from __future__ import annotations

import numpy as np
import pytest

from collector.synthetic import synthetic_trace
from webapp.analysis import causal
from webapp.analysis import intervals as iv
from webapp.analysis.context import prepare


def test_rows_are_kept_by_their_window_the_same_in_chunks_as_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    rd = prepare(synthetic_trace(30_000, ranks=1, pattern="naive"))
    monkeypatch.setattr(causal, "MAX_NODES", 3_000)
    keep, replayed = causal._sample(rd)
    assert keep is not None and 0 < replayed.sum() < len(replayed)
    monkeypatch.setattr(iv, "CHUNK_ROWS", 777)
    chunked, _ = causal._sample(rd)
    assert chunked is not None and np.array_equal(chunked, keep)
    launch = rd.rows_of_ids(np.asarray(rd.trace.intervals["launch_id"], dtype=np.int64))
    launched = np.flatnonzero(launch >= 0)
    assert launched.size and np.array_equal(keep[launched], keep[launch[launched]])  # GPU work goes with its call
    assert 0 < keep.sum() < len(keep)


def test_a_run_over_the_budget_says_it_was_replayed_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    rd = prepare(synthetic_trace(30_000, ranks=1, pattern="naive"))
    monkeypatch.setattr(causal, "MAX_NODES", 3_000)
    model = causal.causal_model(rd)
    assert not model.replayed.all() and any("in blocks spread through the run" in n for n in model.notes)
