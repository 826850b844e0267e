"""Turning trace files into stored runs: uploads (on disk first, loaded within the memory budget) and samples.

The pipeline runs one way: load (collector.load) -> compute (webapp.pipeline.prepare: analysis,
index, overview) -> store (Store.add only writes files and the catalog row). A file's format is recognised
from its bytes (collector.importers.registry); its name only names the run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from collector.errors import StreamscopeError
from collector.model import Trace
from webapp import spool
from webapp.budget import Cancelled, MemoryBudget, default_budget_bytes, estimate_load_bytes, largest_file_bytes
from webapp.formatting import fmt_bytes
from webapp.pipeline import prepare
from webapp.store import RunAborted, RunInfo, Store

log = logging.getLogger(__name__)

MULTI_RANK_NEEDS = "a multi-rank run needs the files of at least two ranks or one zip of them"
NAME_SUFFIXES = (".json.gz", ".json")
"""Dropped from a file name to name its run (a name, not a format: formats are read from the bytes)."""


class IngestError(StreamscopeError, ValueError):
    """A file that cannot become a run; the message is one line for the user."""


class TooLarge(IngestError):
    """The upload passed the configured size limit (HTTP 413)."""


class BudgetExceeded(TooLarge):
    """Loading the trace would pass the server's memory budget (HTTP 413)."""


class ClientGone(IngestError):
    """The client disconnected before its run was stored; nothing was."""


def base_name(filename: str) -> str:
    """The last part of a user's file name, without directories (either slash)."""
    return filename.replace("\\", "/").rsplit("/", 1)[-1]


def display_name(filename: str) -> str:
    """A run name from a file name: the base name without directories or trace suffix."""
    base = base_name(filename)
    suffix = next((s for s in NAME_SUFFIXES if base.lower().endswith(s)), "")
    base = base[: len(base) - len(suffix)]
    if base.lower().endswith(".pt.trace"):  # torch.profiler's own naming
        base = base[: -len(".pt.trace")]
    return base.strip()[:200] or "run"


def ingest_upload(
    store: Store,
    budget: MemoryBudget,
    path: Path,
    filename: str,
    *,
    ticket: str = "",
    gone: Callable[[], bool] = lambda: False,
    step_at: str | None = None,
) -> RunInfo:
    """Store the uploaded file at ``path`` (spooled by the server, or by :func:`spool_stream`) as a run
    named after ``filename``, within ``budget`` (see :func:`ingest_within`). A gzip ``path`` is removed once
    inflated, a plain one is left to the caller.
    """
    return ingest_within(
        store,
        budget,
        path,
        display_name(filename),
        ticket=ticket,
        gone=gone,
        step_at=step_at,
        own_file=True,
        file_name=filename,
    )


def ingest_within(
    store: Store,
    budget: MemoryBudget,
    path: Path,
    name: str,
    *,
    origin: str = "",
    ticket: str = "",
    gone: Callable[[], bool] = lambda: False,
    step_at: str | None = None,
    own_file: bool = False,
    file_name: str = "",
) -> RunInfo:
    """Store the trace file at ``path`` as a run called ``name``, loading it within ``budget``.
    ``file_name``: the user's name for the file (``path`` is then the server's copy), for a trace that names
    its workload after its file.

    A gzip is inflated to a file in the uploads folder, never past what ``budget`` could load; the load is
    refused (BudgetExceeded) when its estimate passes the whole budget, else it waits its turn in the budget's
    queue (``ticket`` names it there). ``gone()`` tells whether the client has gone away: then nothing is
    stored (ClientGone). Files made here are removed; ``path`` itself only when ``own_file`` and a gzip.
    """
    most = largest_file_bytes(budget.budget_bytes)
    plain = path
    try:
        if spool.is_gzip(path):
            plain = store.uploads_dir / f"{secrets.token_hex(8)}.json"
            try:
                size, events = spool.inflate_to_disk(path, plain, most, stop=gone)
            except spool.InflateLimit:
                raise BudgetExceeded(
                    f"the gzip inflates past {fmt_bytes(most)}, more than this server's memory budget can "
                    "load (see --max-memory)"
                ) from None
            except ValueError as exc:
                raise IngestError(str(exc)) from None
            _stop_if(gone)
            if own_file:
                path.unlink(missing_ok=True)  # the compressed copy is no longer needed: free its disk
        else:
            size, events = path.stat().st_size, spool.count_events(path)
        if size == 0:
            raise IngestError("the file is empty")
        need = estimate_load_bytes(size, events)
        if need > budget.budget_bytes:
            raise BudgetExceeded(
                f"loading this trace ({fmt_bytes(size)}, {events:,} events) needs about {fmt_bytes(need)}, "
                f"more than this server's memory budget of {fmt_bytes(budget.budget_bytes)} (see --max-memory)"
            )
        try:
            with budget.hold(need, ticket, gone):
                _stop_if(gone)
                trace = _load(plain, step_at)
                if trace.meta.workload in (plain.name, path.name):  # named after a file: the user's, not ours
                    trace = trace.with_meta(workload=base_name(file_name) if file_name else path.name)
                if trace.meta.workload and name == "run":
                    name = trace.meta.workload
                run = prepare(trace)
                del trace
                _stop_if(gone)
                return store.add(
                    run.trace,
                    name,
                    analysis=run.analysis,
                    index=run.index,
                    overview=run.overview,
                    origin=origin,
                    keep=lambda: not gone(),
                )
        except Cancelled:
            raise ClientGone("the client went away while its upload waited") from None
        except RunAborted:
            raise ClientGone("the client went away before its run was stored") from None
        except IngestError as exc:  # name the user's file, never the server's path
            raise type(exc)(str(exc).replace(f"{plain}: ", "").replace(str(plain), "the file")) from None
    finally:
        if plain != path:
            plain.unlink(missing_ok=True)


