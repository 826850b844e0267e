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

import os
import threading
import time
from typing import Any

import numpy as np
import pandas as pd

from collector.recording import cupti_client as cc
from collector.recording.clock import ClockLine, clock_pair
from collector.recording.kineto_capture import SETUP_NAMES, CaptureUnavailable, columns_table
from collector.recording.opnames import OpNamer, warm_up
from collector.traceformat.events import EventTable

WAITING_DRIVER_PREFIXES = ("cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cuMemcpy", "cuMemFree")
"""Driver calls kept even when they launched nothing: they can make the host wait."""
_SETUP_NAME = next(iter(SETUP_NAMES))


class ClientCapture:
    """One capture; :meth:`start`, :meth:`set_naming` at step boundaries, :meth:`stop` -> EventTable."""

    def __init__(self) -> None:
        self._client: cc.CuptiClient | None = None
        self._namer = OpNamer()
        self.naming = False
        self.threads: dict[int, int] = {}
        """Thread ident (low 32 bits, CUPTI's thread id) -> native id, for the threads seen in Python."""
        self._pairs: list[tuple[tuple[int, int], tuple[int, int]]] = []

    def start(self, naming: bool = True) -> None:
        import torch

        if torch.autograd.profiler._is_profiler_enabled:
            raise CaptureUnavailable("CUPTI is taken: torch.profiler is running")
        if naming:
            warm_up()
        try:
            client = cc.CuptiClient()
            client.start()
        except cc.CuptiUnavailable as exc:
            raise CaptureUnavailable(str(exc)) from None
        self._client = client
        self.note_thread()
        self._pairs.append((clock_pair(client.timestamp), clock_pair()))
        if naming:
            self._namer.start()
            self.naming = True

    def note_thread(self) -> None:
        """Remember the calling thread's native id (its CUPTI records then land on its lane)."""
        self.threads[threading.get_ident() & 0xFFFFFFFF] = threading.get_native_id()

    def set_naming(self, on: bool) -> None:
        """Name ops while ``on``; naming can only be switched off (it runs from the start of the capture)."""
        if self.naming and not on:
            self._namer.stop()
            self.naming = False

    def stop(self, timings: dict[str, float] | None = None) -> EventTable:
        """Stop collecting (the GPU must be idle); the records as an event table on the wall clock.
        ``timings`` receives the seconds spent flushing and reading CUPTI's buffers and tabulating."""
        if self._client is None:
            raise RuntimeError("capture was not started")
        client, self._client = self._client, None
        self._namer.stop()
        self.naming = False
        self._pairs.append((clock_pair(client.timestamp), clock_pair()))
        t0 = time.perf_counter()
        records = client.stop()
        t1 = time.perf_counter()
        (c0, w0), (c1, w1) = self._pairs[0], self._pairs[-1]
        cupti_to_mono, mono_to_wall = ClockLine.inverse(c0, c1), ClockLine(w0, w1)
        threads = {**self._namer.threads, **self.threads}
        table = event_table(
            records,
            self._namer.rows,
            threads,
            lambda ns: mono_to_wall.array(cupti_to_mono.array(ns)),
            mono_to_wall.array,
        )
        if timings is not None:
            timings.update(profiler_stop=t1 - t0, fetch=0.0, tabulate=time.perf_counter() - t1)
        return table


