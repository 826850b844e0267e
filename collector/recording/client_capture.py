"""CUPTI timing without Kineto: :class:`ClientCapture` = our own CUPTI client + op names from a dispatch mode.

Same interface as collector.recording.kineto_capture.KinetoCapture (``start``, ``set_naming``, ``stop`` ->
EventTable on the wall clock), at a lower cost: no per-op callback in torch once naming is off, and
stopping reads CUPTI's buffers with numpy instead of building a Python object per event.

The event table holds what the Kineto importer reads from a torch.profiler capture, named as Kineto names
it: kernels (demangled), ``Memcpy HtoD (Pinned -> Device)``, ``Memset (Device)``, CUDA runtime calls,
the driver calls that launched GPU work or wait, ``Lazy Function Loading`` set-up records, and the
``aten::`` ops of the naming window as ``cpu_op`` rows.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from collector.recording import cupti_client as cc
from collector.recording.autogradprobe import autograd_threads
from collector.recording.clock import ClockLine, clock_pair
from collector.recording.commjoin import Threads
from collector.recording.glooguard import watch_gloo_on_cuda
from collector.recording.kineto_capture import LAZY_LOADING, CaptureUnavailable, columns_table, refuse_if_profiling
from collector.recording.opnames import OpNamer, warm_up
from collector.traceformat.events import EventTable
from collector.traceformat.gather import side_by_side

WAITING_DRIVER_PREFIXES = ("cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cuMemcpy", "cuMemFree")
"""Driver calls kept even when they launched nothing: they can make the host wait."""


class ClientCapture:
    """One capture; :meth:`start`, :meth:`set_naming` at step boundaries, :meth:`stop` -> EventTable."""

    def __init__(self) -> None:
        self._client: cc.CuptiClient | None = None
        self._namer = OpNamer()
        self._unwatch: Callable[[], None] | None = None
        self.threads: dict[int, int] = {}
        """Thread ident (low 32 bits, CUPTI's thread id) -> native id, for the threads seen in Python."""
        self._pairs: list[tuple[tuple[int, int], tuple[int, int]]] = []
        self._seen: dict[int, int] = {}
        self.losses = ""
        """After :meth:`stop`: what CUPTI's records lack, in words ("" when nothing was lost)."""
        self.start_timings: dict[str, float] = {}
        """After :meth:`start`: seconds of the op namer's warm-up and of starting CUPTI."""
        self.detached = False
        """After :meth:`stop`: whether CUPTI was detached from the process (later launches run at their
        unrecorded speed; see :func:`may_detach`)."""

    def start(self, naming: bool = True) -> None:
        import torch

        refuse_if_profiling(torch)
        t0 = time.perf_counter()
        if naming:
            warm_up()
        t1 = time.perf_counter()
        try:
            client = cc.CuptiClient()
            client.start()
        except cc.CuptiUnavailable as exc:
            raise CaptureUnavailable(str(exc)) from None
        self.start_timings = {"naming_warm_up": t1 - t0, "cupti_start": time.perf_counter() - t1}
        self._client = client
        self.note_thread()
        self._pairs.append((clock_pair(client.timestamp), clock_pair()))
        if naming:
            self._namer.start()
            self._unwatch = watch_gloo_on_cuda(lambda: self._namer.stop("gloo"))

    @property
    def naming(self) -> bool:
        """Ops are being named (until a step boundary or a bound of collector.recording.opnames)."""
        return self._namer.on

    def when_naming_ends(self, call: Callable[[], None]) -> None:
        """``call()`` once naming has ended for good (a pause is not an end), or now if ops are not being named."""
        self._namer.on_end.add(call, ended=not self.naming)

    def naming_summary(self) -> tuple[str, int]:
        """What ended the naming (a key of collector.recording.opnames.STOPPED_BY) and how long it ran, ns."""
        namer = self._namer
        return namer.stopped_by, (namer.stopped_ns - namer.started_ns) if namer.started_ns else 0

    def note_thread(self) -> None:
        """Remember the calling thread's native id (its CUPTI records then land on its lane)."""
        self.threads[threading.get_ident() & 0xFFFFFFFF] = threading.get_native_id()

    def set_naming(self, on: bool, reason: str = "step") -> None:
        """Name ops while ``on``. Switched off for ``reason`` (a key of collector.recording.opnames.STOPPED_BY)
        it stays off, except after ``reason="pause"``: then ``set_naming(True)`` goes on. The mode leaves the
        stack at once if it can."""
        if on:
            self._namer.resume()
        elif reason == "pause":
            self._namer.pause()
        else:
            self._namer.stop(reason)

    def python_threads(self) -> Threads:
        """After :meth:`stop`: the threads Python ran on (their records carry native thread ids)."""
        return Threads(frozenset(self._seen.values()), dict(self._seen))

    def stop_api_records(self) -> None:
        """No more host API records (the recorder's own calls while it stops): nothing of them to drop."""
        if self._client is not None:
            self._client.stop_api_records()

    def stop(self, timings: dict[str, float] | None = None) -> EventTable:
        """Stop collecting (the GPU must be idle); the records as an event table on the wall clock.
        ``timings`` receives the seconds spent flushing CUPTI's buffers, reading them and tabulating."""
        if self._client is None:
            raise RuntimeError("capture was not started")
        client, self._client = self._client, None
        self._namer.stop("stop")
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        self._pairs.append((clock_pair(client.timestamp), clock_pair()))
        t0 = time.perf_counter()
        records = client.stop()
        self.losses = losses(records)
        t1 = time.perf_counter()
        (c0, w0), (c1, w1) = self._pairs[0], self._pairs[-1]
        cupti_to_mono, mono_to_wall = ClockLine.inverse(c0, c1), ClockLine(w0, w1)
        live = {t.ident & 0xFFFFFFFF: t.native_id for t in threading.enumerate() if t.ident and t.native_id}
        threads = {**live, **self._namer.threads, **self.threads}  # e.g. a DataLoader's pin-memory thread
        calling = api_threads(records)
        workers = functools.cache(lambda: _autograd_workers(records))  # its backward runs once at most
        if not calling <= threads.keys():  # a thread Python never named: the autograd worker, if it is one
            threads.update(workers())
        own = threading.get_ident() & 0xFFFFFFFF
        self.detached = may_detach(calling, own, lambda: set(workers())) and client.detach()
        self._seen = threads
        table = event_table(
            records,
            self._namer.rows,
            threads,
            lambda ns: mono_to_wall.array(cupti_to_mono.array(ns)),
            mono_to_wall.array,
        )
        if timings is not None:
            timings.update(flush=client.flush_s, read=t1 - t0 - client.flush_s, tabulate=time.perf_counter() - t1)
        return table


def may_detach(calling: set[int], own: int, autograd: Callable[[], set[int]]) -> bool:
    """Whether CUPTI may be detached when a capture stops: it must not detach under a CUDA call in flight, so
    only where no other thread can be in one. Not while torch.distributed runs (its communication threads call
    CUDA at any moment), and only where every thread that made the recording's CUDA calls (``calling``,
    :func:`api_threads`) is the stopping thread (``own``, CUPTI's thread id) or an autograd worker
    (``autograd()``: idle while the stopping thread is not in a backward). A DataLoader's pin-memory thread, a
    gloo worker or the program's own threads keep CUPTI attached."""
    import torch

    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        return False
    others = calling - {own}
    return not others or others <= autograd()


def api_threads(records: cc.Records) -> set[int]:
    """CUPTI thread ids of the threads that made the records' CUDA runtime and driver calls."""
    cols = [records.columns.get(k) for k in (cc.RUNTIME, cc.DRIVER)]
    return {int(t) for c in cols if c for t in np.unique(c["thread"]).tolist()}


def _autograd_workers(records: cc.Records) -> dict[int, int]:
    """CUPTI thread id -> native id of the autograd workers of the devices the records ran work on (found by
    a backward on each, waited for: CUPTI may detach next)."""
    import torch

    devices = _devices(records)
    found = autograd_threads(torch, devices)
    if torch.cuda.is_initialized():
        for index in devices:
            torch.cuda.synchronize(index)
    return found


def _devices(records: cc.Records) -> list[int]:
    """The CUDA devices the records' kernels, copies and memsets ran on."""
    cols = [records.columns.get(k) for k in (cc.CONCURRENT_KERNEL, cc.MEMCPY, cc.MEMSET)]
    found = [np.unique(c["device"]) for c in cols if c and "device" in c]
    return sorted({int(d) for d in np.concatenate(found)}) if found else []


def losses(records: cc.Records) -> str:
    """What a capture lost, in words: records CUPTI dropped, buffer bytes that could not be read."""
    lost = []
    if records.dropped:
        lost.append(f"CUPTI dropped {records.dropped:,} records")
    if records.unread_bytes:
        lost.append(f"{records.unread_bytes:,} bytes of CUPTI records could not be read")
    return ("; ".join(lost) + ": GPU work is missing from this trace") if lost else ""


class _Rows:
    """The event table under construction: parts of rows per record kind, names and categories as codes
    into one list each (one string per distinct name, none per event)."""

    def __init__(self, threads: dict[int, int]) -> None:
        self.parts: list[dict[str, np.ndarray]] = []
        self.labels: dict[str, int] = {}
        self.cats: dict[str, int] = {}
        self.launched: list[np.ndarray] = []
        """Correlation ids of GPU work added so far."""
        self._pid = os.getpid()
        keys = np.fromiter(threads.keys(), np.int64, len(threads))
        order = np.argsort(keys)
        self._keys, self._natives = keys[order], np.fromiter(threads.values(), np.int64, len(threads))[order]

    def native(self, tids: np.ndarray) -> np.ndarray:
        """CUPTI thread ids -> native thread ids where known (unknown ones stay as they are)."""
        if not len(self._keys) or not len(tids):
            return tids
        at = np.clip(np.searchsorted(self._keys, tids), 0, len(self._keys) - 1)
        return np.where(self._keys[at] == tids, self._natives[at], tids)

    def add(self, cat: str, distinct: list[str], codes: np.ndarray, c: dict[str, np.ndarray], gpu: bool) -> None:
        """Rows of one kind: ``distinct`` names and each row's code into it; ``c`` holds start, end (trace
        clock), correlation, bytes (optional) and device/stream (GPU) or thread (host)."""
        n = len(c["start"])
        to_global = np.array([self.labels.setdefault(x, len(self.labels)) for x in distinct], dtype=np.int64)
        none = np.full(n, -1, dtype=np.int64)
        self.parts.append(
            {
                "cat": np.full(n, self.cats.setdefault(cat, len(self.cats)), dtype=np.int64),
                "name": to_global[codes] if len(to_global) else np.zeros(n, dtype=np.int64),
                "pid": c["device"] if gpu else np.full(n, self._pid, dtype=np.int64),
                "tid": c["stream"] if gpu else self.native(c["thread"]),
                "start": c["start"],
                "end": np.maximum(c["end"], c["start"]),
                "stream": c["stream"] if gpu else none,
                "device": c["device"] if gpu else none,
                "correlation": c["correlation"],
                "bytes": c.get("bytes", np.zeros(n, dtype=np.int64)),
            }
        )
        if gpu:
            self.launched.append(c["correlation"])

    def table(self) -> EventTable:
        """The rows of every part in time order."""
        if not self.parts:
            return columns_table({}, 0)
        start = np.concatenate([p["start"] for p in self.parts], dtype=np.int64)
        end = np.concatenate([p["end"] for p in self.parts], dtype=np.int64)
        order = np.argsort(start, kind="stable")

        def column(key: str) -> Callable[[], np.ndarray]:
            return lambda: np.concatenate([p[key] for p in self.parts], dtype=np.int64).take(order)

        n = len(order)
        keys = ("cat", "name", "pid", "tid", "stream", "device", "correlation", "bytes")
        made = side_by_side([*map(column, keys), lambda: start.take(order), lambda: (end - start).take(order)], n)
        c = dict(zip((*keys, "ts_ns", "dur_ns"), made, strict=True))
        cols: dict[str, Any] = {
            "ph": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=pd.Index(["X"])),
            "cat": pd.Categorical.from_codes(c["cat"], categories=pd.Index(list(self.cats))),
            "name": pd.Categorical.from_codes(c["name"], categories=pd.Index(list(self.labels))),
            "pid": c["pid"],
            "tid": c["tid"],
            "ts_ns": c["ts_ns"],
            "dur_ns": c["dur_ns"],
            "arg_stream": c["stream"],
            "arg_device": c["device"],
            "arg_correlation": c["correlation"],
            "arg_bytes": c["bytes"],
        }
        return columns_table(cols, n)


