"""The default recorder: GPU intervals from CUPTI, host facts from a few Python hooks.

CUPTI reports every kernel, memcpy and memset with the device's own start and end times, and every CUDA
runtime call (launches, copies, syncs) with its host times, at about the cost of torch.profiler with only
the CUDA activity. The records are read by our own client (collector.recording.client_capture), or through
torch's Kineto when libcupti cannot be read (collector.recording.kineto_capture). Nothing runs per op in
Python after the first step. What only the recorder adds:

* **causes and lines of waits and copies**: the Python calls that can wait or copy report spans
  (collector.recording.hostspans; indexing by a boolean mask only while ops are named); each runtime wait
  inside one gets its cause and the user's line;
* **op names**: ``aten::`` ops are collected for the first recorded step only (until the first step
  boundary; without one, until the first bound of collector.recording.opnames.NamingBound: time, ops, or
  the loop's repeat), then the launches of later steps are named by their kernel
  (collector.recording.enrich); ``notes.op_naming`` says what ended the naming;
* **steps** (``rec.step()``, optimizer steps), ``record_function`` / NVTX ranges, stream names;
* **torch.compile**: each compiled graph's calls (their Triton kernels are named after them) and the
  time it spends compiling, autotuning or recording CUDA graphs: set-up, never a step
  (collector.recording.compiled; ``notes.setup_windows``);
* **collectives** of torch.distributed: the flight recorder's calls joined to NCCL's kernels and to gloo's
  worker threads, whose waits and copies are marked as the collective's (collector.recording.commjoin).

If CUPTI cannot be had by either reader (another profiler such as Nsight Systems or torch.profiler already
running), :meth:`CuptiRecorder.start` falls back to CUDA-event timing and says so in the trace
(``notes.timing`` / ``notes.timing_note``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from types import FrameType
from typing import Any

from collector.model import RunMeta, Trace
from collector.recording import comm, compiled, gcspans, hostspans, ranges, sourceline
from collector.recording.client_capture import ClientCapture
from collector.recording.clock import ClockLine, clock_pair
from collector.recording.commjoin import join_comm
from collector.recording.cpu_recorder import distributed_env
from collector.recording.enrich import HostFacts, drop_empty_last_step, enrich, without_setup_steps
from collector.recording.events_recorder import EventsRecorder
from collector.recording.heap import steady_heap
from collector.recording.kineto_capture import CaptureUnavailable, KinetoCapture
from collector.recording.opnames import NAMING_LIMIT_NS, naming_note, naming_sentence
from collector.recording.probe import tiny_op_ns
from collector.recording.stacks import StackSampler
from collector.recording.threadnames import live_thread_labels

STOP_SLACK_NS = 1_000_000_000
"""How far past its wait for the GPU the recorder's own stop window reaches (nothing of the workload runs then)."""
PROBE_MIN_BYTES = 1 << 20
"""The H2D bandwidth probe runs when the recording stops, and only if the trace holds a host-to-device copy
this large: the analysis compares copies of 1 MiB or more with it (a fixed cost of ~0.1 s a short script
without such copies does not pay)."""
_PLAIN_OP_NS: dict[int, float] = {}
"""Per device, the tiny op's host time (ns) measured while no capture had attached CUPTI to this process: once
attached, CUPTI leaves every launch slower even after its capture stops (0.9 of 1.6 us on an H100), so a plain
timing taken then would understate the next recording's own cost. Our own reader detaches CUPTI at stop
(collector.recording.client_capture.may_detach); after that the next recording times the op anew."""
_CAPTURED = False
"""Whether CUPTI is attached to this process by a capture that started in it."""

SETUP_NOTED = 100
"""torch.compile set-up windows listed in ``notes.setup_windows`` (what, start_ns, end_ns) at most."""
READERS: dict[str, type[ClientCapture] | type[KinetoCapture]] = {"client": ClientCapture, "kineto": KinetoCapture}
"""Our own CUPTI client (collector.recording.client_capture), then torch.profiler's Kineto."""
CUPTI_NOTE = (
    "GPU intervals from CUPTI activity records (exact device times); op names recorded in the first step, "
    "later steps' GPU work named by its kernel"
)


