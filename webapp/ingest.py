"""Turning trace files into stored runs: uploads (streamed to disk first) and the bundled sample traces.

The pipeline runs one way: load (collector.load) -> compute (webapp.pipeline.prepare: analysis,
index, overview) -> store (Store.add only writes files and the catalog row).
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from collector.errors import StreamscopeError
from collector.model import Trace
from webapp.pipeline import prepare
from webapp.store import RunInfo, Store

log = logging.getLogger(__name__)

TRACE_SUFFIXES = (".json.gz", ".json")
CHUNK_BYTES = 1 << 20


class IngestError(StreamscopeError, ValueError):
    """A file that cannot become a run; the message is one line for the user."""


class TooLarge(IngestError):
    """The upload passed the configured size limit."""


def suffix_of(filename: str) -> str:
    """The trace suffix of a user's file name (``.json`` or ``.json.gz``); raises IngestError otherwise."""
    suffix = _trace_suffix(filename)
    if suffix is None:
        raise IngestError("not a trace file: the name must end in .json or .json.gz")
    return suffix


def _trace_suffix(filename: str) -> str | None:
    lower = filename.lower()
    return next((suffix for suffix in TRACE_SUFFIXES if lower.endswith(suffix)), None)


def base_name(filename: str) -> str:
    """The last part of a user's file name, without directories (either slash)."""
    return filename.replace("\\", "/").rsplit("/", 1)[-1]


def display_name(filename: str) -> str:
    """A run name from a file name: the base name without directories or trace suffix."""
    base = base_name(filename)
    suffix = _trace_suffix(base)
    if suffix is not None:
        base = base[: -len(suffix)]
    if base.lower().endswith(".pt.trace"):  # torch.profiler's own naming
        base = base[: -len(".pt.trace")]
    return base.strip()[:200] or "run"


def ingest_stream(
    store: Store, stream: IO[bytes], filename: str, limit_bytes: int, *, step_at: str | None = None
) -> RunInfo:
    """Stream ``stream`` to a server-named file in the uploads folder, then store it as a run (``step_at``:
    the user's ``--step-at`` choice, collector.steps).

    The upload file is always removed; nothing is stored when any step fails.
    """
    suffix = suffix_of(filename)
    part = store.uploads_dir / f"{secrets.token_hex(8)}{suffix}"
    try:
        written = 0
        with open(part, "wb") as fh:
            while True:
                chunk = stream.read(CHUNK_BYTES)
                if not chunk:
                    break
                written += len(chunk)
                if written > limit_bytes:
                    raise TooLarge(f"file is larger than the upload limit of {limit_bytes:,} bytes")
                fh.write(chunk)
        if written == 0:
            raise IngestError("the file is empty")
        try:
            return ingest_file(store, part, display_name(filename), step_at=step_at)
        except IngestError as exc:  # name the user's file, never the server's path
            message = str(exc).replace(f"{part}: ", "").replace(str(part), "the file")
            raise IngestError(message) from None
    finally:
        part.unlink(missing_ok=True)


def ingest_file(store: Store, path: Path, name: str, origin: str = "", *, step_at: str | None = None) -> RunInfo:
    """Load a trace file (ours or torch.profiler's) and store it; raises IngestError with one line."""
    from collector.load import load_trace

    try:
        trace = load_trace(str(path), step_at=step_at)
    except (ValueError, OSError, EOFError) as exc:
        raise IngestError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    except MemoryError:
        raise IngestError("the trace is too large to load on this server") from None
    if trace.meta.workload and name == "run":
        name = trace.meta.workload
    return add_trace(store, trace, name, origin=origin)


def add_trace(
    store: Store, trace: Trace, name: str, *, origin: str = "", analysis: dict[str, Any] | None = None
) -> RunInfo:
    """Analyse, index and store ``trace``; ``analysis`` (RunAnalysis.to_dict()) is computed when None."""
    run = prepare(trace, analysis)
    return store.add(run.trace, name, analysis=run.analysis, index=run.index, overview=run.overview, origin=origin)


def ingest_ranks(store: Store, files: list[tuple[IO[bytes], str]], limit_bytes: int) -> RunInfo:
    """Store the per-rank files of one job as one multi-rank run (collector.merge: clocks aligned on the
    collectives). Each file is streamed to the uploads folder first (``limit_bytes`` each) and removed after;
    raises IngestError (one line naming the file) and stores nothing when any file fails."""
    from collector.load import load_trace
    from collector.merge import merge_traces

    if len(files) < 2:
        raise IngestError("a multi-rank run needs the files of at least two ranks")
    parts: list[Path] = []
    try:
        traces = []
        for stream, filename in files:
            part = store.uploads_dir / f"{secrets.token_hex(8)}{suffix_of(filename)}"
            parts.append(part)
            written = 0
            with open(part, "wb") as fh:
                while chunk := stream.read(CHUNK_BYTES):
                    written += len(chunk)
                    if written > limit_bytes:
                        raise TooLarge(f"{base_name(filename)}: larger than the upload limit of {limit_bytes:,} bytes")
                    fh.write(chunk)
            try:
                traces.append(load_trace(str(part)))
            except (ValueError, OSError, EOFError) as exc:
                text = (str(exc).splitlines() or [type(exc).__name__])[0].replace(f"{part}: ", "")
                raise IngestError(f"{base_name(filename)}: {text}") from None
        names = [base_name(f) for _, f in files]
        try:
            trace = merge_traces(traces, names)
        except ValueError as exc:
            raise IngestError(str(exc)) from None
        name = display_name(names[0]).split(".rank")[0] or "ranks"
        return add_trace(store, trace, f"{name} ({len(traces)} ranks)")
    finally:
        for part in parts:
            part.unlink(missing_ok=True)


def sample_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith(TRACE_SUFFIXES))


def import_samples(store: Store, folder: Path) -> list[RunInfo]:
    """On the data folder's first start, import every trace in ``folder``; later starts do nothing."""
    if store.setting("samples_imported"):
        return []
    added = _import_all(store, sample_files(folder))
    store.set_setting("samples_imported", "1")
    return added


def _import_all(store: Store, paths: Iterable[Path]) -> list[RunInfo]:
    added = []
    for path in paths:
        try:
            added.append(ingest_file(store, path, display_name(path.name), origin=f"sample:{path.name}"))
        except IngestError as exc:
            log.warning("sample %s not imported: %s", os.fspath(path), exc)
    return added