def event_table(
    records: cc.Records,
    ops: list[tuple[int, str, int, int]],
    threads: dict[int, int],
    cupti_to_wall: Any,
    mono_to_wall: Any,
) -> EventTable:
    """The event table of a capture's records and named ops (see the module docstring). Names and
    categories are built as categorical codes (one string per distinct name, none per event)."""
    parts: list[dict[str, Any]] = []
    gpu_corr: list[np.ndarray] = []
    labels: dict[str, int] = {}
    cats: dict[str, int] = {}
    cols = records.columns
    names = records.names
    pid = os.getpid()

    def native(tids: np.ndarray) -> np.ndarray:
        if not threads or not len(tids):
            return tids
        keys = np.fromiter(threads.keys(), np.int64, len(threads))
        vals = np.fromiter(threads.values(), np.int64, len(threads))
        order = np.argsort(keys)
        keys, vals = keys[order], vals[order]
        at = np.clip(np.searchsorted(keys, tids), 0, len(keys) - 1)
        return np.where(keys[at] == tids, vals[at], tids)

    def coded(distinct: list[str], codes: np.ndarray) -> np.ndarray:
        """Codes into ``distinct`` -> codes into the table's one list of names."""
        to_global = np.array([labels.setdefault(x, len(labels)) for x in distinct], dtype=np.int64)
        return to_global[codes] if len(to_global) else np.zeros(len(codes), dtype=np.int64)

    def add(cat: str, name: np.ndarray, c: dict[str, np.ndarray], gpu: bool, nbytes: Any = 0) -> None:
        n = len(c["start"])
        parts.append(
            {
                "cat": np.full(n, cats.setdefault(cat, len(cats)), dtype=np.int64),
                "name": name,
                "pid": c["device"] if gpu else np.full(n, pid, dtype=np.int64),
                "tid": c["stream"] if gpu else native(c["thread"]),
                "start": c["start"],
                "end": np.maximum(c["end"], c["start"]),
                "stream": c["stream"] if gpu else np.full(n, -1, dtype=np.int64),
                "device": c["device"] if gpu else np.full(n, -1, dtype=np.int64),
                "correlation": c["correlation"],
                "bytes": np.broadcast_to(np.asarray(nbytes, dtype=np.int64), (n,)),
            }
        )
        if gpu:
            gpu_corr.append(c["correlation"])

    def times(c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**c, "start": cupti_to_wall(c["start"]), "end": cupti_to_wall(c["end"])}

    k = cols.get(cc.CONCURRENT_KERNEL)
    if k:
        kernel_names = names[cc.CONCURRENT_KERNEL]
        add("kernel", coded([kernel_names[i] for i in range(len(kernel_names))], k["name"]), times(k), True)
    m = cols.get(cc.MEMCPY)
    if m:
        kinds, codes = np.unique(
            np.stack([m["copy_kind"], m["src_kind"], m["dst_kind"]], axis=1), axis=0, return_inverse=True
        )
        label = [
            f"Memcpy {_pick(cc.COPY_KINDS, a)} ({_pick(cc.MEMORY_KINDS, b)} -> {_pick(cc.MEMORY_KINDS, d)})"
            for a, b, d in kinds.tolist()
        ]
        add("gpu_memcpy", coded(label, codes.reshape(-1)), times(m), True, m["bytes"])
    s = cols.get(cc.MEMSET)
    if s:
        memory, codes = np.unique(s["memory_kind"], return_inverse=True)
        label = [f"Memset ({_pick(cc.MEMORY_KINDS, v)})" for v in memory.tolist()]
        add("gpu_memset", coded(label, codes), times(s), True, s["bytes"])
    launched = np.unique(np.concatenate(gpu_corr)) if gpu_corr else np.array([], dtype=np.int64)
    r = cols.get(cc.RUNTIME)
    if r:
        cbids, codes = np.unique(r["cbid"], return_inverse=True)
        add("cuda_runtime", coded([_call(names[cc.RUNTIME], c) for c in cbids.tolist()], codes), times(r), False)
    d = cols.get(cc.DRIVER)
    if d:
        cbids, codes = np.unique(d["cbid"], return_inverse=True)
        calls = [_call(names[cc.DRIVER], c) for c in cbids.tolist()]
        waits = np.array([c.startswith(WAITING_DRIVER_PREFIXES) for c in calls], dtype=bool)
        keep = np.isin(d["correlation"], launched) | waits[codes]
        if keep.any():
            add("cuda_driver", coded(calls, codes[keep]), times({f: v[keep] for f, v in d.items()}), False)
    o = cols.get(cc.OVERHEAD)
    if o:
        lazy = o["overhead_kind"] == cc.LAZY_FUNCTION_LOADING
        if lazy.any():
            sub = {f: v[lazy] for f, v in o.items()}
            sub["correlation"] = np.full(int(lazy.sum()), -1, dtype=np.int64)
            add("cuda_driver", coded([_SETUP_NAME], np.zeros(int(lazy.sum()), dtype=np.int64)), times(sub), False)
    if ops:
        tid, name, t0, t1 = (np.asarray(x) for x in zip(*ops, strict=True))
        distinct, codes = np.unique(name.astype(str), return_inverse=True)
        n = len(ops)
        op_cols = {
            "start": mono_to_wall(t0.astype(np.int64)),
            "end": mono_to_wall(t1.astype(np.int64)),
            "thread": tid.astype(np.int64),
            "correlation": np.full(n, -1, dtype=np.int64),
        }
        add("cpu_op", coded(distinct.tolist(), codes), op_cols, False)
    if not parts:
        return columns_table({}, 0)
    start = np.concatenate([p["start"] for p in parts]).astype(np.int64)
    end = np.concatenate([p["end"] for p in parts]).astype(np.int64)
    order = np.argsort(start, kind="stable")
    n = len(order)

    def column(key: str) -> np.ndarray:
        return np.concatenate([p[key] for p in parts]).astype(np.int64)[order]

    table_cols: dict[str, Any] = {
        "ph": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=pd.Index(["X"])),
        "cat": pd.Categorical.from_codes(column("cat"), categories=pd.Index(list(cats))),
        "name": pd.Categorical.from_codes(column("name"), categories=pd.Index(list(labels))),
        "pid": column("pid"),
        "tid": column("tid"),
        "ts_ns": start[order],
        "dur_ns": (end - start)[order],
        "arg_stream": column("stream"),
        "arg_device": column("device"),
        "arg_correlation": column("correlation"),
        "arg_bytes": column("bytes"),
    }
    return columns_table(table_cols, n)


def _pick(labels: tuple[str, ...], i: int) -> str:
    return labels[i] if 0 <= i < len(labels) else labels[0]


def _call(names: dict[int, str], cbid: int) -> str:
    """An API call's name from its callback id."""
    return names.get(int(cbid), f"cbid {cbid}")
