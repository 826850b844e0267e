"""A ``TorchDispatchMode`` base for the recorder's modes that does not import ``torch._dynamo`` until Dynamo
is in use.

torch wraps a mode's ``__torch_dispatch__`` in ``torch._disable_dynamo`` (so ``torch.compile`` does not
trace into the mode), and that wrapper imports ``torch._dynamo`` on its first call: sympy and the rest,
1 s on a warm host and 8 s where torch's bytecode is not cached, paid at the recorder's start by every
workload that has not imported Dynamo itself (a training loop has: an optimizer's constructor imports it).
Modes made from :func:`mode_base` skip the wrapper while ``torch._dynamo`` is not imported and get it, as
torch would have given it, the moment it is: an import hook wraps them when its module has run, before any
``torch.compile`` can call them. Where torch does not wrap modes (before ``_should_skip_dynamo``), neither
does this.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
import weakref
from types import ModuleType
from typing import Any

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

            def __init_subclass__(cls, **kwargs: Any) -> None:
                super().__init_subclass__(**kwargs)  # torch's: wraps now if Dynamo is loaded
                if wraps and DYNAMO not in sys.modules and "__torch_dispatch__" in cls.__dict__:
                    _wrap_when_dynamo_loads(cls)

        _base = QuietMode
    return _base


def _wrap_when_dynamo_loads(cls: type) -> None:
    with _lock:
        _pending.add(cls)
        if not any(isinstance(f, _DynamoWatch) for f in sys.meta_path):
            sys.meta_path.insert(0, _DynamoWatch())
    if DYNAMO in sys.modules:  # loaded by another thread meanwhile
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


class _DynamoWatch(importlib.abc.MetaPathFinder):
    """Finds nothing itself; when ``torch._dynamo`` is imported, its loader is wrapped so that the pending
    modes are wrapped once the module has run. Leaves ``sys.meta_path`` when it has fired."""

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> Any:
        if fullname != DYNAMO:
            return None
        with _lock:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
        for finder in list(sys.meta_path):  # the finders after this one, as the import system asks them
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _ThenWrap(spec.loader)
                return spec
        return None


class _ThenWrap(importlib.abc.Loader):
    """A loader that runs the original one, then wraps the pending modes; anything else it is asked is
    the original loader's (its source, its resource reader)."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _wrap_pending()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
