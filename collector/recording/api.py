"""``record()``: the recorder for a timing source (CUPTI by default, CUDA events on request)."""

from __future__ import annotations

from typing import Any

from collector.recording.cupti_recorder import CuptiRecorder
from collector.recording.events_recorder import EventsRecorder

TIMINGS = ("cupti", "events", "cpu")
"""Timing sources: ``cupti`` (exact device times from CUPTI activity records; the default), ``events``
(CUDA events around every op from a Python dispatch mode; slower, for when CUPTI is taken) and ``cpu``
(host ops and collectives only, for ranks without CUDA: collector.recording.cpu_recorder)."""


def record(workload: str = "", out: str | None = None, *, timing: str = "cupti", **options: Any) -> Any:
    """A recorder; use as a context manager (``with record(...) as rec``) or call start()/stop().

    ``timing``: ``"cupti"`` (default; falls back to events, and says so in the trace, when CUPTI is taken)
    or ``"events"``. Options: ``every`` (record every Nth step, default 1), ``rank`` (default: ``RANK`` from
    the environment, else 0; the device is ``LOCAL_RANK``'s when set, else the current one), ``probe`` (H2D
    bandwidth probe at start, default True), ``source``, ``command``, ``auto_steps`` (a step boundary after
    each optimizer step), ``calibrate`` (events timing: measure the events' own overhead at start and
    subtract it from GPU intervals, default True).

    Without CUDA, inside a distributed job (``WORLD_SIZE`` set or a process group initialised), or with
    ``timing="cpu"``, the recorder is a :class:`~collector.recording.cpu_recorder.CpuRecorder`: host
    lanes and collectives, rank and world size from the environment.
    """
    if timing not in TIMINGS:
        raise ValueError(f"timing must be one of {', '.join(TIMINGS)}, got {timing!r}")
    if timing == "cpu" or use_cpu_recorder():
        from collector.recording.cpu_recorder import CpuRecorder

        return CpuRecorder(workload, out, **options)
    cls = CuptiRecorder if timing == "cupti" else EventsRecorder
    return cls(workload, out, **options)


def use_cpu_recorder() -> bool:
    """True when torch sees no CUDA device and this process is a rank of a distributed job."""
    from collector.recording.cpu_recorder import in_distributed_job

    try:
        import torch
    except ImportError:
        return False
    return not torch.cuda.is_available() and in_distributed_job()
