"""Never lose a recording: check where it goes before the work runs, and save it elsewhere if that fails.

:func:`prepare_out` runs before a workload starts: it creates the folder of ``--out`` when it is missing and
refuses (:class:`OutPathError`, exit 2) a path it cannot write, so a typo costs nothing. :func:`save_trace`
writes the trace at the end; when that fails (a full disk, a folder removed or made read-only meanwhile), it
writes the trace into a fallback folder under its own file name and prints the line :data:`SAVED_LINE`, which
callers (the launcher of ``--nproc``, the web app's record page) read back with :func:`saved_path`.

Fallback folders, in order: ``$STREAMSCOPE_FALLBACK_DIR`` when set (the launcher gives every rank the same
one), then a fresh folder in the system's temporary folder, the working folder and the home folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Iterator

from collector.errors import StreamscopeError
from collector.model import Trace
from collector.traceformat.write import write_trace

FALLBACK_DIR_ENV = "STREAMSCOPE_FALLBACK_DIR"
SAVED_LINE = "streamscope: could not write {out} ({reason}); the trace is saved as {path}"
"""What :func:`save_trace` prints on stderr when it wrote to a fallback path."""

_SAVED = re.compile(r"^streamscope: could not write .* \(.*\); the trace is saved as (?P<path>.+)$")


class OutPathError(StreamscopeError):
    """``--out`` names a path that cannot be written (exit 2, before any work runs)."""


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def prepare_out(path: str) -> None:
    """Make sure ``path`` can be written: create its folder when missing, then create and remove a file there.

    Raises OutPathError with a message that names the path and why it cannot be written.
    """
    target = os.path.abspath(path)
    if os.path.isdir(target):
        raise OutPathError(f"--out {path} is a folder: name a file in it, e.g. {os.path.join(path, 'run.json.gz')}")
    folder = os.path.dirname(target)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        above = _existing_ancestor(folder)
        why = f"{above} is a file, not a folder" if not os.path.isdir(above) else _reason(exc)
        raise OutPathError(f"cannot create the folder of --out {path}: {why}; nothing was run") from None
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".streamscope-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        # a folder that exists yet answers "no such file" takes no new files (/proc, some mounts)
        reason = "it takes no new files" if exc.errno == errno.ENOENT and os.path.isdir(folder) else _reason(exc)
        raise OutPathError(f"cannot write --out {path}: {folder} is not writable ({reason}); nothing was run") from None


def _existing_ancestor(folder: str) -> str:
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return folder


def fallback_folders() -> Iterator[str]:
    """Folders to save a trace in when its own path fails, each made only when it is asked for."""
    given = os.environ.get(FALLBACK_DIR_ENV, "")
    if given and os.path.isdir(given):
        yield given
    for base in _unique((tempfile.gettempdir(), os.getcwd(), os.path.expanduser("~"))):
        try:
            yield tempfile.mkdtemp(prefix="streamscope-saved-", dir=base)
        except OSError:
            continue


def _unique(paths: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(os.path.abspath(p) for p in paths))


def save_trace(trace: Trace, path: str) -> str:
    """Write ``trace`` to ``path`` (creating its folder), else to a fallback folder; returns the path written.

    Prints :data:`SAVED_LINE` when the trace went elsewhere. Raises OSError only when no folder could take it.
    """
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        write_trace(trace, path)
        return path
    except OSError as exc:
        first = exc
    tried: list[str] = []
    for folder in fallback_folders():
        target = os.path.join(folder, os.path.basename(path))
        try:
            write_trace(trace, target)
        except OSError:
            tried.append(folder)
            _remove_if_empty(folder)
            continue
        print(SAVED_LINE.format(out=path, reason=_reason(first), path=target), file=sys.stderr, flush=True)
        return target
    raise OSError(first.errno, f"could not write {path} ({_reason(first)}) nor in {', '.join(tried) or 'any folder'}")


def _remove_if_empty(folder: str) -> None:
    if os.path.basename(folder).startswith("streamscope-saved-"):
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def saved_path(lines: Iterable[str]) -> str | None:
    """The fallback path named by a :data:`SAVED_LINE` among ``lines`` (the last one), else None."""
    found = None
    for line in lines:
        m = _SAVED.match(line.strip())
        if m:
            found = m.group("path")
    return found
