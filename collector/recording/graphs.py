"""CUDA graphs while recording: a replay becomes one ``cuda_graph_replay`` interval; nothing is timed while
a graph is being captured (events recorded inside a capture would become graph nodes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from collector.recording.ops import OpClass
from collector.recording.patches import Patches


def install(rec: Any) -> Callable[[], None]:
    """Patch ``torch.cuda.CUDAGraph`` for recorder ``rec`` (``_capturing``, ``_on``, ``_timed``); return undo."""
    import torch

    graph_cls = torch.cuda.CUDAGraph
    patches = Patches()
    begin, end, replay = graph_cls.capture_begin, graph_cls.capture_end, graph_cls.replay

    def capture_begin(g: Any, *a: Any, **k: Any) -> Any:
        rec._capturing += 1
        return begin(g, *a, **k)

    def capture_end(g: Any, *a: Any, **k: Any) -> Any:
        try:
            return end(g, *a, **k)
        finally:
            rec._capturing -= 1

    def graph_replay(g: Any, *a: Any, **k: Any) -> Any:
        if not rec._on or rec._capturing:
            return replay(g, *a, **k)
        return rec._timed(lambda: replay(g, *a, **k), "cuda_graph_replay", OpClass.KERNEL)

    patches.set(graph_cls, "capture_begin", capture_begin)
    patches.set(graph_cls, "capture_end", capture_end)
    patches.set(graph_cls, "replay", graph_replay)
    return patches.undo
