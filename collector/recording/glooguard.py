"""Op naming must end before gloo moves CUDA tensors: :func:`watch_gloo_on_cuda`.

A gloo process group runs each collective on a worker thread under the thread-local state captured when the
collective was issued. With CUDA tensors that worker runs aten ops of its own (the copies to and from host
memory), and under a captured Python dispatch mode torch fails them with an internal assert
(``dispatch_on_subclass called with NO overloaded args``): DDP's constructor, its gradient all-reduces and
every later collective of the job fail. So the op namer (collector.recording.opnames) stops as soon as such a
group exists: at once when one does when recording starts, else right after ``init_process_group`` or
``new_group`` makes one. GPU work is then named by its kernels. NCCL groups, and gloo groups on CPU tensors,
keep naming.

Nothing of torch.distributed is imported here: the hook goes in when the workload imports it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from collector.recording.importwatch import after_import
from collector.recording.patches import Patches

DIST = "torch.distributed"
GROUP_MAKERS = ("init_process_group", "new_group")


def gloo_on_cuda(dist: ModuleType) -> bool:
    """Whether a process group of this process sends CUDA tensors through gloo, on a machine with CUDA: the
    default group's backend is ``gloo`` (every device), or a group names ``cuda:gloo``. A ``new_group`` of
    backend ``gloo`` beside another default is taken for CPU tensors."""
    try:
        if not dist.is_available() or not dist.is_initialized():
            return False
        import torch

        if not torch.cuda.is_available():
            return False
        world = getattr(getattr(dist, "distributed_c10d", None), "_world", None)
        groups: list[Any] = list(getattr(world, "pg_map", None) or {}) or [None]
    except Exception:  # noqa: BLE001 - a torch without these internals: assume nothing
        return False
    for group in groups:
        try:
            backend = str(dist.get_backend(group))
            default = group is None or group is getattr(dist.distributed_c10d, "_get_default_group", lambda: None)()
        except Exception:  # noqa: BLE001 - a group this rank is not in
            continue
        # a job's gloo side group beside an NCCL default (barriers, objects, checkpoints) carries CPU tensors
        if "cuda:gloo" in backend or (default and backend == "gloo"):
            return True
    return False


def watch_gloo_on_cuda(on_found: Callable[[], None]) -> Callable[[], None]:
    """Call ``on_found()`` once a process group moves CUDA tensors through gloo (at once if one does, else when
    ``init_process_group`` or ``new_group`` makes one); returns the function that undoes the watch."""
    patches = Patches()
    fired = [False]

    def check(dist: ModuleType) -> None:
        if not fired[0] and gloo_on_cuda(dist):
            fired[0] = True
            on_found()

    def hook(dist: ModuleType) -> None:
        check(dist)
        if fired[0]:
            return
        c10d = getattr(dist, "distributed_c10d", None)
        for owner in (dist, c10d):
            for name in GROUP_MAKERS:
                fn = getattr(owner, name, None) if owner is not None else None
                if fn is None or getattr(fn, "_streamscope", False):
                    continue
                patches.set(owner, name, _checked(fn, lambda: check(dist)))

    cancel = after_import(DIST, hook)

    def undo() -> None:
        cancel()
        patches.undo()

    return undo


def _checked(fn: Callable[..., Any], check: Callable[[], None]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        check()
        return out

    wrapped._streamscope = True  # type: ignore[attr-defined]
    return wrapped
