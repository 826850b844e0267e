"""Values derived from a run's timeline index, built on first use and kept as long as the index is alive."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class PerIndex(Generic[T]):
    """One derived value per index object (a RunIndex), built once under a lock; dropped with the index."""

    def __init__(self) -> None:
        self._values: weakref.WeakKeyDictionary[Any, T] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, index: Any, build: Callable[[], T]) -> T:
        """The value for ``index``; ``build()`` makes it the first time."""
        with self._lock:
            found = self._values.get(index)
            if found is None:
                found = self._values[index] = build()
            return found