def spool_stream(store: Store, stream: IO[bytes], filename: str, limit_bytes: int) -> Path:
    """Copy an upload body into a server-named file in the uploads folder (for servers that did not spool
    it there already); the caller removes it. Raises TooLarge past ``limit_bytes``."""
    part = store.uploads_dir / f"{secrets.token_hex(8)}.upload"
    try:
        spool.copy_limited(stream, part, limit_bytes)
    except spool.InflateLimit:
        part.unlink(missing_ok=True)
        raise TooLarge(f"upload too large: the limit is {limit_bytes:,} bytes") from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return part


def _stop_if(gone: Callable[[], bool]) -> None:
    if gone():
        raise ClientGone("the client went away before its run was stored")


def _load(path: Path, step_at: str | None = None) -> Trace:
    from collector.load import load_trace

    try:
        return load_trace(str(path), step_at=step_at)
    except (ValueError, OSError, EOFError) as exc:
        raise IngestError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    except MemoryError:
        raise BudgetExceeded("the trace is too large to load on this server") from None


def ingest_file(store: Store, path: Path, name: str, origin: str = "", *, step_at: str | None = None) -> RunInfo:
    """Load a trace file (ours or torch.profiler's) and store it; raises IngestError with one line."""
    trace = _load(path, step_at)
    if trace.meta.workload and name == "run":
        name = trace.meta.workload
    return add_trace(store, trace, name, origin=origin)


def add_trace(
    store: Store, trace: Trace, name: str, *, origin: str = "", analysis: dict[str, Any] | None = None
) -> RunInfo:
    """Analyse, index and store ``trace``; ``analysis`` (RunAnalysis.to_dict()) is computed when None."""
    run = prepare(trace, analysis)
    return store.add(run.trace, name, analysis=run.analysis, index=run.index, overview=run.overview, origin=origin)


def ingest_ranks(
    store: Store,
    files: list[tuple[IO[bytes], str]],
    limit_bytes: int,
    budget: MemoryBudget | None = None,
    *,
    workers: int | None = None,
) -> RunInfo:
    """Store the per-rank files of one job as one multi-rank run (collector.ranks.merge: clocks aligned on the
    collectives). Each file is written to the uploads folder (``limit_bytes`` each; gzips inflated to disk)
    and removed after; all of them are loaded within ``budget`` together, in parallel (:func:`_load_ranks`,
    up to ``workers`` processes). Raises IngestError (one line naming the file) and stores nothing when any
    file fails."""
    from collector.ranks.merge import merge_traces

    if len(files) < 2:
        raise IngestError("a multi-rank run needs the files of at least two ranks")
    made: list[Path] = []
    try:
        plains: list[tuple[Path, str]] = []
        need = 0
        for stream, filename in files:
            part = spool_stream(store, stream, filename, limit_bytes)
            made.append(part)
            plain, size, events = _plain_copy(store, part, budget)
            made.append(plain)
            plains.append((plain, filename))
            need += estimate_load_bytes(size, events)
        if budget is not None and need > budget.budget_bytes:
            raise BudgetExceeded(
                f"loading these {len(files)} traces needs about {fmt_bytes(need)}, more than this server's "
                f"memory budget of {fmt_bytes(budget.budget_bytes)} (see --max-memory)"
            )
        with budget.hold(need) if budget is not None else _no_hold():
            traces = _load_ranks(plains, workers)
            names = [base_name(f) for _, f in files]
            try:
                trace = merge_traces(traces, names)
            except ValueError as exc:
                raise IngestError(str(exc)) from None
            name = display_name(names[0]).split(".rank")[0] or "ranks"
            return add_trace(store, trace, f"{name} ({len(traces)} ranks)")
    finally:
        for path in made:
            path.unlink(missing_ok=True)


