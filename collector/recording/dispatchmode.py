"""A ``TorchDispatchMode`` base for the recorder's modes that does not import ``torch._dynamo`` until Dynamo
is in use.

torch wraps a mode's ``__torch_dispatch__`` in ``torch._disable_dynamo`` (so ``torch.compile`` does not
trace into the mode), and that wrapper imports ``torch._dynamo`` on its first call: sympy and the rest,
1 s on a warm host and 8 s where torch's bytecode is not cached, paid at the recorder's start by every
workload that has not imported Dynamo itself (a training loop has: an optimizer's constructor imports it).
Modes made from :func:`mode_base` skip the wrapper while ``torch._dynamo`` is not imported and get it, as
torch would have given it, the moment it is: an import hook wraps them when its module has run, before any
``torch.compile`` can call them (collector.recording.importwatch). Where torch does not wrap modes (before
``_should_skip_dynamo``), neither does this.

The modes also tell torch.compile to ignore them (``ignore_compile_internals``): it compiles as it would
unrecorded, with the mode off while it compiles and on while the compiled code runs.
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any

from collector.recording.importwatch import after_import

DYNAMO = "torch._dynamo"
_lock = threading.Lock()
_pending: weakref.WeakSet[type] = weakref.WeakSet()
_base: type | None = None


def mode_base() -> type:
    """The base class (a ``TorchDispatchMode`` subclass) to derive the recorder's dispatch modes from."""
    global _base
    if _base is None:
        from torch.utils._python_dispatch import TorchDispatchMode

        wraps = hasattr(TorchDispatchMode, "_should_skip_dynamo")

        class QuietMode(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                return DYNAMO in sys.modules

            @classmethod
            def ignore_compile_internals(cls) -> bool:
                # torch.compile runs eagerly under any mode that does not say this (and keeps that frame eager
                # for good): recording would measure a compiled model as an eager one
                return True

            def __init_subclass__(cls, **kwargs: Any) -> None:
                super().__init_subclass__(**kwargs)  # torch's: wraps now if Dynamo is loaded
                if wraps and DYNAMO not in sys.modules and "__torch_dispatch__" in cls.__dict__:
                    _wrap_when_dynamo_loads(cls)

        _base = QuietMode
    return _base


def _wrap_when_dynamo_loads(cls: type) -> None:
    with _lock:
        _pending.add(cls)
    after_import(DYNAMO, _on_dynamo)


def _on_dynamo(_module: Any) -> None:
    _wrap_pending()


def _wrap_pending() -> None:
    """Give every pending mode torch's wrapper (as ``TorchDispatchMode.__init_subclass__`` does)."""
    import torch

    with _lock:
        classes = list(_pending)
        _pending.clear()
    for cls in classes:
        raw = cls.__dict__.get("__torch_dispatch__")
        if raw is not None and not isinstance(raw, classmethod):
            cls.__torch_dispatch__ = torch._disable_dynamo(raw, recursive=True)  # type: ignore[attr-defined]