class CuptiRecorder(EventsRecorder):
    """An :class:`EventsRecorder` timed by CUPTI (by CUDA events where CUPTI is taken); use
    :func:`collector.record` (``timing="cupti"``). Uses the base's ``probe`` (at stop, where copies need it),
    ``calibrate`` and ``stacks``."""

    timing = "cupti"
    summary = "exact device times from CUPTI, the default; falls back to events when CUPTI is taken"

    READERS: tuple[str, ...] = ("client", "kineto")
    """Ways to read CUPTI, tried in order (see :data:`READERS`); the first that starts is used."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sampler: StackSampler | None = None
        self._gc = gcspans.GcSpans()
        self._call_ns = 0.0
        """The recorder's own host cost per CUDA call (ns), measured at start when ``calibrate``."""
        self._probe_at_stop, self.probe = self.probe, False  # the bandwidth probe: at stop, if copies need it
        self._capture: ClientCapture | KinetoCapture | None = None
        self._spans: list[tuple[int, str, int, int, str, int]] = []
        self._annotations: list[tuple[int, str, int, int]] = []
        self._clock0 = (0, 0)
        self._halted_at = 0
        self._samples: list[tuple[int, int, str]] = []
        self._tags: list[tuple[int, int, str]] = []
        self._own: list[tuple[int, int]] = []
        """Monotonic ns windows of host work that is not the workload's: the recorder's own calls and the
        steps ``every`` skips (their rows, and the GPU work they launched, are dropped at stop)."""
        self._tag: Any = None
        self._regions: list[tuple[int, str, int, int]] = []
        self._setup: list[tuple[str, int, int]] = []
        """torch.compile's calls of compiled graphs (tid, name, t0, t1) and its set-up (what, t0, t1)."""
        self.timing = "cupti"
        """``"cupti"``, or ``"events"`` after a fallback at start."""
        self.reader = ""
        """Who read CUPTI's records: ``"client"`` (our own, the default) or ``"kineto"`` (torch.profiler's)."""
        self.stop_timings: dict[str, float] = {}
        """Seconds per phase of :meth:`stop` (flush, read, tabulate, importer, probe where taken, join of the
        host facts, comm: reading and joining collectives, write)."""
        self.start_timings: dict[str, float] = {}
        """Seconds of :meth:`start`'s fixed costs: starting the capture (our own reader says how much of it went
        to the op namer's warm-up and to starting CUPTI), and calibrating where it does."""

    def _start_timing(self) -> None:
        global _CAPTURED
        comm.enable()  # the flight recorder, for the process groups the workload makes from now on
        plain_ns = 0.0
        t_start = time.perf_counter()
        if self.calibrate:
            plain_ns = self._plain_op_ns()
        t_capture = time.perf_counter()
        capture: ClientCapture | KinetoCapture | None = None
        refusals = []
        for reader in self.READERS:
            try:
                capture = READERS[reader]()
                capture.start(naming=True)
            except CaptureUnavailable as exc:
                refusals.append(str(exc))
                capture = None
                continue
            self.reader = reader
            break
        if capture is None:
            self._timing_note = f"CUPTI unavailable ({'; '.join(dict.fromkeys(refusals))}); fell back to CUDA events"
            print(f"streamscope: {self._timing_note}", file=sys.stderr, flush=True)
            self.timing = "events"
            self._probe_now()
            super()._start_timing()
            return
        _CAPTURED = True
        self._capture = capture
        self._clock0 = clock_pair()
        self.start_timings["capture"] = time.perf_counter() - t_capture
        self.start_timings.update(getattr(capture, "start_timings", {}))  # the parts of it, where the reader says
        if self.calibrate:  # the same tiny ops, recorded (their rows are dropped at stop)
            capture.set_naming(False, "pause")
            t0 = time.monotonic_ns()
            self._call_ns = self._call_cost_ns(plain_ns)
            self._own.append((t0, time.monotonic_ns()))
            capture.set_naming(True)
            self.start_timings["calibrate"] = t_capture - t_start + (time.monotonic_ns() - t0) / 1e9
        if self.stacks:  # after the calibration: a cost per launch, where the sampler's is a cost per second
            self._sampler = StackSampler().start()
        self._undo.append(self._gc.install())
        self._undo.append(hostspans.install(self._on_span))
        unmask = hostspans.install_masked(self._on_span)  # only while ops are named (hostspans' module doc)
        self._undo.append(unmask)
        capture.when_naming_ends(unmask)
        self._undo.append(ranges.install(self._on_annotation, self._on_mark))
        self._undo.append(compiled.install(self._on_region, self._on_setup))
        self._t_start = time.monotonic_ns()

    def _call_cost_ns(self, plain_ns: float) -> float:
        """The recorder's own host cost per CUDA call (ns): the tiny op timed now, recorded, less its plain time.
        Recording cannot make a call cheaper, so a difference of 0 or less is a timing the host interrupted (or
        a plain one it sped up): timed once more, and 0 (nothing taken out; the analysis says so) if again."""
        with self._torch.cuda.device(self._device):
            for _ in range(2):
                cost = tiny_op_ns() - plain_ns
                if cost > 0:
                    return cost
        return 0.0

    def _plain_op_ns(self) -> float:
        """The tiny op's host time unrecorded (ns): measured now, and kept for the process's later recordings
        if no capture has started in it yet (:data:`_PLAIN_OP_NS`)."""
        kept = _PLAIN_OP_NS.get(self._device)
        if kept is not None:
            return kept
        with self._torch.cuda.device(self._device):
            plain_ns = tiny_op_ns()
        if not _CAPTURED:
            _PLAIN_OP_NS[self._device] = plain_ns
        return plain_ns

    # ------------------------------------------------------------------ hooks
    def name_stream(self, stream: Any, label: str) -> None:
        """Label a CUDA stream's lane. CUPTI numbers streams its own way, so the stream is tagged with a
        4-byte device-to-device copy (a copy keeps a transfer stream's role), found by its launch time."""
        super().name_stream(stream, label)
        if self._capture is None:
            return
        t0 = time.monotonic_ns()
        if self._tag is None:  # made on first use, inside the recorder's own window (no kernel: its bytes are any)
            self._tag = [self._torch.empty(1, device=f"cuda:{self._device}") for _ in range(2)]
        with self._torch.cuda.stream(stream):
            self._tag[1].copy_(self._tag[0])
        self._tags.append((t0, time.monotonic_ns(), str(label)))
        self._own.append(self._tags[-1][:2])

    def _step_ended(self) -> None:
        if self._capture is None:
            return super()._step_ended()
        self._capture.set_naming(False)
        return None

    def _step_skipped(self, start: int, end: int) -> None:
        if self._capture is not None:
            self._own.append((start, end))  # a step ``every`` skips

    def _next_step(self, was_on: bool) -> None:
        if self._capture is None:
            super()._next_step(was_on)

    def _on_span(self, cause: str, t0: int, t1: int, frame: FrameType, nbytes: int) -> None:
        if self._on:
            self._spans.append((threading.get_native_id(), cause, t0, t1, sourceline.user_source(frame), nbytes))
            if self._capture is not None:
                self._capture.note_thread()
            self._check_naming(t1)

    def _on_annotation(self, name: str, t0: int, t1: int) -> None:
        if self._on:
            self._annotations.append((threading.get_native_id(), name, t0, t1))
            self._check_naming(t1)

    def _probe_now(self) -> None:
        """Take the H2D bandwidth probe (``probe=True``) into the run's metadata, on the recorded device."""
        if self._probe_at_stop:
            from collector.recording.probe import probe_bandwidth

            with self._torch.cuda.device(self._device):
                self._meta["bandwidth_probe"] = probe_bandwidth()

    def _on_region(self, name: str, t0: int, t1: int) -> None:
        if self._on:
            self._regions.append((threading.get_native_id(), name, t0, t1))

    def _on_setup(self, what: str, t0: int, t1: int) -> None:
        self._setup.append((what, t0, t1))

    def _check_naming(self, now: int) -> None:
        capture = self._capture
        if capture is not None and capture.naming and now - self._t_start > NAMING_LIMIT_NS:
            capture.set_naming(False, "time")

    # ------------------------------------------------------------------ stop
    def stop(self, error: str = "") -> Trace:
        """Stop the capture, join the host facts to it, build the Trace and write it to ``out``; meanwhile freed
        memory is kept for the next array (collector.recording.heap)."""
        with steady_heap() if self._capture is not None and self.trace is None else contextlib.nullcontext():
            return super().stop(error=error)

    def _halt(self) -> None:
        if self._capture is None:
            return super()._halt()
        self._halted_at = time.monotonic_ns()
        self._capture.stop_api_records()  # the calls below are ours: no rows to drop (a copy of every column)
        self._samples = self._sampler.stop() if self._sampler is not None else []
        return None

    def _end(self, step_open: bool, error: str) -> Trace:
        if self._capture is None:
            return super()._end(step_open, error)
        torch = self._torch
        now = self._halted_at
        if not step_open and self._step > 0:
            self._own.append((self._step_start, now))  # stopped inside a skipped step
        step_open = step_open and self._step > 0  # never marked: the steps are found when the trace loads
        if step_open:
            self._markers.append(("step", f"step {self._step}", self._step_start, now, self._step))
        with torch.cuda.device(self._device):
            torch.cuda.synchronize()
        # from here on the host runs only the recorder (its wait for the GPU, the capture's stop); the window
        # reaches past the stop, so a runtime record a few microseconds off the mapped clock still falls in it
        self._own.append((now, time.monotonic_ns() + STOP_SLACK_NS))
        capture, self._capture = self._capture, None
        return self._finish(capture, step_open, error, self._samples)

    def _finish(
        self, capture: ClientCapture | KinetoCapture, step_open: bool, error: str, samples: list[tuple[int, int, str]]
    ) -> Trace:
        """Read the stopped capture, join the host facts and build the Trace."""
        global _CAPTURED
        timings = self.stop_timings
        _progress("stopping the capture and reading its records")
        table = capture.stop(timings)
        detached = bool(getattr(capture, "detached", False))  # our own reader says; the Kineto reader has no say
        if detached:  # launches run at their unrecorded speed again
            _CAPTURED = False
            _PLAIN_OP_NS.clear()
        _progress(f"{len(table.events):,} records read; building the trace")
        t0 = time.perf_counter()
        table.top["distributedInfo"] = {"rank": self.rank, "world_size": distributed_env()[1]}
        clock1 = clock_pair()
        from collector.importers.graphs import mark_graph_replays
        from collector.importers.kineto import trace_from_kineto

        stopped_by, named_ns = capture.naming_summary()
        named_ops = int((table.events["cat"] == "cpu_op").sum())
        raw = mark_graph_replays(trace_from_kineto(table, source_name=self.workload, by_start=True))
        t1 = time.perf_counter()
        if self._probe_at_stop and _large_h2d_copy(raw):
            self._probe_now()
            timings["probe"] = time.perf_counter() - t1
        t_join = time.perf_counter()
        to_trace = ClockLine(self._clock0, clock1)
        sampled = int(threading.main_thread().native_id or 0)
        own = (self._sampler.native_id,) if self._sampler is not None else ()  # the recorder's sampling thread
        collections = gcspans.moved(self._gc.spans, sampled, own)
        facts = HostFacts(
            spans=[(t, c, to_trace(a), to_trace(b), s, n) for t, c, a, b, s, n in self._spans],
            annotations=[
                (t, n, to_trace(a), to_trace(b))
                for t, n, a, b in [*self._annotations, *gcspans.as_annotations(collections)]
            ],
            markers=[(k, n, to_trace(a), to_trace(b), st) for k, n, a, b, st in self._markers],
            threads=live_thread_labels(),
            stream_names=self._stream_names,
            stream_tags=[(to_trace(a), to_trace(b), lb) for a, b, lb in self._tags],
            dropped=[(to_trace(a), to_trace(b)) for a, b in self._own],
            samples=[
                (to_trace(a), to_trace(b), st) for a, b, st in gcspans.split_samples(samples, collections, sampled)
            ],
            sampled_thread=sampled,
            regions=[(t, n, to_trace(a), to_trace(b)) for t, n, a, b in self._regions],
        )
        setup = [(w, to_trace(a), to_trace(b)) for w, a, b in self._setup]
        meta = RunMeta.new(
            workload=self.workload,
            source=self.source,
            command=self.command,
            error=error,
            clock="unix_ns",
            notes={
                "timing": "cupti",
                "timing_note": "; ".join(x for x in (CUPTI_NOTE, getattr(capture, "losses", "")) if x),
                "cupti_reader": self.reader,
                "cupti_detached": detached,
                "every": self.every,
                "rank": self.rank,
                "op_naming": naming_note(stopped_by, named_ops, named_ns),
                **({"setup_windows": [[w, a, b] for w, a, b in setup[:SETUP_NOTED]]} if setup else {}),
                **({"recorder_call_ns": round(self._call_ns)} if self.calibrate else {}),
                **({"stack_samples": self._sampler.samples} if self._sampler is not None else {}),
            },
            **self._meta,
        )
        trace = _with_naming_sentence(enrich(raw, facts, meta))
        t_comm = time.perf_counter()
        calls = comm.calls(self._clock0[1], clock1[1])
        trace = join_comm(trace, calls, capture.python_threads(), comm.default_backend())
        t_steps = time.perf_counter()
        trace = drop_empty_last_step(trace, self._step) if step_open else trace
        trace = without_setup_steps(trace, [(a, b) for _, a, b in setup])
        t_end = time.perf_counter()
        timings.update(importer=t1 - t0, join=t_comm - t_join + t_end - t_steps, comm=t_steps - t_comm)
        return trace

    def _write(self) -> None:
        if self.timing != "cupti" or self.trace is None:
            return super()._write()
        t0 = time.perf_counter()
        if self.out:
            _progress(f"writing {len(self.trace.intervals):,} intervals to {self.out}")
        super()._write()
        self.stop_timings["write"] = time.perf_counter() - t0
        return None


def _large_h2d_copy(trace: Trace) -> bool:
    """The trace holds a host-to-device copy of PROBE_MIN_BYTES or more (the probe's bandwidth is compared
    with those)."""
    iv = trace.intervals
    return bool(((iv["kind"] == "memcpy_h2d").to_numpy(bool) & (iv["bytes"].to_numpy() >= PROBE_MIN_BYTES)).any())


def _with_naming_sentence(trace: Trace) -> Trace:
    """``notes.op_names`` (how GPU work was named) followed by what ended the naming, in words."""
    notes = dict(trace.meta.notes)
    note = notes.get("op_naming")
    if isinstance(note, dict) and notes.get("op_names"):
        notes["op_names"] = f"{notes['op_names']}; {naming_sentence(note)}"
    return trace.with_meta(notes=notes)


def _progress(message: str) -> None:
    """A progress line on stderr while stopping, only when stderr is a terminal (quiet in pipes and CI logs)."""
    if sys.stderr.isatty():
        print(f"streamscope: {message}", file=sys.stderr, flush=True)
