"""CUPTI timing through torch's own Kineto profiler: the recorder's fallback reader (our own client,
collector.recording.client_capture, comes first), and the event table shared with the CPU recorder.

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
import time
from collections.abc import Callable, Iterable
from operator import methodcaller
from typing import Any

import numpy as np
import pandas as pd

from collector.recording.opnames import OnEnd
from collector.traceformat.events import EVENT_COLUMNS, EventTable

GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"})
HOST_API_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})
KEPT_CATEGORIES = GPU_CATEGORIES | HOST_API_CATEGORIES | {"cpu_op"}
"""Categories the recorder uses; annotations come from its own hooks, the rest is dropped."""


class CaptureUnavailable(RuntimeError):
    """CUPTI could not be started (no Kineto in this torch build, or another profiler holds CUPTI)."""


KINETO_LOG_LEVEL = "KINETO_LOG_LEVEL"
QUIET_LOG_LEVEL = "6"
"""Kineto logs nothing at this level, not even its ``USDT: ... profiler_start`` / ``profiler_stop`` lines."""


def quiet_kineto() -> Callable[[], None]:
    """Keep Kineto's own log lines off the user's terminal while a recorder's torch.profiler session runs
    (Kineto reads ``KINETO_LOG_LEVEL`` as it logs), unless the user set the level; returns the function that
    puts it back, to call once the session has stopped."""
    if KINETO_LOG_LEVEL in os.environ:
        return _nothing
    os.environ[KINETO_LOG_LEVEL] = QUIET_LOG_LEVEL

    def restore() -> None:
        os.environ.pop(KINETO_LOG_LEVEL, None)

    return restore


def _nothing() -> None:
    return None


def refuse_if_profiling(torch: Any) -> None:
    """Raise CaptureUnavailable while torch's profiler runs (torch.profiler, autograd.profiler): CUPTI is
    its, and starting a second session would stop the user's."""
    module = torch.autograd.profiler
    if getattr(module, "_is_profiler_enabled", False) or torch._C._autograd._profiler_enabled():
        raise CaptureUnavailable("CUPTI is taken: torch.profiler is running")


class KinetoCapture:
    """One Kineto session: :meth:`start`, :meth:`set_naming` at step boundaries, :meth:`stop` -> EventTable."""

    def __init__(self) -> None:
        self._prof: Any = None
        self._restore_log: Callable[[], None] = _nothing
        self.naming = False
        self._named: tuple[str, int, int] = ("", 0, 0)  # (what ended naming, start and end ns)
        self._on_end = OnEnd()

    def start(self, naming: bool = True) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        if not torch.autograd.kineto_available():
            raise CaptureUnavailable("this torch build has no Kineto (CUPTI) profiler")
        refuse_if_profiling(torch)
        self._prof = profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            record_shapes=False,
            with_stack=False,
            profile_memory=False,
        )
        self._restore_log = quiet_kineto()
        try:
            self._prof.start()
        except RuntimeError as exc:  # e.g. "Profiler is already enabled" (torch.profiler or Nsight in use)
            self._prof = None
            self._restore_log()
            raise CaptureUnavailable(f"CUPTI is taken: {str(exc).splitlines()[0]}") from None
        self.naming = True
        self._named = ("", time.monotonic_ns(), 0)
        if not naming:
            self.set_naming(False)

    def note_thread(self) -> None:
        """Nothing to do: Kineto names threads itself (the same interface as ClientCapture)."""

    def python_threads(self) -> Any:
        """The threads Python runs on (collector.recording.commjoin.Threads); Kineto's records carry every
        thread's native id."""
        import threading

        from collector.recording.commjoin import Threads

        live = {t.ident & 0xFFFFFFFF: t.native_id for t in threading.enumerate() if t.ident and t.native_id}
        return Threads(frozenset(live.values()), live)

    def stop_api_records(self) -> None:
        """Kineto's session cannot leave out API calls alone: the recorder's own are dropped by their window."""

    def set_naming(self, on: bool, reason: str = "step") -> None:
        """Collect ``aten::`` ops (names for GPU work) while ``on``; the CUDA activity is always collected.
        ``reason``: what ended it (a key of collector.recording.opnames.STOPPED_BY, or "pause")."""
        if self._prof is None or on == self.naming:
            return
        from torch.profiler import ProfilerActivity

        self._prof.toggle_collection_dynamic(on, [ProfilerActivity.CPU])
        self.naming = on
        if not on:
            self._named = (reason, self._named[1], time.monotonic_ns())
            if reason != "pause":
                self._on_end.fire()
        elif self._named[0] == "pause":
            self._named = ("", self._named[1], 0)

    def when_naming_ends(self, call: Callable[[], None]) -> None:
        """``call()`` once naming has ended for good (a pause is not an end), or now if ops are not being named."""
        self._on_end.add(call, ended=not self.naming)

    def naming_summary(self) -> tuple[str, int]:
        """What ended the naming and how long it ran, ns (as ClientCapture's)."""
        reason, t0, t1 = self._named
        return reason, (t1 or time.monotonic_ns()) - t0 if t0 else 0

    def stop(self, timings: dict[str, float] | None = None) -> EventTable:
        """Stop collecting; the events as an event table (only KEPT_CATEGORIES). ``timings`` receives the
        seconds spent stopping the profiler (``flush``), fetching its events (``read``) and tabulating them."""
        if self._prof is None:
            raise RuntimeError("capture was not started")
        prof, self._prof = self._prof, None
        t0 = time.perf_counter()
        prof.stop()
        self._restore_log()
        t1 = time.perf_counter()
        events = prof.profiler.kineto_results.events()
        t2 = time.perf_counter()
        table = event_table(events)
        if timings is not None:
            timings.update(flush=t1 - t0, read=t2 - t1, tabulate=time.perf_counter() - t2)
        return table


