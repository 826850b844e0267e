"""record(): intercept every PyTorch op at the dispatcher and time its GPU work with CUDA events.

Usage::

    from collector import record
    with record("resnet-bs256", out="run.json.gz") as rec:
        for batch in loader:
            ...
            rec.step()

While recording, a ``TorchDispatchMode`` sees every op of the recording thread and of autograd's backward
threads (the mode travels with autograd's thread-local state). Each op that launches GPU work gets two
pooled CUDA events on the stream it runs on (``torch.cuda.current_stream``) and a host span; events are
resolved lazily (in batches, or at stop) and placed on the host clock by anchors (collector.recording.clock). Host
waits are measured where they happen (collector.recording.hostwaits). Views and metadata ops produce no interval.

Known limits: work inside captured CUDA graphs is recorded as one graph launch; ops issued from threads
that the user starts (other than autograd's) and ops on devices other than the one current at start are
not timed on the GPU; ``torch.compile``'d regions run kernels the dispatcher does not see.
"""

from __future__ import annotations

import gc
import itertools
import os
import threading
import time
from collections import deque
from typing import Any

from collector import syncrules
from collector.errors import StreamscopeError
from collector.model import IntervalKind, MemoryKind, RunMeta, Trace
from collector.recording import compiled, graphs, hostwaits, ranges, sourceline
from collector.recording.base import Recorder, require_cuda
from collector.recording.build import build_trace
from collector.recording.clock import ClockMap, take_anchor
from collector.recording.glooguard import watch_gloo_on_cuda
from collector.recording.ops import OpClass, classify_op, copy_facts, has_bool_index

RESOLVE_BACKLOG_OPS = 16384
"""Pending timed ops above which finished batches are resolved (and their events reused) at step ends."""

_K = IntervalKind
_SKIP, _KERNEL = OpClass.SKIP, OpClass.KERNEL
_CPU_OP, _KERNEL_KIND = IntervalKind.CPU_OP, IntervalKind.KERNEL
_EVENT_POOL: list[Any] = []
"""Timing events free for reuse, shared by all recorders of the process (creating one costs ~1 us)."""
_CAPTURE_LIMIT = "work inside captured CUDA graphs is recorded as one graph launch"
EVENTS_NOTE = (
    "GPU intervals from CUDA events around each op, starts bounded by the end of the op's host call: "
    "exact on a busy stream; on a drained stream each interval also holds a few us of launch and event "
    "latency, so kernels of about 1 us read several times too long, and an op whose host call goes on after "
    "its first launch (a convolution) loses that part of its GPU time"
)


