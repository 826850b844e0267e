"""Shared by overhead.py and fidelity.py: the loops they run (the CUPTI reference and the interval
arithmetic live in collector.recording.reference, shared with the GPU tests).

The loops are the built-in demos that cover the regimes where GPU timing is hard or easy: launch-bound
(``tiny-ops``), host-bound (``transformer-small``), GPU-bound (``convnet``, ``transformer-large``) and the
teaching demos (``overlap``, ``sync-trap``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LOOPS = ("tiny-ops", "convnet", "transformer-small", "transformer-large", "overlap", "sync-trap")


def sync() -> None:
    import torch

    getattr(torch.cuda.synchronize, "__wrapped__", torch.cuda.synchronize)()


def loop_steps(name: str) -> Iterator[None]:
    """The demo ``name`` as an iterator: each ``next()`` runs one step."""
    import torch

    from collector.demos import loops

    batch, width, depth = loops.sizes(torch.cuda.get_device_properties(0).total_memory)
    return loops.get(name).loop(loops.DemoContext(batch, width, depth))


def step_fn(it: Iterator[None]) -> Callable[[], None]:
    return lambda: next(it)
