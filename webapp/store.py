"""Run storage: a SQLite catalog (WAL mode) plus one Parquet file per run, in one data folder.

Layout of the data folder::

    catalog.sqlite          table ``runs`` (one row per stored run) and ``settings``
    runs/<id>.parquet       the run DataFrame (INTERVAL_COLUMNS, sorted by lane then start_ns); the
                            schema metadata holds ``streamscope.meta``, ``streamscope.lanes`` and
                            ``streamscope.markers`` as JSON (webapp.runfile)
    runs/<id>.analysis.json the stored analysis (RunAnalysis.to_dict())
    runs/<id>.overview.json the whole-run timeline payload
    runs/<id>.lod/          the run's level-of-detail index as memory-mappable .npy files
                            (webapp.index_files): a stored run answers views without reading its Parquet
    uploads/                partial uploads, streamed to disk; removed when done

Run ids are made by the server (``secrets.token_hex``); no user-supplied name reaches the filesystem.
Files are written under a temporary name and renamed into place; the catalog row is inserted last, in one
transaction, so a server killed mid-way leaves no half run in the catalog (orphan files are swept on open).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collector.model import Trace
from webapp.analysis.lod import RunIndex
from webapp.index_files import load_index, save_index
from webapp.lanes import lane_views
from webapp.runfile import lane_from_dict, read_run_file, read_run_rows, write_run_file

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    source TEXT NOT NULL,
    device TEXT NOT NULL,
    created TEXT NOT NULL,
    added REAL NOT NULL,
    workload TEXT NOT NULL,
    intervals INTEGER NOT NULL,
    lanes INTEGER NOT NULL,
    ranks INTEGER NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    summary TEXT NOT NULL,
    origin TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

RUN_FIELDS = (
    "id",
    "name",
    "source",
    "device",
    "created",
    "added",
    "workload",
    "intervals",
    "lanes",
    "ranks",
    "start_ns",
    "end_ns",
    "summary",
    "origin",
)


class RunNotFound(KeyError):
    """No run with that id in the catalog."""


class RunAborted(Exception):
    """Store.add was told not to keep the run; nothing of it is stored."""


@dataclass(frozen=True)
class RunInfo:
    """One catalog row. ``summary`` is RunAnalysis.summary() (steps, step_time_median_ns, ...)."""

    id: str
    name: str
    source: str
    device: str
    created: str
    added: float  # unix seconds
    workload: str
    intervals: int
    lanes: int
    ranks: int
    start_ns: int
    end_ns: int
    summary: dict[str, Any]
    origin: str  # e.g. "sample:naive.json.gz" for imported samples, "" otherwise

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in RUN_FIELDS}


def _row_to_info(row: sqlite3.Row) -> RunInfo:
    values = dict(row)
    values["summary"] = json.loads(values["summary"] or "{}")
    return RunInfo(**values)


def _is_valid_id(run_id: str) -> bool:
    return len(run_id) == 16 and all(c in "0123456789abcdef" for c in run_id)


class Store:
    """The data folder. Thread-safe: each call opens its own SQLite connection."""

    def __init__(self, root: str | os.PathLike[str], cache_runs: int = 3) -> None:
        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        self.uploads_dir = self.root / "uploads"
        for d in (self.root, self.runs_dir, self.uploads_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.catalog_path = self.root / "catalog.sqlite"
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
        self._cache: OrderedDict[str, RunIndex] = OrderedDict()
        self._cache_size = cache_runs
        self._lock = threading.Lock()
        self._exclusive: dict[str, threading.Lock] = {}
        self._sweep()

    # -- catalog -------------------------------------------------------------------------------------

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.catalog_path, timeout=30)
        db.row_factory = sqlite3.Row
        try:
            with db:
                yield db
        finally:
            db.close()

    def _sweep(self) -> None:
        """Remove files no catalog row refers to (left by a server killed mid-store) and stale uploads."""
        known = {r.id for r in self.list_runs()}
        for path in self.runs_dir.iterdir():
            run_id = path.name.split(".", 1)[0]
            if path.name.startswith(".tmp-") or run_id not in known:
                _remove(path)
        for path in self.uploads_dir.iterdir():
            path.unlink(missing_ok=True)

    def list_runs(self) -> list[RunInfo]:
        """All runs, newest first."""
        with self._connect() as db:
            rows = db.execute("SELECT * FROM runs ORDER BY added DESC, id").fetchall()
        return [_row_to_info(r) for r in rows]

    def get(self, run_id: str) -> RunInfo:
        if not _is_valid_id(run_id):
            raise RunNotFound(run_id)
        with self._connect() as db:
            row = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFound(run_id)
        return _row_to_info(row)

    def rename(self, run_id: str, name: str) -> RunInfo:
        self.get(run_id)
        with self._connect() as db:
            db.execute("UPDATE runs SET name = ? WHERE id = ?", (name, run_id))
        return self.get(run_id)

    def delete(self, run_id: str) -> None:
        self.get(run_id)
        with self._connect() as db:
            db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
        with self._lock:
            self._cache.pop(run_id, None)
        for path in self.runs_dir.glob(f"{run_id}.*"):
            _remove(path)

    def setting(self, key: str, default: str = "") -> str:
        with self._connect() as db:
            row = db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return str(row["value"]) if row else default

    def set_setting(self, key: str, value: str) -> None:
        with self._connect() as db:
            db.execute("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", (key, value))

    # -- runs ----------------------------------------------------------------------------------------

    def run_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.parquet"

    def lod_path(self, run_id: str) -> Path:
        """The folder of the run's saved level-of-detail index (absent for runs stored before it existed)."""
        return self.runs_dir / f"{run_id}.lod"

    def analysis_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.analysis.json"

    def overview_path(self, run_id: str) -> Path:
        """The timeline of the whole run at OVERVIEW_WIDTH_PX, stored at ingest for a fast first paint."""
        return self.runs_dir / f"{run_id}.overview.json"

    def overview(self, run_id: str) -> bytes | None:
        """The stored overview payload; None for a run stored before overviews were (see save_overview)."""
        self.get(run_id)
        path = self.overview_path(run_id)
        return path.read_bytes() if path.is_file() else None

    def save_overview(self, run_id: str, overview: bytes) -> None:
        """Keep an overview computed later for an older run."""
        self.get(run_id)
        _write_atomic_bytes(self.overview_path(run_id), overview)

    def add(
        self,
        trace: Trace,
        name: str,
        *,
        analysis: dict[str, Any],
        index: RunIndex,
        overview: bytes,
        origin: str = "",
        keep: Callable[[], bool] = lambda: True,
    ) -> RunInfo:
        """Store an already computed run (webapp.pipeline.prepare) under a new id: files first, catalog row last.

        ``trace`` has its intervals sorted by lane then start_ns; ``analysis`` is RunAnalysis.to_dict();
        ``index`` is the trace's RunIndex; ``overview`` the whole-run timeline payload as JSON bytes.
        ``keep()`` is asked just before the catalog row is written: when false (the uploader went away) the
        files are removed and RunAborted is raised. The run is not kept in memory: its first view maps the
        saved index, so an upload costs memory only while it is ingested.
        """
        run_id = secrets.token_hex(8)
        frame = trace.intervals
        write_run_file(self.run_path(run_id), trace, frame)
        _write_atomic_text(self.analysis_path(run_id), json.dumps(analysis, allow_nan=False))
        _write_atomic_bytes(self.overview_path(run_id), overview)
        _write_atomic_index(self.lod_path(run_id), index)
        meta = trace.meta
        info = RunInfo(
            id=run_id,
            name=name,
            source=meta.source or "recorded",
            device=meta.device_name or "",
            created=meta.created or "",
            added=time.time(),
            workload=meta.workload or "",
            intervals=len(frame),
            lanes=len(trace.lanes),
            ranks=len({lane.rank for lane in trace.lanes}),
            start_ns=index.origin_ns,
            end_ns=index.end_ns,
            summary=dict(analysis.get("summary") or {}),
            origin=origin,
        )
        row = info.to_dict()
        row["summary"] = json.dumps(info.summary)
        if not keep():
            for path in self.runs_dir.glob(f"{run_id}.*"):
                _remove(path)
            raise RunAborted(run_id)
        with self._connect() as db:
            db.execute(
                f"INSERT INTO runs ({', '.join(RUN_FIELDS)}) VALUES ({', '.join('?' * len(RUN_FIELDS))})",
                [row[f] for f in RUN_FIELDS],
            )
        return info

    def load(self, run_id: str) -> Trace:
        """The stored run as a Trace (intervals sorted by lane then start_ns); cached in memory."""
        return self.index(run_id).trace

    def index(self, run_id: str, trace: Trace | None = None) -> RunIndex:
        """The run's level-of-detail index (its sorted per-lane arrays), built once and cached."""
        with self._lock:  # a cached run is in the catalog (delete drops it): no catalog query
            if run_id in self._cache:
                self._cache.move_to_end(run_id)
                return self._cache[run_id]
        self.get(run_id)
        with self.exclusive(f"index:{run_id}"):  # one build per run; concurrent callers wait for it
            with self._lock:
                if run_id in self._cache:
                    return self._cache[run_id]
            index = self._open_index(run_id, trace)
            with self._lock:
                self._remember(run_id, index)
        return index

    @contextmanager
    def exclusive(self, key: str) -> Iterator[None]:
        """Held by one caller per ``key`` at a time (one index build, one analysis run again, per run); the
        others wait, then find the work done."""
        with self._lock:
            lock = self._exclusive.setdefault(key, threading.Lock())
        with lock:
            try:
                yield
            finally:
                with self._lock:
                    self._exclusive.pop(key, None)

    def _open_index(self, run_id: str, trace: Trace | None) -> RunIndex:
        """The saved index, memory-mapped (the Parquet file is read only if the full run is asked for);
        built from ``trace`` or the Parquet file when there is no usable saved one (a run stored by an
        older version, or a damaged index), which is then saved in the background for the next time."""
        if trace is not None:
            return RunIndex(trace)
        path = self.run_path(run_id)
        saved = load_index(
            self.lod_path(run_id), lambda: read_run_file(path), lambda positions: read_run_rows(path, positions)
        )
        if saved is not None:
            return saved
        index = RunIndex(read_run_file(path))
        threading.Thread(
            target=self._save_index, args=(run_id, index), name=f"save-index-{run_id}", daemon=True
        ).start()
        return index

    def _save_index(self, run_id: str, index: RunIndex) -> None:
        lod = self.lod_path(run_id)
        try:
            _remove(lod)  # a damaged one
            _write_atomic_index(lod, index)
            self.get(run_id)
        except RunNotFound:  # deleted meanwhile
            _remove(lod)
        except OSError:
            log.warning("could not save the index of run %s", run_id, exc_info=True)

    def warm(self, run_id: str, trace: Trace | None = None) -> None:
        """Build the run's index in a background thread (no-op when cached)."""
        with self._lock:
            if run_id in self._cache:
                return

        def _build() -> None:
            with contextlib.suppress(RunNotFound, OSError):  # deleted meanwhile
                self.index(run_id, trace)

        threading.Thread(target=_build, name=f"warm-{run_id}", daemon=True).start()

    def lanes(self, run_id: str) -> list[dict[str, Any]]:
        """The run's lanes as the timeline lays them out (webapp.lanes.lane_views), without loading its
        intervals."""
        self.get(run_id)
        with self._lock:
            cached = self._cache.get(run_id)
        if cached is not None:
            return lane_views(cached.lanes)
        import pyarrow.parquet as pq

        md = pq.read_schema(self.run_path(run_id)).metadata or {}
        return lane_views([lane_from_dict(d) for d in json.loads(md[b"streamscope.lanes"])])

    def analysis(self, run_id: str) -> dict[str, Any]:
        """The stored analysis, as stored (webapp.pipeline.current_analysis makes sure it is this version's)."""
        self.get(run_id)
        return dict(json.loads(self.analysis_path(run_id).read_text()))

    def replace_analysis(self, run_id: str, analysis: dict[str, Any]) -> None:
        """Store a run's analysis computed again (RunAnalysis.to_dict()), and its summary in the catalog."""
        self.get(run_id)
        _write_atomic_text(self.analysis_path(run_id), json.dumps(analysis, allow_nan=False))
        with self._connect() as db:
            db.execute("UPDATE runs SET summary = ? WHERE id = ?", (json.dumps(analysis.get("summary") or {}), run_id))

    def _remember(self, run_id: str, index: RunIndex) -> None:
        self._cache[run_id] = index
        self._cache.move_to_end(run_id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)


def _write_atomic_text(path: Path, text: str) -> None:
    _write_atomic_bytes(path, text.encode("utf-8"))


def _write_atomic_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".tmp-{path.name}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _write_atomic_index(path: Path, index: RunIndex) -> None:
    tmp = path.with_name(f".tmp-{path.name}")
    _remove(tmp)
    save_index(index, tmp)
    os.replace(tmp, path)


def _remove(path: Path) -> None:
    """Remove a file or a folder (a saved index)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def get_store() -> Store:
    """The Store of the current app (use inside a request), as flask's get_db."""
    from flask import current_app

    store: Store = current_app.extensions["streamscope.store"]
    return store
