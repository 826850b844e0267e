"""The lifecycle every recorder shares, whatever times it: start, step boundaries and marks, stop, write.

A timing source is a subclass of :class:`Recorder` that supplies only what differs
(collector.recording.events_recorder: CUDA events around each op; collector.recording.cupti_recorder: CUPTI's
activity records; collector.recording.cpu_recorder: torch.profiler's CPU activity, for ranks without CUDA),
registered by name in collector.recording.sources.TIMING_SOURCES:

* class attributes: ``timing`` (its name, which ``notes.timing`` carries), ``needs_cuda`` (whether it needs a
  CUDA device: the runner checks for one before anything starts only then) and ``summary`` (its words in
  ``--timing``'s help);
* :meth:`Recorder._begin` starts timing; :meth:`Recorder._end` stops it and builds the Trace;
* :meth:`Recorder._now` is the clock step boundaries and marks are read on (the one the source's times are on);
* hooks, which do nothing here: :meth:`Recorder._step_ended` (a recorded step just ended),
  :meth:`Recorder._step_skipped` (a step that ``every`` leaves out just ended), :meth:`Recorder._next_step`
  (after each boundary, with recording on or off for the step that begins) and :meth:`Recorder._halt` (first
  thing at stop, before the patches in ``_undo`` are taken out).

The rest is here: the options (every source takes them all and leaves unused those it has no use for),
:meth:`~Recorder.start` (once), :meth:`~Recorder.step` (every Nth step recorded; with ``auto_steps``, one after
each optimizer step), :meth:`~Recorder.mark`, :meth:`~Recorder.name_stream`, :meth:`~Recorder.stop` (once, with
the error the workload ended with; ``notes.timing``, ``notes.every`` and ``notes.rank`` written where the
source's Trace does not hold them), the write to ``out`` (a printed fallback path when ``out`` cannot be
written) and the context manager. Also here: :func:`require_cuda`, which the GPU sources and the runner call
before anything starts. Make a recorder with :func:`collector.record` (collector.recording.api.record).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TypeVar

from collector.errors import StreamscopeError
from collector.model import NO_STEP, MarkerKind, Trace
from collector.recording.gcpause import paused_gc
from collector.traceformat.deflate import usable_cpus

_R = TypeVar("_R", bound="Recorder")
NO_CUDA_MESSAGE = (
    "no CUDA device: recording GPU work needs an NVIDIA GPU (--timing cpu records host ops and collectives "
    "without one); browsing and analysis work without one"
)


class NoCudaError(StreamscopeError, RuntimeError):
    """Recording was asked for on a machine without a usable CUDA device."""


def require_cuda() -> None:
    """Raise NoCudaError (with NO_CUDA_MESSAGE) unless torch is installed and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        raise NoCudaError(NO_CUDA_MESSAGE) from None
    if not torch.cuda.is_available():
        raise NoCudaError(NO_CUDA_MESSAGE)