class EventsRecorder(Recorder):
    """A :class:`~collector.recording.base.Recorder` timed by CUDA events around each op; use
    :func:`collector.record` (``timing="events"``). ``probe``: the H2D bandwidth probe at start;
    ``calibrate``: measure the events' own overhead at start and take it off the GPU intervals (both options
    of the base; ``stacks`` is left unused)."""

    timing = "events"
    summary = "CUDA events around every op"

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self._ids = itertools.count()
        self._host: list[tuple[Any, ...]] = []  # (tid, kind, name, t0, t1, bytes, mem, nb, step, source, cause, id)
        self._open: list[tuple[Any, ...]] = []  # (ev_s, ev_e, stream_id, kind, name, bytes, mem, nb, step, launch, id)
        self._sealed: deque[list[tuple[Any, ...]]] = deque()
        self._resolved: list[tuple[Any, ...]] = []  # ((dev, stream_id), kind, name, s_ms, e_ms, ...)
        self._pending_ops = 0
        self._threads: dict[int, str] = {}
        self._streams: dict[int, Any] = {}  # stream id -> Stream, on the recorded device
        self._ops: dict[Any, tuple[str, OpClass]] = {}
        self._pool = _EVENT_POOL
        self._capturing = 0
        self._meta: dict[str, Any] = {}
        self._timing_note = ""
        self._compiled_calls = 0

    # ------------------------------------------------------------------ the timing source
    def _begin(self) -> None:
        """Check CUDA, take metadata and the bandwidth probe, then start timing (see :meth:`_start_timing`)."""
        self._prepare()
        self._start_timing()

    def _prepare(self) -> None:
        """Check CUDA and take the run's metadata (device, versions, bandwidth probe)."""
        require_cuda()
        import torch

        from collector.recording.probe import device_info, probe_bandwidth

        self._torch = torch
        sourceline.add_skipped_dir(os.path.dirname(torch.__file__))
        self._device = _pick_device(torch)
        with torch.cuda.device(self._device):
            self._meta = device_info(self._device)
            self._meta["bandwidth_probe"] = probe_bandwidth() if self.probe else {}

    def _start_timing(self) -> None:
        """CUDA events: anchor the clock, patch host waits and ranges, enter the dispatch mode."""
        # first: a job that already sends CUDA tensors through gloo is refused before anything is installed; one
        # that makes such a group later is refused as it does
        self._undo.append(watch_gloo_on_cuda(_refuse_gloo_on_cuda))
        torch = self._torch
        from collector.recording.dispatchmode import mode_base
        from collector.recording.probe import event_overhead_ms

        with torch.cuda.device(self._device):
            self._event_overhead_ms = event_overhead_ms() if self.calibrate else 0.0
            torch.cuda.synchronize()
            self._anchor: Any
            self._anchor, self._host0 = take_anchor(torch.cuda.Event, torch.cuda.current_stream(), time.monotonic_ns)
        self._record_ev = torch._C._CudaEventBase.record
        self._elapsed = torch._C._CudaEventBase.elapsed_time
        self._get_stream = torch._C._cuda_getCurrentStream
        self._Tensor = torch.Tensor
        self._undo.append(hostwaits.install(self._on_host_wait))
        self._undo.append(ranges.install(self._on_range, self._on_mark))
        self._undo.append(graphs.install(self))
        self._undo.append(compiled.install(self._on_compiled_call, lambda *_: None))
        recorder = self

        class _Mode(mode_base()):  # type: ignore[misc]
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                return recorder._dispatch(func, args, kwargs or {})

        self._mode = _Mode()
        self._owner = threading.get_ident()
        gc.collect()
        gc.freeze()  # a full collection would otherwise walk torch's million objects: 100+ ms host stalls
        self._mode.__enter__()
        self._mode_in = True

    def _step_ended(self) -> None:
        self._seal()

    def _next_step(self, was_on: bool) -> None:
        if self.every > 1:
            self._set_mode(self._on)
        if self._pending_ops >= RESOLVE_BACKLOG_OPS:
            self._try_resolve()

    def _set_mode(self, on: bool) -> None:
        """Enter or leave the dispatch mode, so unrecorded steps cost nothing (only on the starting thread,
        and only while our mode is the innermost one; otherwise the mode stays and passes ops through)."""
        if on == self._mode_in or threading.get_ident() != self._owner:
            return
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        if on:
            self._mode.__enter__()
            self._mode_in = True
        elif _get_current_dispatch_mode() is self._mode:
            self._mode.__exit__(None, None, None)
            self._mode_in = False

    def _halt(self) -> None:
        """Leave the dispatch mode."""
        try:
            self._set_mode(False)
        finally:
            gc.unfreeze()

    def _end(self, step_open: bool, error: str) -> Trace:
        """Resolve all events and build the Trace."""
        torch = self._torch
        now = time.monotonic_ns()
        has_work = any(r[8] == self._step for r in self._open)
        if step_open and has_work and self._step > 0:  # never marked: steps are found when the trace loads
            self._markers.append(("step", f"step {self._step}", self._step_start, now, self._step))
        self._seal()
        last: Any
        with torch.cuda.device(self._device):
            torch.cuda.synchronize()
            last, host1 = take_anchor(torch.cuda.Event, torch.cuda.current_stream(), time.monotonic_ns)
        self._try_resolve(force=True)
        clock = ClockMap.from_anchors(self._host0, host1, self._elapsed(self._anchor, last))
        meta = RunMeta.new(
            workload=self.workload,
            source=self.source,
            command=self.command,
            error=error,
            notes={
                "timing": "events",
                "timing_note": self._timing_note or EVENTS_NOTE,
                "every": self.every,
                "limits": limits_text(self._compiled_calls),
                "clock_ns_per_gpu_ms": clock.ns_per_ms,
                "event_overhead_ns": round(self._event_overhead_ms * 1e6),
                "recorder_threads": len(self._threads),
            },
            **self._meta,
        )
        return build_trace(
            meta,
            self.rank,
            self._host,
            self._resolved,
            self._markers,
            self._threads,
            self._stream_names,
            clock,
            self._event_overhead_ms,
        )

    # ------------------------------------------------------------------ hooks
    def _on_compiled_call(self, name: str, start_ns: int, end_ns: int) -> None:
        self._compiled_calls += 1

    def _thread(self) -> int:
        tid = threading.get_native_id()
        if tid not in self._threads:
            t = threading.current_thread()
            if t is threading.main_thread():
                label = "main thread"
            elif isinstance(t, threading._DummyThread):  # a thread torch started: autograd's (the mode travels there)
                label = f"autograd thread {tid}"
            else:
                label = f"thread {t.name}"
            self._threads[tid] = label
        return tid

    def _on_host_wait(self, name: str, cause: str, t0: int, t1: int) -> None:
        if self._on:
            src = sourceline.user_source()
            self._host.append(
                (self._thread(), _K.SYNC_WAIT, name, t0, t1, 0, "", False, self._step, src, cause, next(self._ids))
            )

    def _on_range(self, name: str, t0: int, t1: int) -> None:
        if self._on:
            self._host.append(
                (self._thread(), _K.ANNOTATION, name, t0, t1, 0, "", False, self._step, "", "", next(self._ids))
            )

    def _on_mark(self, name: str, t: int) -> None:
        if self._on:
            self._markers.append(("mark", name, t, t, self._step))

    # ------------------------------------------------------------------ hot path
    def _dispatch(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        if not self._on or self._capturing:
            return func(*args, **kwargs)
        info = self._ops.get(func)
        if info is None:
            name = func._schema.name
            info = self._ops[func] = (name, classify_op(name, bool(getattr(func, "is_view", False))))
        name, cls = info
        if cls is _SKIP:
            return func(*args, **kwargs)
        dev = -1
        tensor = self._Tensor
        for a in args:
            if isinstance(a, tensor):
                if a.is_cuda:
                    dev = a.get_device()
                    break
            elif type(a) in (list, tuple):
                for b in a:
                    if isinstance(b, tensor) and b.is_cuda:
                        dev = b.get_device()
                        break
                if dev >= 0:
                    break
        if dev < 0:
            d = kwargs.get("device")
            if d is None or getattr(d, "type", None) != "cuda":
                return func(*args, **kwargs)
            dev = d.index if d.index is not None else self._torch.cuda.current_device()
        if dev != self._device:
            return func(*args, **kwargs)
        if cls is not _KERNEL:
            return self._timed(lambda: func(*args, **kwargs), name, cls, args, kwargs)
        # the common case, inlined: a kernel on the current stream
        sid = self._get_stream(dev)[0]
        stream = self._streams.get(sid)
        if stream is None:
            stream = self._new_stream(sid)
        pool = self._pool
        if len(pool) >= 2:
            ev_s, ev_e = pool.pop(), pool.pop()
        else:
            ev_s, ev_e = self._new_event(), self._new_event()
        record = self._record_ev
        clock = time.monotonic_ns
        record(ev_s, stream)
        t0 = clock()
        try:
            return func(*args, **kwargs)
        finally:
            t1 = clock()
            record(ev_e, stream)
            tid = threading.get_native_id()
            if tid not in self._threads:
                self._thread()
            hid = next(self._ids)
            step = self._step
            self._host.append((tid, _CPU_OP, name, t0, t1, 0, "", False, step, "", "", hid))
            self._open.append((ev_s, ev_e, sid, _KERNEL_KIND, name, 0, "", False, step, hid, next(self._ids)))
            self._pending_ops += 1

    def _new_stream(self, sid: int) -> Any:
        di = self._device
        dt = self._get_stream(di)[2]
        stream = self._streams[sid] = self._torch.cuda.Stream(stream_id=sid, device_index=di, device_type=dt)
        return stream

    def _new_event(self) -> Any:
        return self._torch.cuda.Event(enable_timing=True)

    def _timed(self, call: Any, name: str, cls: OpClass, args: Any = (), kwargs: Any = None) -> Any:
        """Time a copy, memset, sync op or graph replay: like the inlined kernel path, with more facts."""
        kind, nbytes, mem, nb, cause, src = _K.KERNEL, 0, "", False, "", ""
        context = hostwaits.current_cause()
        if cls is OpClass.COPY:
            kind, nbytes, mem, nb, blocks = copy_facts(name, args, kwargs or {}, self._Tensor)
            if blocks:
                cause = context or "blocking_copy"
            if kind is not _K.KERNEL:
                src = sourceline.user_source()
        elif cls is OpClass.SYNC:
            cause = context or syncrules.implicit_sync_cause(name)
            if name == "aten::_local_scalar_dense":
                kind, nbytes, mem = _K.MEMCPY_D2H, args[0].element_size(), MemoryKind.PAGEABLE.value
        elif cls is OpClass.MASKABLE:
            if has_bool_index(args):
                cause = context or "masked_index"
        elif cls is OpClass.MEMSET:
            kind = _K.MEMSET
            if args and isinstance(args[0], self._Tensor):
                nbytes = args[0].numel() * args[0].element_size()
        if cause == syncrules.WHOLE_CALL_CAUSE:
            cause = ""  # inside print(tensor), which is reported whole as one wait
        if cause and not src:
            src = sourceline.user_source()
        sid = self._get_stream(self._device)[0]
        stream = self._streams.get(sid)
        if stream is None:
            stream = self._new_stream(sid)
        pool = self._pool
        ev_s = pool.pop() if pool else self._new_event()
        ev_e = pool.pop() if pool else self._new_event()
        record = self._record_ev
        record(ev_s, stream)
        t0 = time.monotonic_ns()
        try:
            return call()
        finally:
            t1 = time.monotonic_ns()
            record(ev_e, stream)
            hid = next(self._ids)
            step = self._step
            self._host.append(
                (
                    self._thread(),
                    _K.SYNC_WAIT if cause else _CPU_OP,
                    name,
                    t0,
                    t1,
                    nbytes,
                    mem,
                    nb,
                    step,
                    src,
                    cause,
                    hid,
                )
            )
            self._open.append((ev_s, ev_e, sid, kind, name, nbytes, mem, nb, step, hid, next(self._ids)))
            self._pending_ops += 1

    # ------------------------------------------------------------------ resolution
    def _seal(self) -> None:
        if self._open:
            self._sealed.append(self._open)
            self._open = []

    def _try_resolve(self, force: bool = False) -> None:
        elapsed = self._elapsed
        while self._sealed:
            recs = self._sealed[0]
            if not force:
                lasts = {r[2]: r[1] for r in recs}
                if not all(ev.query() for ev in lasts.values()):
                    return
            self._sealed.popleft()
            self._pending_ops -= len(recs)
            fence = recs[0][0]
            base = elapsed(self._anchor, fence)
            out = self._resolved
            pool = self._pool
            dev = self._device
            for ev_s, ev_e, sid, kind, name, nbytes, mem, nb, step, launch, gid in recs:
                s = base + elapsed(fence, ev_s)
                e = base + elapsed(fence, ev_e)
                out.append(((dev, sid), kind, name, s, e, nbytes, mem, nb, step, launch, gid))
                pool.append(ev_s)
                pool.append(ev_e)


def _pick_device(torch: Any) -> int:
    """The device to record: ``LOCAL_RANK`` under a distributed launcher (before the script picks it),
    else the current one."""
    local = os.environ.get("LOCAL_RANK", "")
    if local.isdigit() and int(local) < torch.cuda.device_count():
        return int(local)
    return int(torch.cuda.current_device())


def _refuse_gloo_on_cuda() -> None:
    raise StreamscopeError(
        "--timing events cannot record a job that sends CUDA tensors through gloo (its dispatch mode would break "
        "gloo's worker threads); record it with --timing cupti, the default"
    )


def limits_text(compiled_calls: int) -> str:
    """``notes.limits`` of an events-timed trace: what it does not time, in words."""
    if not compiled_calls:
        return _CAPTURE_LIMIT
    return (
        f"{_CAPTURE_LIMIT}; the kernels of torch.compile'd graphs ({compiled_calls:,} calls) run outside the "
        "dispatcher and are not timed: record with --timing cupti to see them"
    )
