"""``record()``: the recorder for a timing source (CUPTI by default; collector.recording.sources lists them)."""

from __future__ import annotations

from typing import Any

from collector.recording.sources import DEFAULT_TIMING, TIMING_SOURCES, recorder_class, use_cpu_recorder

TIMINGS = tuple(TIMING_SOURCES)
"""The timing sources' names (collector.recording.sources.TIMING_SOURCES): ``cupti`` (exact device times from
CUPTI activity records; the default), ``events`` (CUDA events around every op from a Python dispatch mode;
slower, for when CUPTI is taken) and ``cpu`` (host ops and collectives only, for ranks without CUDA:
collector.recording.cpu_recorder)."""


def record(workload: str = "", out: str | None = None, *, timing: str = DEFAULT_TIMING, **options: Any) -> Any:
    """A recorder; use as a context manager (``with record(...) as rec``) or call start()/stop().

    ``timing``: a name in collector.recording.sources.TIMING_SOURCES: ``"cupti"`` (default; falls back to
    events, and says so in the trace, when CUPTI is taken), ``"events"`` or ``"cpu"``. Options, taken by every
    source (collector.recording.base.Recorder) and left unused by those they do not concern: ``every`` (record
    every Nth step, default 1), ``rank`` (default: ``RANK`` from the environment, else 0; the device is
    ``LOCAL_RANK``'s when set, else the current one), ``probe`` (H2D bandwidth probe, default True),
    ``source``, ``command``, ``auto_steps`` (a step boundary after each optimizer step), ``calibrate``
    (measure the recorder's own overhead at start and take it out, default True), ``stacks`` (sample the main
    thread's Python stack, default True).

    A source that needs CUDA (``needs_cuda``), without CUDA inside a distributed job (``WORLD_SIZE`` set or a
    process group initialised), gives way to :class:`~collector.recording.cpu_recorder.CpuRecorder`: host
    lanes and collectives, rank and world size from the environment.
    """
    return recorder_class(timing)(workload, out, **options)


__all__ = ["TIMINGS", "record", "use_cpu_recorder"]
