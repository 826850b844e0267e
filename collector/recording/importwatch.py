"""Run a function once a module has been imported, without importing it: :func:`after_import`.

The recorder must not import torch._dynamo or torch._inductor itself (seconds of imports a workload may
never need), yet must hook into them the moment a workload does (``torch.compile``). A finder on
``sys.meta_path`` finds nothing itself; when the watched module is imported, it wraps the module's loader so
that the pending functions run right after the module's code has run, then leaves ``sys.meta_path``.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

_lock = threading.Lock()
_pending: dict[str, list[Callable[[ModuleType], None]]] = {}


def after_import(name: str, fn: Callable[[ModuleType], None]) -> Callable[[], None]:
    """Call ``fn(module)`` once module ``name`` is imported (at once if it is already; once, however often
    it is asked for before); returns a function that cancels the call if it has not run yet."""
    module = sys.modules.get(name)
    if module is not None:
        fn(module)
        return lambda: None
    with _lock:
        waiting = _pending.setdefault(name, [])
        if fn not in waiting:
            waiting.append(fn)
        if not any(isinstance(f, _ImportWatch) for f in sys.meta_path):
            sys.meta_path.insert(0, _ImportWatch())
    if name in sys.modules:  # imported by another thread meanwhile
        _fire(name)

    def cancel() -> None:
        with _lock:
            waiting = _pending.get(name, [])
            if fn in waiting:
                waiting.remove(fn)
            _retire_if_idle()

    return cancel


def _retire_if_idle() -> None:
    """Leave ``sys.meta_path`` when nothing is pending (called with the lock held)."""
    for key in [k for k, v in _pending.items() if not v]:
        del _pending[key]
    if not _pending:
        for finder in [f for f in sys.meta_path if isinstance(f, _ImportWatch)]:
            sys.meta_path.remove(finder)


def _fire(name: str) -> None:
    with _lock:
        waiting = _pending.pop(name, [])
        _retire_if_idle()
    module = sys.modules.get(name)
    if module is not None:
        for fn in waiting:
            fn(module)


class _ImportWatch(importlib.abc.MetaPathFinder):
    """Finds nothing itself; for a watched module, wraps the loader the other finders give it."""

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> Any:
        if fullname not in _pending:
            return None
        for finder in list(sys.meta_path):  # the finders after this one, as the import system asks them
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _ThenFire(spec.loader, fullname)
                return spec
        return None


class _ThenFire(importlib.abc.Loader):
    """A loader that runs the original one, then the functions waiting for the module; anything else it is
    asked is the original loader's (its source, its resource reader)."""

    def __init__(self, loader: Any, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: Any) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _fire(self._name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