class Recorder:
    """A recording session; use :func:`collector.record`. After :meth:`stop`, ``trace`` holds the Trace."""

    timing = ""
    """The timing source, as the trace's ``notes.timing`` names it (its name in
    collector.recording.sources.TIMING_SOURCES)."""
    needs_cuda = True
    """Whether the source needs a CUDA device: where it does, the runner refuses to record without one
    (:func:`require_cuda`), and a rank of a distributed job without CUDA records with the CPU source."""
    summary = ""
    """What the source times, in a few words (``--timing``'s help)."""

    def __init__(
        self,
        workload: str = "",
        out: str | None = None,
        *,
        every: int = 1,
        rank: int | None = None,
        source: str = "recorded",
        command: str | None = None,
        auto_steps: bool = False,
        probe: bool = True,
        calibrate: bool = True,
        stacks: bool = True,
    ) -> None:
        if int(every) < 1:
            raise ValueError(f"every must be a positive number of steps, got {every!r}")
        self.workload = workload
        self.out = out
        self.every = int(every)
        self.rank = int(rank if rank is not None else os.environ.get("RANK", 0) or 0)
        self.source = source
        self.command = command if command is not None else " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]])
        self.auto_steps = auto_steps
        self.probe = probe
        """Take the H2D bandwidth probe (GPU sources)."""
        self.calibrate = calibrate
        """Measure the recorder's own overhead at start and take it out (GPU sources)."""
        self.stacks = stacks
        """Sample the main thread's Python stack (collector.recording.stacks) while recording (CUPTI)."""
        self.trace: Trace | None = None
        self.error = ""
        self._started = False
        self._on = False
        self._step = 0
        self._step_start = 0
        self._markers: list[tuple[str, str, int, int, int]] = []  # (kind, name, start, end, step)
        self._stream_names: dict[tuple[int, int], str] = {}
        self._undo: list[Any] = []
        """Calls that take out what the recorder patched in, made in reverse order at stop."""

    # ------------------------------------------------------------------ what a timing source supplies
    def _begin(self) -> None:
        """Start timing (called once; the step hook and the first step follow)."""
        raise NotImplementedError

    def _end(self, step_open: bool, error: str) -> Trace:
        """Stop timing and build the Trace; ``step_open``: recording was on for the step in progress."""
        raise NotImplementedError

    def _now(self) -> int:
        """Now, in ns on the clock of step boundaries and marks."""
        return time.monotonic_ns()

    def _step_ended(self) -> None:
        """A recorded step has just ended (its marker is taken)."""

    def _step_skipped(self, start: int, end: int) -> None:
        """A step that ``every`` leaves out has just ended: it ran from ``start`` to ``end``."""

    def _next_step(self, was_on: bool) -> None:
        """After a step boundary: ``self._on`` says whether the step that begins is recorded (``was_on``:
        whether the one that ended was)."""

    def _halt(self) -> None:
        """First thing at stop, before the patches in ``_undo`` are taken out: stop taking records."""

    # ------------------------------------------------------------------ the lifecycle
    def __enter__(self: _R) -> _R:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        error = ""
        if exc_type is not None and not (issubclass(exc_type, SystemExit) and exc.code in (0, None)):
            error = f"{exc_type.__name__}: {exc}"
        self.stop(error=error)

    def start(self: _R) -> _R:
        """Start timing (:meth:`_begin`, with Python's garbage collector held off: collector.recording.gcpause),
        then the first step."""
        if self._started:
            raise RuntimeError("this recorder was already started; make a new one with record()")
        with paused_gc():
            self._begin()
        self._started = True
        self._install_step_hook()
        self._step_start = self._now()
        self._on = True
        return self

    def _install_step_hook(self) -> None:
        """With ``auto_steps``, a step boundary after each optimizer step."""
        if self.auto_steps:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            self._undo.append(register_optimizer_step_post_hook(lambda *_: self.step()).remove)

    def step(self) -> None:
        """Mark a step boundary: the step in progress ends now and the next one begins."""
        now = self._now()
        if self._on:
            self._markers.append((MarkerKind.STEP.value, f"step {self._step}", self._step_start, now, self._step))
            self._step_ended()
        elif self._started:
            self._step_skipped(self._step_start, now)
        self._step += 1
        self._step_start = now
        was_on = self._on
        self._on = self._started and self._step % self.every == 0 and self.trace is None
        self._next_step(was_on)

    def mark(self, name: str) -> None:
        """An instant mark on the timeline (shown as a marker)."""
        now = self._now()
        self._markers.append((MarkerKind.MARK.value, str(name), now, now, self._step if self._on else NO_STEP))

    def name_stream(self, stream: Any, label: str) -> None:
        """Label a CUDA stream's lane, e.g. ``rec.name_stream(copy_stream, "prefetch")``."""
        self._stream_names[(int(stream.device_index), int(stream.stream_id))] = str(label)

    def stop(self, error: str = "") -> Trace:
        """Stop timing, build the Trace (:meth:`_end`) and write it to ``out`` (if given). ``error``: how the
        workload ended, when it failed. Stopping again returns the same Trace. The garbage collector is held
        off meanwhile, as at start."""
        if self.trace is not None:
            return self.trace
        if not self._started:
            raise RuntimeError("recorder was never started")
        self.error = error
        step_open, self._on = self._on, False
        with paused_gc():
            try:
                self._halt()
            finally:
                while self._undo:
                    self._undo.pop()()
            self.trace = self._noted(self._end(step_open, error))
            self._write()
        return self.trace

    def _noted(self, trace: Trace) -> Trace:
        """``trace`` with ``notes.timing``, ``notes.every``, ``notes.rank``, ``notes.host_cpus`` (the CPUs the
        recorded process could run on) and ``notes.torch_threads`` (torch's intra-op threads in it, where torch
        is loaded) where the source left them out (added after its own notes; a source's own value, such as a
        fallback's timing, stays)."""
        notes = trace.meta.notes or {}
        ours: dict[str, Any] = {
            "timing": self.timing,
            "every": self.every,
            "rank": self.rank,
            "host_cpus": usable_cpus(),
        }
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "get_num_threads"):
            ours["torch_threads"] = int(torch.get_num_threads())
        missing = {k: v for k, v in ours.items() if k not in notes}
        return trace.with_meta(notes={**notes, **missing}) if missing else trace

    def _write(self) -> None:
        if self.out and self.trace is not None:
            from collector.traceformat.save import save_trace

            self.out = save_trace(self.trace, self.out)  # a fallback path when ``out`` cannot be written
