"""Names for GPU work without Kineto: a dispatch mode that notes every op's name, thread and host span.

While :class:`OpNamer` is on, each ``aten::`` op that can launch GPU work (views and metadata ops are
skipped, collector.recording.ops) leaves a row ``(thread ident, name, start_ns, end_ns)`` on the
monotonic clock; a CUDA launch inside an op's span is that op's. It costs a few microseconds per op, so
the recorder keeps it on for the first step only (collector.recording.client_capture). A program that marks
no step (inference, evaluation, a custom loop) gets the same: naming also ends by itself at the first bound
of :class:`NamingBound` that is reached (time, ops, or the loop's repeat: a run of ops that brought no op not
named before), and the mode then leaves the thread's mode stack at the thread's next Python call. The mode
travels with autograd's thread-local state, so backward ops on autograd's threads are named too;
``threads`` maps each thread's ident (low 32 bits, as CUPTI reports threads) to its native id.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collector.recording.dispatchmode import mode_base
from collector.recording.ops import OpClass, classify_op

NAMING_LIMIT_NS = 2_000_000_000
"""Without a step boundary, ops are named for 2 s at most from the first op named."""
NAMING_MAX_OPS = 20_000
"""...and for the first 20,000 ops at most (about 0.15 s of naming at a few microseconds per op)."""
NAMING_STALE_OPS = 1_000
"""...and stop once this many ops in a row named no op that was not named before: the loop repeats."""

STOPPED_BY = {
    "step": "the first step boundary",
    "time": "the time bound",
    "ops": "the op bound",
    "repeat": "the loop's repeat",
    "stop": "the end of the recording",
    "gloo": "a gloo process group for CUDA tensors was made (naming would break its worker threads)",
}
"""What ended the naming (``OpNamer.stopped_by``), in words."""


@dataclass(frozen=True)
class NamingBound:
    """When naming ends without a step boundary: after ``ns`` nanoseconds, ``ops`` named ops, or
    ``stale_ops`` named ops in a row that were all of kinds named before."""

    ns: int = NAMING_LIMIT_NS
    ops: int = NAMING_MAX_OPS
    stale_ops: int = NAMING_STALE_OPS


class OnEnd:
    """The calls to make once when op naming ends for good (a step boundary or a bound; a pause is not an end),
    on the thread that ended it."""

    def __init__(self) -> None:
        self._calls: list[Callable[[], None]] = []

    def add(self, call: Callable[[], None], ended: bool) -> None:
        """``call()`` now if naming has ``ended`` (or never ran), else when it ends."""
        if ended:
            call()
        else:
            self._calls.append(call)

    def fire(self) -> None:
        calls, self._calls = self._calls, []
        for call in calls:
            call()


class OpNamer:
    """``start()`` on the recording thread, ``stop()`` at the first step boundary (or a bound ends it);
    ``rows`` then holds ``(ident & 0xffffffff, name, start_ns, end_ns)`` per op."""

    def __init__(self, bound: NamingBound | None = None, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.rows: list[tuple[int, str, int, int]] = []
        self.threads: dict[int, int] = {}
        self.on = False
        self.bound = bound or NamingBound()
        self.stopped_by = ""
        """Why naming ended: a key of :data:`STOPPED_BY` ("" while it runs or before it started)."""
        self.started_ns = 0
        self.stopped_ns = 0
        """Clock readings at start and when naming ended (0 before)."""
        self.on_end = OnEnd()
        self._clock = clock
        self._mode: Any = None
        self._owner = 0
        self._names: dict[Any, str] = {}
        self._last_new = 0
        self._unhook: Callable[[], None] | None = None
        self._mode_cls: Any = None
        self._paused = False

    def start(self) -> None:
        rows, names, threads = self.rows, self._names, self.threads
        clock, ident, native = self._clock, threading.get_ident, threading.get_native_id
        namer = self
        bound = self.bound
        limit_ns, max_ops, stale_ops = bound.ns, bound.ops, bound.stale_ops

        class _Mode(mode_base()):  # type: ignore[misc]
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                if not namer.on:
                    namer._leave_soon()
                    return func(*args, **(kwargs or {}))
                t0 = clock()
                out = func(*args, **(kwargs or {}))
                t1 = clock()
                name = names.get(func)
                if name is None:
                    name = names[func] = _launch_name(func)
                    if name:
                        namer._last_new = len(rows) + 1
                if name:
                    tid = ident() & 0xFFFFFFFF
                    if tid not in threads:
                        threads[tid] = native()
                    rows.append((tid, name, t0, t1))
                    n = len(rows)
                    if n == 1:
                        namer.started_ns = t0  # the time bound counts from the first op, not the set-up before it
                    if n >= max_ops or n - namer._last_new >= stale_ops or t1 - namer.started_ns >= limit_ns:
                        namer._bounded(n, t1)
                return out

        self.threads[threading.get_ident() & 0xFFFFFFFF] = threading.get_native_id()
        self._owner = threading.get_ident()
        self._mode_cls = _Mode
        self._mode = _Mode()
        self.started_ns = self._clock()
        self._mode.__enter__()
        self.on = True

    def pause(self) -> None:
        """Stop naming for a while (the recorder's own calibration ops); :meth:`resume` goes on. The mode
        leaves the stack when it can, so the ops meanwhile cost nothing."""
        if self.on:
            self.on, self._paused = False, True
            if threading.get_ident() == self._owner:
                self._leave()

    def resume(self) -> None:
        """Name ops again after :meth:`pause` (nothing after :meth:`stop` or a bound)."""
        if not self._paused:
            return
        self._paused = False
        if self._mode is None and threading.get_ident() == self._owner:
            self._mode = self._mode_cls()
            self._mode.__enter__()
        self.on = self._mode is not None

    def stop(self, reason: str = "step") -> None:
        """Stop naming (``reason``: a key of :data:`STOPPED_BY`); leave the mode when called on its thread while
        it is the innermost mode (otherwise it stays on the mode stack, passing ops straight through, until
        the thread's next Python call or a later ``stop`` can leave it)."""
        if self.on or self._paused:
            self._stopped(reason)
        self._paused = False
        if threading.get_ident() != self._owner:
            return
        if self._unhook is not None:
            self._unhook()
        self._leave()

    def _stopped(self, reason: str) -> None:
        self.on = False
        self.stopped_by = reason
        self.stopped_ns = self._clock()
        self.on_end.fire()

    def _bounded(self, n: int, now: int) -> None:
        """A bound was reached at the ``n``-th named op, at ``now``: stop naming, leave the mode soon."""
        b = self.bound
        self._stopped("ops" if n >= b.ops else "repeat" if n - self._last_new >= b.stale_ops else "time")
        self.stopped_ns = now
        self._leave_soon()

    def _leave(self) -> bool:
        """Leave the mode if it is this thread's innermost one (not while one of its ops is dispatched)."""
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        mode: Any = self._mode
        current: Any = _get_current_dispatch_mode()
        if mode is not None and current is mode:
            self._mode = None
            mode.__exit__(None, None, None)
        return self._mode is None

    def _leave_soon(self) -> None:
        """From inside the mode (it cannot leave the mode stack while one of its ops is dispatched): leave it
        at the owner thread's next Python call, through a one-shot profile function. A thread that already
        has one (a profiler) keeps it, and the mode stays, passing ops through, until :meth:`stop`."""
        if self._mode is None or self._unhook is not None or self._paused or threading.get_ident() != self._owner:
            return
        if sys.getprofile() is not None:
            return

        def unhook() -> None:
            self._unhook = None
            if sys.getprofile() is hook:
                sys.setprofile(None)

        def hook(frame: Any, event: str, arg: Any) -> None:
            if self._leave():
                unhook()

        self._unhook = unhook
        sys.setprofile(hook)


_warm = False


def warm_up() -> None:
    """Pay, once per process, what torch does on a dispatch mode's first op. Call before the capture starts,
    so the recording neither waits for it nor counts it as naming time."""
    global _warm
    if _warm:
        return
    import torch

    class _Pass(mode_base()):  # type: ignore[misc]
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    with _Pass():
        torch.zeros(2).add_(1).sum()
    _warm = True


def naming_note(stopped_by: str, ops: int, ns: int) -> dict[str, Any]:
    """``notes.op_naming`` of a trace: what ended the naming (a key of :data:`STOPPED_BY`), how many ops
    were named and for how long (ms)."""
    return {"stopped_by": stopped_by or "stop", "ops": int(ops), "ms": round(max(ns, 0) / 1e6, 3)}


def naming_sentence(note: dict[str, Any]) -> str:
    """``notes.op_naming`` in words, e.g. "ops named until the loop's repeat (1,412 ops, 9.8 ms)"."""
    why = STOPPED_BY.get(str(note.get("stopped_by", "")), STOPPED_BY["stop"])
    return f"ops named until {why} ({int(note.get('ops', 0)):,} ops, {float(note.get('ms', 0.0)):.1f} ms)"


def _launch_name(func: Any) -> str:
    """``aten::mm`` for an op that can launch GPU work, "" for views and metadata ops."""
    schema = getattr(func, "_schema", None)
    name = str(schema.name) if schema is not None else str(func)
    is_view = bool(getattr(func, "is_view", False))
    return "" if classify_op(name, is_view) is OpClass.SKIP else name
