"""torch.compile while recording: when it compiles (set-up), and each call of a compiled graph (a region).

* **Set-up**: Dynamo's compile callbacks (``torch._dynamo.callback.callback_handler``) bracket each
  compilation, a backward compiled on its first call, the recording of CUDA graphs under
  ``mode="reduce-overhead"`` and runtime autotuning where torch reports it; each reports
  ``on_setup(what, start_ns, end_ns)``. That time is the run's set-up, never a step
  (collector.recording.cupti_recorder drops the step marks that hold it).
* **Regions**: each call of an Inductor-compiled graph (``CompiledFxGraph.__call__``) reports
  ``on_region(name, start_ns, end_ns)`` on its thread, ``name`` as :func:`region_name` gives it; the kernels
  it launches outside any ``aten::`` op (Triton's) are named after it (collector.recording.enrich).

Times are ``time.monotonic_ns``. Nothing of torch._dynamo or torch._inductor is imported here: the hooks go
in when the workload imports them (collector.recording.importwatch).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from collector.recording.importwatch import after_import
from collector.recording.patches import Patches

DYNAMO = "torch._dynamo"
REGION_MODULES = ("torch._inductor.output_code", "torch._inductor.codecache")
"""Modules that define ``CompiledFxGraph`` (output_code since torch 2.6, codecache before)."""
SETUP_WHAT = {
    "DYNAMO": "torch.compile: compiling",
    "LAZY_BACKWARD": "torch.compile: compiling the backward",
    "TRITON_AUTOTUNING": "torch.compile: autotuning",
    "CUDAGRAPH_RECORDING": "torch.compile: recording CUDA graphs",
}
"""Compile callback triggers, in words (a trigger not listed is "torch.compile: <trigger>")."""

OnRegion = Callable[[str, int, int], None]
OnSetup = Callable[[str, int, int], None]


def region_name(graph: Any, seen: dict[int, int]) -> str:
    """``torch.compile graph 0 forward`` (Inductor's graph id and direction), or ``torch.compile graph #N``
    by first call when the graph does not say (``seen``: id(graph) -> N)."""
    kwargs = getattr(graph, "fx_kwargs", None) or {}
    gid = kwargs.get("graph_id") if isinstance(kwargs, dict) else None
    if gid is not None:
        return f"torch.compile graph {gid} {'backward' if kwargs.get('is_backward') else 'forward'}"
    return f"torch.compile graph #{seen.setdefault(id(graph), len(seen))}"


def install(on_region: OnRegion, on_setup: OnSetup) -> Callable[[], None]:
    """Hook compile callbacks and compiled graphs' calls as their modules load; return the undo function."""
    undo: list[Callable[[], None]] = []
    patches = Patches()
    seen: dict[int, int] = {}
    clock = time.monotonic_ns

    def hook_callbacks(_module: ModuleType) -> None:
        try:
            from torch._dynamo.callback import callback_handler
        except ImportError:  # a torch without compile callbacks: compilation stays in whatever step it falls
            return
        open_at: list[int] = []

        def start(*args: Any) -> None:
            open_at.append(clock())

        def end(*args: Any) -> None:
            if open_at:
                trigger = getattr(getattr(args[0], "callback_trigger", None), "name", "DYNAMO") if args else "DYNAMO"
                on_setup(SETUP_WHAT.get(trigger, f"torch.compile: {trigger.lower()}"), open_at.pop(), clock())

        callback_handler.register_start_callback(start)
        callback_handler.register_end_callback(end)
        undo.append(lambda: _quietly(callback_handler.remove_start_callback, start))
        undo.append(lambda: _quietly(callback_handler.remove_end_callback, end))

    def hook_graphs(module: ModuleType) -> None:
        cls = getattr(module, "CompiledFxGraph", None)
        if cls is None or "__call__" not in cls.__dict__ or getattr(cls.__call__, "_streamscope", False):
            return
        call = cls.__call__

        def region(graph: Any, *args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            try:
                return call(graph, *args, **kwargs)
            finally:
                on_region(region_name(graph, seen), t0, clock())

        region._streamscope = True  # type: ignore[attr-defined]
        region.__wrapped__ = call  # type: ignore[attr-defined]
        patches.set(cls, "__call__", region)

    undo.append(after_import(DYNAMO, hook_callbacks))
    for name in REGION_MODULES:
        undo.append(after_import(name, hook_graphs))
    undo.append(patches.undo)

    def undo_all() -> None:
        while undo:
            undo.pop()()

    return undo_all


def _quietly(remove: Callable[[Any], None], fn: Any) -> None:
    with contextlib.suppress(ValueError):  # already gone
        remove(fn)
