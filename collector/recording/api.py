"""``record()``: the recorder for a timing source (CUPTI by default, CUDA events on request)."""

from __future__ import annotations

from typing import Any

from collector.recording.cupti_recorder import CuptiRecorder
from collector.recording.recorder import Recorder

TIMINGS = ("cupti", "events")
"""Timing sources: ``cupti`` (exact device times from CUPTI activity records; the default) and ``events``
(CUDA events around every op from a Python dispatch mode; slower, for when CUPTI is taken)."""


def record(workload: str = "", out: str | None = None, *, timing: str = "cupti", **options: Any) -> Recorder:
    """A recorder; use as a context manager (``with record(...) as rec``) or call start()/stop().

    ``timing``: ``"cupti"`` (default; falls back to events, and says so in the trace, when CUPTI is taken)
    or ``"events"``. Options: ``every`` (record every Nth step, default 1), ``rank`` (default: ``RANK`` from
    the environment, else 0; the device is ``LOCAL_RANK``'s when set, else the current one), ``probe`` (H2D
    bandwidth probe at start, default True), ``source``, ``command``, ``auto_steps`` (a step boundary after
    each optimizer step), ``calibrate`` (events timing: measure the events' own overhead at start and
    subtract it from GPU intervals, default True).
    """
    if timing not in TIMINGS:
        raise ValueError(f"timing must be one of {', '.join(TIMINGS)}, got {timing!r}")
    cls = CuptiRecorder if timing == "cupti" else Recorder
    return cls(workload, out, **options)
