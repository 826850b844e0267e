"""The timing sources: the one registry, name -> :class:`~collector.recording.base.Recorder` subclass.

``record()`` (collector.recording.api), the CLI's ``--timing`` (its choices and its help) and the device checks
(collector.cli.runner) read it; a new timing source is one module with a Recorder subclass and one line here.
Each class says what it needs: ``needs_cuda`` (the device checks ask for a CUDA device only where it is True)
and ``summary`` (its words in ``--timing``'s help).
"""

from __future__ import annotations

from collector.recording.base import Recorder
from collector.recording.cpu_recorder import CpuRecorder, in_distributed_job
from collector.recording.cupti_recorder import CuptiRecorder
from collector.recording.events_recorder import EventsRecorder

TIMING_SOURCES: dict[str, type[Recorder]] = {
    "cupti": CuptiRecorder,
    "events": EventsRecorder,
    "cpu": CpuRecorder,
}
"""Timing sources by the name ``--timing`` and ``record(timing=...)`` take (the class's ``timing``), the default
first."""
DEFAULT_TIMING = "cupti"
WITHOUT_CUDA = "cpu"
"""The source a rank of a distributed job records with when its source needs CUDA and torch sees none."""


def recorder_class(timing: str) -> type[Recorder]:
    """The class that records with ``timing`` in this process: its registered class, or the :data:`WITHOUT_CUDA`
    source where that class needs CUDA, torch sees no CUDA device and this process is a rank of a distributed
    job (:func:`use_cpu_recorder`). ValueError for a name that is not registered."""
    cls = TIMING_SOURCES.get(timing)
    if cls is None:
        raise ValueError(f"timing must be one of {', '.join(TIMING_SOURCES)}, got {timing!r}")
    if cls.needs_cuda and use_cpu_recorder():
        return TIMING_SOURCES[WITHOUT_CUDA]
    return cls


def use_cpu_recorder() -> bool:
    """True when torch sees no CUDA device and this process is a rank of a distributed job."""
    try:
        import torch
    except ImportError:
        return False
    return not torch.cuda.is_available() and in_distributed_job()
