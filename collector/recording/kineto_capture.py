"""CUPTI timing through torch's own Kineto profiler: exact GPU intervals at near-zero host cost.

A :class:`KinetoCapture` runs ``torch.profiler`` with the CUDA activity (CUPTI: every kernel, memcpy and
memset with its stream and device times, and every CUDA runtime/driver call with its host times and
correlation id). CPU-op collection (``aten::`` op names) is switched on only while ``naming`` is on,
because it costs a few microseconds per op; the recorder names the ops of one step that way and the
launches of the other steps by their kernel (collector.recording.enrich).

:func:`event_table` turns the profiler's events into the columnar event table of
collector.traceformat.events, the input of the Kineto importer, without a JSON round trip.
Times are Kineto's: integer ns on the host's wall clock (``time.time_ns``), device times included.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

import pandas as pd

from collector.traceformat.events import EVENT_COLUMNS, EventTable

GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"})
HOST_API_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})
KEPT_CATEGORIES = GPU_CATEGORIES | HOST_API_CATEGORIES | {"cpu_op"}
"""Categories the recorder uses; annotations come from its own hooks, the rest is dropped."""


class CaptureUnavailable(RuntimeError):
    """CUPTI could not be started (no Kineto in this torch build, or another profiler holds CUPTI)."""


class KinetoCapture:
    """One Kineto session: :meth:`start`, :meth:`set_naming` at step boundaries, :meth:`stop` -> EventTable."""

    def __init__(self) -> None:
        self._prof: Any = None
        self.naming = False

    def start(self, naming: bool = True) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        if not torch.autograd.kineto_available():
            raise CaptureUnavailable("this torch build has no Kineto (CUPTI) profiler")
        self._prof = profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            record_shapes=False,
            with_stack=False,
            profile_memory=False,
        )
        try:
            self._prof.start()
        except RuntimeError as exc:  # e.g. "Profiler is already enabled" (torch.profiler or Nsight in use)
            self._prof = None
            raise CaptureUnavailable(f"CUPTI is taken: {str(exc).splitlines()[0]}") from None
        self.naming = True
        if not naming:
            self.set_naming(False)

    def set_naming(self, on: bool) -> None:
        """Collect ``aten::`` ops (names for GPU work) while ``on``; the CUDA activity is always collected."""
        if self._prof is None or on == self.naming:
            return
        from torch.profiler import ProfilerActivity

        self._prof.toggle_collection_dynamic(on, [ProfilerActivity.CPU])
        self.naming = on

    def set_collecting(self, on: bool) -> None:
        """Collect the CUDA activity while ``on`` (steps skipped by ``every`` are not collected)."""
        if self._prof is None:
            return
        from torch.profiler import ProfilerActivity

        self._prof.toggle_collection_dynamic(on, [ProfilerActivity.CUDA])

    def stop(self) -> EventTable:
        """Stop collecting; the events as an event table (only KEPT_CATEGORIES)."""
        if self._prof is None:
            raise RuntimeError("capture was not started")
        prof, self._prof = self._prof, None
        prof.stop()
        return event_table(prof.profiler.kineto_results.events())


def event_table(events: Iterable[Any], pid: int | None = None) -> EventTable:
    """Kineto events (objects with the ``_KinetoEvent`` methods) -> an EventTable of ``X`` events.

    GPU events sit on ``pid`` = device, ``tid`` = stream; host events on ``pid`` = this process and
    ``tid`` = the OS thread (Kineto's ``device_resource_id`` for host events). One pass over the events;
    the rest is columnar. Categories come from ``activity_type()`` where torch has it, else from
    :func:`category` (torch 2.11 and older).
    """
    pid = os.getpid() if pid is None else pid
    cat: list[str] = []
    name: list[str] = []
    proc: list[int] = []
    thread: list[int] = []
    ts: list[int] = []
    dur: list[int] = []
    stream: list[int] = []
    device: list[int] = []
    corr: list[int] = []
    nbytes: list[int] = []
    gpu, kept = GPU_CATEGORIES, KEPT_CATEGORIES
    typed: bool | None = None
    for e in events:
        if typed is None:
            typed = hasattr(e, "activity_type")
        label = e.name()
        c = e.activity_type() if typed else category(label, str(e.device_type()), e.device_index())
        if c not in kept:
            continue
        start = e.start_ns()
        cat.append(c)
        name.append(label)
        ts.append(start)
        dur.append(max(e.end_ns() - start, 0))
        corr.append(e.correlation_id() if c != "cpu_op" else -1)
        if c in gpu:
            d, s = e.device_index(), e.device_resource_id()
            proc.append(d)
            thread.append(s)
            stream.append(s)
            device.append(d)
            nbytes.append(_bytes(e) if c in ("gpu_memcpy", "gpu_memset") else 0)
        else:
            proc.append(pid)
            thread.append(e.device_resource_id())
            stream.append(-1)
            device.append(-1)
            nbytes.append(0)
    n = len(cat)
    cols: dict[str, Any] = {
        "ph": ["X"] * n,
        "cat": cat,
        "name": name,
        "pid": proc,
        "tid": thread,
        "ts_ns": ts,
        "dur_ns": dur,
        "arg_stream": stream,
        "arg_device": device,
        "arg_correlation": corr,
        "arg_bytes": nbytes,
    }
    frame = pd.DataFrame({k: cols.get(k, _default(k, n)) for k in EVENT_COLUMNS})
    setup = frame["name"].isin(SETUP_NAMES).to_numpy()
    if setup.any():  # set-up records carry no thread: the thread of the launch they delayed
        api = (frame["cat"] == "cuda_runtime").to_numpy()
        tid_of = dict(zip(frame["arg_correlation"][api], frame["tid"][api], strict=True))
        frame.loc[setup, "tid"] = [
            tid_of.get(c, t) for c, t in zip(frame["arg_correlation"][setup], frame["tid"][setup], strict=True)
        ]
        frame.loc[setup, "arg_correlation"] = -1
    for k, dtype in EVENT_COLUMNS.items():
        frame[k] = frame[k].astype(dtype)
    return EventTable({}, frame)


_RUNTIME_NAME = re.compile(r"^(cuda[A-Z]|cu[A-Z]|hip[A-Z])")
SETUP_NAMES = frozenset({"Lazy Function Loading"})
"""Host records CUPTI makes of first-call set-up (a kernel's module loaded on its first launch)."""


def category(name: str, device_type: str, device_index: int) -> str:
    """The Kineto category of an event from its name and device, for torch builds without
    ``activity_type()``: GPU work by name, CUDA/HIP API calls by name, set-up records, else ``cpu_op``."""
    if device_type.endswith("CUDA"):
        if name.startswith("Memcpy"):
            return "gpu_memcpy"
        return "gpu_memset" if name.startswith("Memset") else "kernel"
    if name in SETUP_NAMES:
        return "cuda_driver"
    if device_index < 0:
        return "overhead"  # the profiler's own records (buffer requests)
    return "cuda_runtime" if _RUNTIME_NAME.match(name) else "cpu_op"


def _bytes(e: Any) -> int:
    """Bytes of a memcpy/memset record: ``nbytes()`` where filled in, else its metadata's ``bytes``."""
    n = int(e.nbytes()) if hasattr(e, "nbytes") else 0
    if n > 0 or not hasattr(e, "metadata_json"):
        return n
    m = _META_BYTES.search(e.metadata_json() or "")
    return int(m.group(1)) if m else 0


_META_BYTES = re.compile(r'"bytes"\s*:\s*(\d+)')


def _default(column: str, n: int) -> Any:
    dtype = EVENT_COLUMNS[column]
    if dtype == "bool":
        return [False] * n
    return [-1] * n if dtype == "int64" else [""] * n
