"""Names for GPU work without Kineto: a dispatch mode that notes every op's name, thread and host span.

While :class:`OpNamer` is on, each ``aten::`` op that can launch GPU work (views and metadata ops are
skipped, collector.recording.ops) leaves a row ``(thread ident, name, start_ns, end_ns)`` on the
monotonic clock; a CUDA launch inside an op's span is that op's. It costs a few microseconds per op, so
the recorder keeps it on for the first step only (collector.recording.client_capture). The mode travels
with autograd's thread-local state, so backward ops on autograd's threads are named too;
``threads`` maps each thread's ident (low 32 bits, as CUPTI reports threads) to its native id.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from collector.recording.dispatchmode import mode_base
from collector.recording.ops import OpClass, classify_op


class OpNamer:
    """``start()`` on the recording thread, ``stop()`` at the first step boundary; ``rows`` then holds
    ``(ident & 0xffffffff, name, start_ns, end_ns)`` per op."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, str, int, int]] = []
        self.threads: dict[int, int] = {}
        self.on = False
        self._mode: Any = None
        self._owner = 0
        self._names: dict[Any, str] = {}

    def start(self) -> None:
        rows, names, threads = self.rows, self._names, self.threads
        clock, ident, native = time.monotonic_ns, threading.get_ident, threading.get_native_id
        namer = self

        class _Mode(mode_base()):  # type: ignore[misc]
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                if not namer.on:
                    return func(*args, **(kwargs or {}))
                t0 = clock()
                out = func(*args, **(kwargs or {}))
                t1 = clock()
                name = names.get(func)
                if name is None:
                    name = names[func] = _launch_name(func)
                if name:
                    tid = ident() & 0xFFFFFFFF
                    if tid not in threads:
                        threads[tid] = native()
                    rows.append((tid, name, t0, t1))
                return out

        self.threads[threading.get_ident() & 0xFFFFFFFF] = threading.get_native_id()
        self._owner = threading.get_ident()
        self._mode = _Mode()
        self._mode.__enter__()
        self.on = True

    def stop(self) -> None:
        """Stop naming; leave the mode when called on its thread while it is the innermost mode (otherwise
        it stays on the mode stack, passing ops straight through, until a later ``stop`` can leave it)."""
        self.on = False
        if threading.get_ident() != self._owner:
            return
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        mode: Any = self._mode
        current: Any = _get_current_dispatch_mode()
        if mode is not None and current is mode:
            self._mode = None
            mode.__exit__(None, None, None)


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


def _launch_name(func: Any) -> str:
    """``aten::mm`` for an op that can launch GPU work, "" for views and metadata ops."""
    schema = getattr(func, "_schema", None)
    name = str(schema.name) if schema is not None else str(func)
    is_view = bool(getattr(func, "is_view", False))
    return "" if classify_op(name, is_view) is OpClass.SKIP else name
