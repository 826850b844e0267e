"""The page's GPU-timing note says what the timing source left out (``notes.limits``)."""

from __future__ import annotations

from analysis_traces import clean_run

from collector.recording.events_recorder import limits_text
from webapp.analysis.run import timing_note


def test_the_timing_note_states_the_events_timings_limits() -> None:
    trace = clean_run(2)
    notes = {"timing": "events", "timing_note": "CUDA events around every op", "limits": limits_text(12)}
    (text,) = timing_note(trace.with_meta(notes=notes))
    assert text.startswith("GPU timing: events (CUDA events around every op).")
    assert "Limits: work inside captured CUDA graphs is recorded as one graph launch" in text
    assert "torch.compile'd graphs (12 calls)" in text and "--timing cupti" in text
    assert "torch.compile" not in limits_text(0)
    (plain,) = timing_note(trace.with_meta(notes={"timing": "cupti"}))
    assert "Limits" not in plain
