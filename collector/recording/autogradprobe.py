"""Which thread is torch's autograd worker: found by a one-element backward, for records no Python code tells.

CUPTI knows a host thread by the low 32 bits of its ``pthread_self``; a lane gets its name from the thread's
native id. Python threads, and every thread the op-naming dispatch mode saw run an op, give both; the
autograd worker of a CUDA device (``pt_autograd_0``) runs Python only in hooks. When naming stopped before the
first backward (a gloo group carrying CUDA tensors stops it at once), its launches would sit on a lane called
``thread 3951421120``. A backward of one element on each device the recording saw work on, with a hook that
notes the thread it runs on, names it: the hook runs on that device's worker.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any


def autograd_threads(torch: Any, devices: Iterable[int]) -> dict[int, int]:
    """CUPTI thread id (low 32 bits of ``pthread_self``) -> native thread id of the autograd worker of each of
    ``devices`` (CUDA device indices the recording saw work on: no other device gets a context); {} where CUDA
    is not in use or the backward cannot run (it never raises)."""
    found: dict[int, int] = {}
    try:
        if not torch.cuda.is_initialized():
            return found
        for index in devices:
            found.update(backward_thread(torch, torch.device("cuda", int(index))))
    except Exception:  # noqa: BLE001 - a name for a lane is never worth failing a recording
        return found
    return found


def backward_thread(torch: Any, device: Any) -> dict[int, int]:
    """The thread that runs a backward on ``device``, as {CUPTI thread id: native id}: a CUDA device's
    autograd worker, the calling thread for the CPU."""
    found: dict[int, int] = {}

    def note(grad: Any) -> Any:
        found[threading.get_ident() & 0xFFFFFFFF] = threading.get_native_id()
        return grad

    with torch.inference_mode(False), torch.enable_grad():
        x = torch.zeros(1, device=device, requires_grad=True)
        y = x * 2
        y.register_hook(note)
        y.sum().backward()
    return found