def event_table(
    events: Iterable[Any],
    pid: int | None = None,
    keep: frozenset[str] = KEPT_CATEGORIES,
    input_sized: tuple[str, ...] = (),
) -> EventTable:
    """Kineto events (objects with the ``_KinetoEvent`` methods) -> an EventTable of ``X`` events.

    GPU events sit on ``pid`` = device, ``tid`` = stream; host events on ``pid`` = this process and
    ``tid`` = the OS thread (Kineto's ``device_resource_id`` for host events). Only categories in ``keep``
    are kept (the CPU recorder keeps ``cpu_op`` and ``user_annotation``). Host events whose name starts with
    one of ``input_sized`` (gloo's collectives) get the bytes of their input tensors (recorded shapes).
    Categories come from ``activity_type()`` where torch has it, else from :func:`category` (torch 2.11 and
    older), once per distinct name. Each field is read for all events by one ``map`` (no Python loop body per event).
    """
    pid = os.getpid() if pid is None else pid
    evs = events if isinstance(events, list) else list(events)
    n = len(evs)
    kind = type(evs[0]) if n and all(type(e) is type(evs[0]) for e in evs[:1000]) else None

    def values(method: str) -> Any:
        """``e.method()`` for every event (the unbound method of their one type when they share it)."""
        fn = getattr(kind, method, None) if kind is not None else None
        return map(fn if fn is not None else methodcaller(method), evs)

    def column(method: str) -> np.ndarray:
        return np.fromiter(values(method), dtype=np.int64, count=n)

    names = pd.Categorical(list(values("name")))
    device_types = list(values("device_type"))
    on_gpu = {t: str(t).endswith("CUDA") for t in set(device_types)}  # a few distinct enum values
    is_gpu = np.fromiter(map(on_gpu.__getitem__, device_types), bool, n)
    dev = column("device_index")
    if n and hasattr(evs[0], "activity_type"):
        typed = pd.Categorical(list(values("activity_type")))
        cats = np.asarray(typed.categories, dtype=object)[typed.codes]
    else:
        key = pd.DataFrame({"name": names, "gpu": is_gpu, "neg": dev < 0})
        groups = key.groupby(["name", "gpu", "neg"], observed=True, sort=False).ngroup().to_numpy()
        firsts = key.drop_duplicates(["name", "gpu", "neg"])
        per_group = [
            category(str(nm), "CUDA" if g else "CPU", -1 if neg else 0)
            for nm, g, neg in zip(firsts["name"], firsts["gpu"], firsts["neg"], strict=True)
        ]
        cats = np.array(per_group, dtype=object)[groups] if n else np.array([], dtype=object)
    start, end = column("start_ns"), column("end_ns")
    resource = column("device_resource_id")
    corr = column("correlation_id")
    if not (n and hasattr(evs[0], "activity_type")):
        # GPU-side ranges of record_function annotations are CUDA events too: a "kernel" that no runtime
        # call launched (no call shares its correlation id) is such a range
        calls = corr[np.isin(cats, list(HOST_API_CATEGORIES))]
        unlaunched = (cats == "kernel") & ~np.isin(corr, calls)
        cats = np.where(unlaunched, "gpu_user_annotation", cats)
    kept = np.isin(cats, list(keep))
    gpu = is_gpu & kept
    copy_rows = np.flatnonzero(gpu & np.isin(cats, ["gpu_memcpy", "gpu_memset"]))
    nbytes = np.zeros(n, dtype=np.int64)
    nbytes[copy_rows] = [_bytes(evs[i]) for i in copy_rows]  # copies and memsets only
    if input_sized:
        from collector.recording.groups import input_bytes

        sized = np.array([str(c).startswith(input_sized) for c in names.categories] + [False], dtype=bool)
        for i in np.flatnonzero(kept & ~is_gpu & sized[names.codes]).tolist():
            nbytes[i] = input_bytes(evs[i].shapes(), evs[i].dtypes())
    rows = np.flatnonzero(kept)
    g = gpu[rows]
    m = len(rows)
    kept_names = pd.Categorical.from_codes(names.codes[rows], categories=names.categories)
    is_op = cats[rows] == "cpu_op"
    tid = resource[rows].copy()
    correlation = np.where(is_op, -1, corr[rows])
    setup = np.isin(np.asarray(names.categories, dtype=object)[names.codes[rows]], list(SETUP_NAMES))
    if setup.any():  # set-up records carry no thread: the thread of the launch they delayed
        api = np.flatnonzero(cats[rows] == "cuda_runtime")
        tid_of = pd.Series(tid[api], index=correlation[api])
        tid_of = tid_of[~tid_of.index.duplicated()]
        found = tid_of.reindex(correlation[setup]).to_numpy()
        tid[setup] = np.where(pd.notna(found), found, tid[setup]).astype(np.int64)
        correlation[setup] = -1
    cols: dict[str, Any] = {
        "ph": pd.Categorical.from_codes(np.zeros(m, dtype=np.int8), categories=pd.Index(["X"])),
        "cat": pd.Categorical(cats[rows]),
        "name": kept_names.remove_unused_categories(),
        "pid": np.where(g, dev[rows], pid),
        "tid": tid,
        "ts_ns": start[rows],
        "dur_ns": np.maximum(end[rows] - start[rows], 0),
        "arg_stream": np.where(g, resource[rows], -1),
        "arg_device": np.where(g, dev[rows], -1),
        "arg_correlation": correlation,
        "arg_bytes": nbytes[rows],
    }
    return columns_table(cols, m)


def columns_table(cols: dict[str, Any], m: int) -> EventTable:
    """An EventTable of ``m`` events from some of its columns (the others missing: -1, False or "")."""
    frame = pd.DataFrame({k: cols[k] if k in cols else _default(k, m) for k in EVENT_COLUMNS}, copy=False)
    return EventTable({}, frame)


_RUNTIME_NAME = re.compile(r"^(cuda[A-Z]|cu[A-Z]|hip[A-Z])")
LAZY_LOADING = "Lazy Function Loading"
SETUP_NAMES = frozenset({LAZY_LOADING})
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
    """A column of missing values with the event table's dtype (-1, False or the empty string)."""
    dtype = EVENT_COLUMNS[column]
    if dtype == "bool":
        return np.zeros(n, dtype=bool)
    if dtype == "int64":
        return np.full(n, -1, dtype=np.int64)
    return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=pd.Index([""]))