def ingest_rank_zip(
    store: Store,
    stream: IO[bytes],
    filename: str,
    limit_bytes: int,
    budget: MemoryBudget | None = None,
    *,
    workers: int | None = None,
) -> RunInfo:
    """:func:`ingest_ranks` for one upload that is a zip of the rank files (collector.ranks.rankzip; each member
    held to ``limit_bytes`` inflated). Raises IngestError for a file that is no zip or a bad zip; stores
    nothing on failure."""
    from collector.ranks.rankzip import RankZipError, is_rank_zip, open_zip, rank_members

    part = store.uploads_dir / f"{secrets.token_hex(8)}.zip"
    try:
        try:
            spool.copy_limited(stream, part, limit_bytes)
        except spool.InflateLimit:
            raise TooLarge(f"upload too large: the limit is {limit_bytes:,} bytes") from None
        if not is_rank_zip(part):
            raise IngestError(MULTI_RANK_NEEDS)
        try:
            with open_zip(part) as zf:
                members = rank_members(zf, base_name(filename))
                files = [(zf.open(m), m.filename) for m in members]
                try:
                    return ingest_ranks(store, files, limit_bytes, budget, workers=workers)
                finally:
                    for fh, _ in files:
                        fh.close()
        except RankZipError as exc:
            raise IngestError(str(exc).replace(str(part.name), base_name(filename))) from None
    finally:
        part.unlink(missing_ok=True)


def _load_ranks(plains: list[tuple[Path, str]], workers: int | None) -> list[Trace]:
    """The traces of the spooled rank files ``(path, user's file name)``, in order, loaded as the merge
    command loads them (webapp.rankwork) by up to ``workers`` processes (default: the CPU count; inline for
    one), started by a fork server rather than forked from this threaded server. A file that fails is an
    IngestError of one line that names the user's file."""
    from concurrent.futures.process import BrokenProcessPool

    from webapp.rankwork import RankWorkError, load_rank, run_per_rank

    paths = [str(plain) for plain, _ in plains]
    try:
        return run_per_rank(load_rank, paths, workers=workers, start_method="forkserver")
    except RankWorkError as exc:
        spooled, _, text = str(exc).partition(": ")
        for plain, filename in plains:
            text = text.replace(str(plain), base_name(filename))
        user = next((base_name(f) for plain, f in plains if plain.name == spooled), "a rank file")
        raise IngestError(f"{user}: {text}") from None
    except MemoryError:
        raise BudgetExceeded("the rank files are too large to load on this server") from None
    except BrokenProcessPool:
        raise IngestError("a process loading the rank files stopped before it finished; nothing was stored") from None


def _plain_copy(store: Store, part: Path, budget: MemoryBudget | None) -> tuple[Path, int, int]:
    """``part`` itself, or for a gzip its inflated copy beside it; with the plain size and event count."""
    if not spool.is_gzip(part):
        return part, part.stat().st_size, spool.count_events(part)
    plain = store.uploads_dir / f"{secrets.token_hex(8)}.json"
    most = largest_file_bytes(budget.budget_bytes) if budget is not None else 1 << 62
    try:
        size, events = spool.inflate_to_disk(part, plain, most)
    except spool.InflateLimit:
        plain.unlink(missing_ok=True)
        raise BudgetExceeded("a gzip inflates past what this server's memory budget can load") from None
    except ValueError as exc:
        plain.unlink(missing_ok=True)
        raise IngestError(str(exc)) from None
    return plain, size, events


@contextlib.contextmanager
def _no_hold() -> Iterator[None]:
    yield


def sample_files(folder: Path) -> list[Path]:
    """The traces in ``folder``, known by their first bytes (collector.importers.registry.is_trace_like)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and _trace_like(p))


def _trace_like(path: Path) -> bool:
    from collector.importers.registry import is_trace_like
    from collector.traceformat.head import read_head
    from collector.traceformat.spec import TraceFileError

    try:
        return is_trace_like(read_head(path))
    except TraceFileError:
        return True  # it does not read: the import reports it (and skips it)


def import_samples(store: Store, folder: Path, budget: MemoryBudget | None = None) -> list[RunInfo]:
    """On the data folder's first start, import every trace in ``folder`` within ``budget`` (the server's
    memory budget; by default one of default_budget_bytes()); later starts do nothing. A sample that cannot
    be imported (unreadable, or too large for the budget) is skipped with a warning."""
    if store.setting("samples_imported"):
        return []
    budget = budget or MemoryBudget(default_budget_bytes())
    added = []
    for path in sample_files(folder):
        try:
            added.append(
                ingest_within(
                    store, budget, path, display_name(path.name), origin=f"sample:{path.name}", ticket=path.name
                )
            )
        except IngestError as exc:
            log.warning("sample %s not imported: %s", os.fspath(path), exc)
    store.set_setting("samples_imported", "1")
    return added
