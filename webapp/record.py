"""Page and API: record a demo (or a script) on this server's GPU, watch progress, land on the new run.

Recording runs ``python -m collector record TARGET --out FILE`` in a subprocess, once the server has checked
that it can write FILE (503 otherwise, before anything runs); when the recorder exits, its trace (from the
fallback path it printed, if FILE could not be written; a failed script's trace too, with its error) is stored
as a run named after the demo or the script's file, loaded within the server's memory budget like an upload
(webapp.ingest.ingest_within). A trace that cannot be stored stays on disk, and the job says where.
Without a CUDA GPU (or without torch) the page says why and how to record elsewhere.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, abort, current_app, jsonify, render_template, request

from collector.traceformat.save import OutPathError, prepare_out, saved_path
from webapp.budget import MemoryBudget, get_budget
from webapp.ingest import IngestError, ingest_within
from webapp.store import Store, get_store

bp = Blueprint("record", __name__)


@dataclass
class Job:
    """One recording subprocess. ``state``: running | done | failed."""

    id: str
    target: str
    state: str = "running"
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=40))
    run_id: str = ""
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "target": self.target,
            "state": self.state,
            "log": list(self.lines),
            "run_id": self.run_id,
            "run_url": f"/runs/{self.run_id}" if self.run_id else "",
            "error": self.error,
        }


@lru_cache(maxsize=1)
def cuda_status() -> tuple[bool, str]:
    """(available, reason): checked once, in a subprocess so the server never imports torch."""
    code = "import torch, sys; ok = torch.cuda.is_available(); print(torch.cuda.get_device_name(0) if ok else '')"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"could not check for a GPU ({exc})"
    if out.returncode != 0:
        if "No module named 'torch'" in out.stderr:
            how = "pip install -e '.[gpu]' in the Streamscope checkout"
            return False, f"PyTorch is not installed on this server (install it with {how})"
        return False, "PyTorch could not start on this server"
    name = out.stdout.strip()
    if not name:
        return False, "this server has no CUDA GPU that PyTorch can use"
    return True, name


def record_available() -> tuple[bool, str]:
    forced = current_app.config.get("RECORD_ENABLED")
    if forced is not None:
        return bool(forced), "recording is switched off for this server" if not forced else "forced on"
    return cuda_status()


def demo_summaries() -> dict[str, str]:
    """Demo name -> one-line summary (collector.demos.loops.DEMOS; importing it never imports torch)."""
    from collector.demos import loops

    return {name: demo.summary for name, demo in loops.DEMOS.items()}


def list_demos() -> list[str]:
    return list(demo_summaries())


@bp.get("/record")
def page() -> str:
    ok, reason = record_available()
    return render_template("record.html", available=ok, reason=reason, demos=list_demos(), summaries=demo_summaries())


@bp.post("/api/record")
def start() -> tuple[Response, int]:
    ok, reason = record_available()
    if not ok:
        abort(409, f"recording is not available: {reason}")
    body = request.get_json(silent=True) or {}
    demo, script = str(body.get("demo") or ""), str(body.get("script") or "")
    if demo:
        if demo not in list_demos():
            abort(400, f"unknown demo {demo!r}; choose one of {', '.join(list_demos())}")
        target = [f"demo:{demo}"]
    elif script:
        try:
            target = shlex.split(script)
        except ValueError as exc:
            abort(400, f"cannot parse the script command: {exc}")
        if not target or not Path(target[0]).is_file():
            abort(400, "the script path must name an existing file on the server")
    else:
        abort(400, 'send {"demo": NAME} or {"script": "path/to/train.py args"}')
    store = get_store()
    job = Job(id=secrets.token_hex(6), target=" ".join(target))
    out = store.uploads_dir / f"rec-{job.id}.json.gz"
    try:
        prepare_out(str(out))  # before anything runs: a recording that could not be kept is not started
    except OutPathError as exc:
        abort(503, f"this server cannot store a recording now: {exc}")
    base = current_app.config.get("RECORD_COMMAND") or [sys.executable, "-m", "collector"]
    cmd = [*base, "record", "--out", str(out), *target]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    jobs, lock = _jobs()
    with lock:
        jobs[job.id] = job
    name = demo or os.path.basename(target[0])  # a script's run is named after its file; the command is kept
    threading.Thread(target=_follow, args=(job, proc, out, name, store, get_budget()), daemon=True).start()
    return jsonify(job.to_dict()), 202


def _jobs() -> tuple[dict[str, Job], threading.Lock]:
    """This app's recording jobs by id, and their lock (per app, in ``app.extensions``)."""
    return current_app.extensions.setdefault("streamscope.record_jobs", ({}, threading.Lock()))


@bp.get("/api/record/<job_id>")
def status(job_id: str) -> Response:
    jobs, lock = _jobs()
    with lock:
        job = jobs.get(job_id)
    if job is None:
        abort(404, f"no recording job {job_id!r}")
    return jsonify(job.to_dict())


def _follow(job: Job, proc: subprocess.Popen[str], out: Path, name: str, store: Store, budget: MemoryBudget) -> None:
    """Follow the recorder's output; once it exits, store its trace (where it says it saved it when ``out``
    could not be written) within the server's memory budget, waiting in line with the uploads (shown in
    GET /api/ingest as ``record:<job id>``). A script that failed still leaves its trace, stored with the
    error; a trace that cannot be stored is kept on disk and the job says where."""
    saved = None
    for line in proc.stdout or ():
        saved = saved_path([line]) or saved
        job.lines.append(line.rstrip()[:300])
    code = proc.wait()
    trace = Path(saved) if saved else out
    failed = "" if code == 0 else (job.lines[-1] if job.lines else "") or f"the recorder exited with code {code}"
    if not trace.exists():
        job.error, job.state = failed or "the recorder wrote no trace", "failed"
        return
    try:
        info = ingest_within(store, budget, trace, name or "recording", ticket=f"record:{job.id}")
    except IngestError as exc:
        job.error, job.state = f"{exc}; the recording is kept at {_keep(store, trace, name, job.id)}", "failed"
        return
    trace.unlink(missing_ok=True)
    job.run_id, job.error, job.state = info.id, failed, "done"


def _keep(store: Store, trace: Path, name: str, job_id: str) -> Path:
    """Move a trace the store refused to ``recordings/`` in the data folder (uploads/ is swept at start)."""
    kept = store.root / "recordings" / f"{Path(name).stem or 'recording'}-{job_id}{''.join(trace.suffixes[-2:])}"
    try:
        kept.parent.mkdir(exist_ok=True)
        shutil.move(trace, kept)
    except OSError:
        return trace  # where it is, then
    return kept
