"""GPU ranks: two ranks sharing one GPU under gloo with CUDA tensors, recorded with ``record --nproc 2``. Each
rank's trace holds its collectives (gloo's worker threads' runs, named by the flight recorder where torch
has one), the merged run names the planted straggler, and the worker threads' waits and copies are the
collectives', never the user's. About 20-30 s (two processes start torch, CUDA and gloo)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "scripts" / "ddp_gloo.py"


def test_two_gloo_ranks_on_one_gpu_name_the_straggler_and_keep_comm_waits_off_the_user(tmp_path: Path) -> None:
    from collector.load import load_trace
    from collector.recording.commjoin import COLLECTIVE_CAUSE
    from webapp.analysis import analyze

    shutil.copy(SCRIPT, tmp_path / SCRIPT.name)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "collector", "record", "--nproc", "2", "--no-probe", SCRIPT.name]
    done = subprocess.run(
        [*cmd, "--out", "run.json.gz"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "USDT:" not in done.stdout + done.stderr
    for rank in (0, 1):
        iv = load_trace(tmp_path / f"run.rank{rank}.json.gz").intervals
        coll = iv[iv["kind"] == "collective"]
        assert len(coll) >= 20, (rank, len(coll))  # an all_reduce of the gradients per step, at least
        assert set(coll["lane_kind"].astype(str)) == {"comm_stream"}
        assert all(str(n).startswith("gloo:") for n in coll["name"].unique())
        workers = iv["lane_label"].astype(str).str.startswith("gloo worker")
        waits = iv[workers & (iv["kind"] == "sync_wait")]
        assert len(waits) and set(waits["cause"].astype(str)) == {COLLECTIVE_CAUSE}
        assert all(str(s).startswith("gloo:") for s in waits["source"].unique())
    merged = load_trace(tmp_path / "run.json.gz")
    alignment = merged.meta.notes["clock_alignment"]["ranks"]
    assert all(row["anchors"] >= 20 for row in alignment), alignment
    result = analyze(merged)
    straggler = [f for f in result.findings if f.rule == "straggler"]
    assert straggler and "Rank 1" in straggler[0].title, [(f.rule, f.title) for f in result.findings]
    blamed = [f for f in result.findings if f.rule == "sync-in-loop" and "unknown source" in f.detail]
    assert not blamed, [f.detail for f in blamed]