def event_table(
    records: cc.Records,
    ops: list[tuple[int, str, int, int]],
    threads: dict[int, int],
    cupti_to_wall: Any,
    mono_to_wall: Any,
) -> EventTable:
    """The event table of a capture's records and named ops (see the module docstring); CUPTI times are
    mapped by ``cupti_to_wall``, the ops' monotonic times by ``mono_to_wall`` (both on int64 arrays)."""
    rows = _Rows(threads)
    cols, names = records.columns, records.names

    def timed(c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**c, "start": cupti_to_wall(c["start"]), "end": cupti_to_wall(c["end"])}

    k = cols.get(cc.CONCURRENT_KERNEL)
    if k:
        kernel_names = names[cc.CONCURRENT_KERNEL]
        rows.add("kernel", [kernel_names[i] for i in range(len(kernel_names))], k["name"], timed(k), True)
    m = cols.get(cc.MEMCPY)
    if m:
        triples = np.stack([m["copy_kind"], m["src_kind"], m["dst_kind"]], axis=1)
        kinds, codes = np.unique(triples, axis=0, return_inverse=True)
        label = [f"Memcpy {_pick(cc.COPY_KINDS, a)} ({_memory(b)} -> {_memory(d)})" for a, b, d in kinds.tolist()]
        rows.add("gpu_memcpy", label, codes.reshape(-1), timed(m), True)
    s = cols.get(cc.MEMSET)
    if s:
        memory, codes = np.unique(s["memory_kind"], return_inverse=True)
        rows.add("gpu_memset", [f"Memset ({_memory(v)})" for v in memory.tolist()], codes, timed(s), True)
    launched = np.concatenate(rows.launched) if rows.launched else np.array([], dtype=np.int64)
    r = cols.get(cc.RUNTIME)
    if r:
        cbids, codes = cc.small_codes(r["cbid"])
        rows.add("cuda_runtime", [_call(names[cc.RUNTIME], c) for c in cbids.tolist()], codes, timed(r), False)
    d = cols.get(cc.DRIVER)
    if d:
        cbids, codes = cc.small_codes(d["cbid"])
        calls = [_call(names[cc.DRIVER], c) for c in cbids.tolist()]
        waits = np.array([c.startswith(WAITING_DRIVER_PREFIXES) for c in calls], dtype=bool)
        keep = contains(launched, d["correlation"]) | waits[codes]
        rows.add("cuda_driver", calls, codes[keep], timed({f: v[keep] for f, v in d.items()}), False)
    o = cols.get(cc.OVERHEAD)
    if o:
        lazy = o["overhead_kind"] == cc.LAZY_FUNCTION_LOADING
        setup = {f: v[lazy] for f, v in o.items()}
        setup["correlation"] = np.full(int(lazy.sum()), -1, dtype=np.int64)
        rows.add("cuda_driver", [LAZY_LOADING], np.zeros(int(lazy.sum()), dtype=np.int64), timed(setup), False)
    if ops:
        tid, name, t0, t1 = (np.asarray(x) for x in zip(*ops, strict=True))
        distinct, codes = np.unique(name.astype(str), return_inverse=True)
        named = {
            "start": mono_to_wall(t0.astype(np.int64)),
            "end": mono_to_wall(t1.astype(np.int64)),
            "thread": tid.astype(np.int64),
            "correlation": np.full(len(ops), -1, dtype=np.int64),
        }
        rows.add("cpu_op", distinct.tolist(), codes, named, False)
    return rows.table()


def contains(members: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.isin(values, members)`` for non-negative ids (CUPTI correlation ids), by a mask over the ids."""
    if not len(values) or not len(members):
        return np.zeros(len(values), dtype=bool)
    top = int(max(members.max(), values.max()))
    if members.min() < 0 or values.min() < 0 or top >= 1 << 28:
        return np.isin(values, members)
    mask = np.zeros(top + 1, dtype=bool)
    mask[members] = True
    return mask[values]


def _memory(kind: int) -> str:
    return _pick(cc.MEMORY_KINDS, kind)


def _pick(labels: tuple[str, ...], i: int) -> str:
    return labels[i] if 0 <= i < len(labels) else labels[0]


def _call(names: dict[int, str], cbid: int) -> str:
    """An API call's name from its callback id."""
    return names.get(int(cbid), f"cbid {cbid}")
