"""Annotations: ``torch.profiler.record_function`` and NVTX ranges become ``annotation`` intervals.

:func:`install` patches ``record_function.__enter__/__exit__`` and ``torch.cuda.nvtx.range_push/range_pop``
(``nvtx.range`` goes through them) and ``nvtx.mark``; each closed range calls
``on_range(name, start_ns, end_ns)`` on the thread that opened it, each mark ``on_mark(name, ns)``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from collector.recording.patches import Patches

OnRange = Callable[[str, int, int], None]
OnMark = Callable[[str, int], None]

_tls = threading.local()


def _stack() -> list[tuple[str, int]]:
    stack = getattr(_tls, "stack", None)
    if stack is None:
        stack = _tls.stack = []
    return stack


def install(on_range: OnRange, on_mark: OnMark) -> Callable[[], None]:
    """Patch record_function and NVTX; return the undo function."""
    import torch.autograd.profiler as profiler
    import torch.cuda.nvtx as nvtx

    clock = time.monotonic_ns
    patches = Patches()
    rf = profiler.record_function
    enter, exit_ = rf.__enter__, rf.__exit__

    def rf_enter(self: Any) -> Any:
        self._streamscope_t0 = clock()
        return enter(self)

    def rf_exit(self: Any, *exc: Any) -> Any:
        try:
            return exit_(self, *exc)
        finally:
            t0 = getattr(self, "_streamscope_t0", None)
            if t0 is not None:
                on_range(str(self.name), t0, clock())

    patches.set(rf, "__enter__", rf_enter)
    patches.set(rf, "__exit__", rf_exit)

    push, pop, mark = nvtx.range_push, nvtx.range_pop, nvtx.mark

    def range_push(msg: str) -> Any:
        _stack().append((str(msg), clock()))
        return push(msg)

    def range_pop() -> Any:
        stack = _stack()
        if stack:
            name, t0 = stack.pop()
            on_range(name, t0, clock())
        return pop()

    def nvtx_mark(msg: str) -> Any:
        on_mark(str(msg), clock())
        return mark(msg)

    patches.set(nvtx, "range_push", range_push)
    patches.set(nvtx, "range_pop", range_pop)
    patches.set(nvtx, "mark", nvtx_mark)
    return patches.undo
