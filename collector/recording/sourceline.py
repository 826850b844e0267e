"""Find the user's source line: the first Python frame outside torch, streamscope and the standard library.

The built-in demo loops (collector/demos/loops.py) count as user code.

Used to tag sync waits and copies with ``source`` = ``"path/to/file.py:LINE"``; paths under the current
working directory are made relative to it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType

_COLLECTOR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the collector package root
_STDLIB_DIRS = tuple(
    os.path.normcase(os.path.abspath(p)) + os.sep
    for p in {sysconfig.get_paths().get("stdlib", ""), sysconfig.get_paths().get("platstdlib", "")}
    if p
)
_skip_dirs: tuple[str, ...] = (_COLLECTOR_DIR + os.sep,)
_USER_FILES = frozenset({os.path.normcase(os.path.join(_COLLECTOR_DIR, "demos", "loops.py"))})
"""Files inside skipped folders that are user code all the same (the built-in demo loops)."""
_cache: dict[str, bool] = {}
_formatted: dict[tuple[str, int], str] = {}
"""``file:line`` per (filename, line) seen, relative to the working directory of the first sighting."""


def add_skipped_dir(path: str) -> None:
    """Treat frames under ``path`` as library code (torch's folder is added when the recorder starts)."""
    global _skip_dirs
    path = os.path.abspath(path) + os.sep
    if path not in _skip_dirs:
        _skip_dirs = (*_skip_dirs, path)
        _cache.clear()
    _formatted.clear()


def _is_library(filename: str) -> bool:
    hit = _cache.get(filename)
    if hit is None:
        if filename.startswith("<"):
            hit = True  # <frozen runpy>, <string> from exec of library helpers
        else:
            norm = os.path.normcase(os.path.abspath(filename))
            site = "site-packages" in norm or "dist-packages" in norm
            hit = norm not in _USER_FILES and (
                norm.startswith(_skip_dirs) or (norm.startswith(_STDLIB_DIRS) and not site)
            )
        _cache[filename] = hit
    return hit


def format_source(filename: str, lineno: int, cwd: str | None = None) -> str:
    """``file:line`` with ``filename`` relative to ``cwd`` when it lies below it."""
    cwd = cwd if cwd is not None else os.getcwd()
    path = filename
    if os.path.isabs(filename):
        try:
            rel = os.path.relpath(filename, cwd)
        except ValueError:  # other drive (Windows)
            rel = filename
        if not rel.startswith(".."):
            path = rel
    return f"{path}:{lineno}"


def user_frame(start: FrameType | None = None) -> FrameType | None:
    """The innermost frame of user code at or above ``start`` (default: the caller), or None."""
    frame: FrameType | None = start if start is not None else sys._getframe(1)
    while frame is not None:
        if not _is_library(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


def user_source(start: FrameType | None = None) -> str:
    """``"file.py:LINE"`` of the innermost user frame above ``start`` (default: the caller), or ``""``."""
    frame = user_frame(start if start is not None else sys._getframe(1))
    if frame is None:
        return ""
    key = (frame.f_code.co_filename, frame.f_lineno)
    text = _formatted.get(key)
    if text is None:
        text = _formatted[key] = format_source(*key)
    return text
