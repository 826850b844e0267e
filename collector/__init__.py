"""Streamscope collector: everything that produces a trace (recording, demos, importers, the file format).

Importing this package never imports torch; :func:`record` loads the recorder on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "record"]


def __getattr__(name: str) -> Any:
    if name == "record":
        from collector.recording.api import record

        return record
    raise AttributeError(f"module 'collector' has no attribute {name!r}")
