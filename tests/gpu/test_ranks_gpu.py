"""GPU ranks recorded with ``record --nproc 2``: each rank's trace holds its collectives, the merged run names the
planted straggler, and no communication wait is blamed on the user's code. gloo with CUDA tensors: two ranks
share one GPU; gloo's worker threads' runs become its collectives (named by the flight recorder where torch
has one) and their waits and copies are marked as the collective's. NCCL: one GPU per rank (skipped with
fewer than two); its kernels take their process group and bytes. About 20-30 s each (two processes start
torch, CUDA and the process group)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "scripts" / "ddp_ranks.py"


def _record(tmp_path: Path, backend: str) -> Any:
    """``record --nproc 2`` of the script under ``backend``; the merged run, loaded."""
    from collector.load import load_trace

    shutil.copy(SCRIPT, tmp_path / SCRIPT.name)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "collector", "record", "--nproc", "2", "--no-probe", SCRIPT.name, backend]
    done = subprocess.run(
        [*cmd, "--out", "run.json.gz"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "USDT:" not in done.stdout + done.stderr
    return load_trace(tmp_path / "run.json.gz")


def _straggler_named(merged: Any) -> None:
    from webapp.analysis import analyze

    alignment = merged.meta.notes["clock_alignment"]["ranks"]
    assert all(row["anchors"] >= 20 for row in alignment), alignment
    result = analyze(merged)
    straggler = [f for f in result.findings if f.rule == "straggler"]
    assert straggler and "Rank 1" in straggler[0].title, [(f.rule, f.title) for f in result.findings]
    found = result.ranks["straggler"]  # its cost is replayed: the planted 20 ms, not the summed bucket waits
    assert found["replayed"] and 10e6 < found["saving_per_step_ns"] < 30e6, found
    blamed = [f for f in result.findings if f.rule == "sync-in-loop" and "unknown source" in f.detail]
    assert not blamed, [f.detail for f in blamed]


def test_two_gloo_ranks_on_one_gpu_name_the_straggler_and_keep_comm_waits_off_the_user(tmp_path: Path) -> None:
    from collector.recording.commjoin import COLLECTIVE_CAUSE

    merged = _record(tmp_path, "gloo")
    for rank in (0, 1):
        iv = merged.intervals[merged.intervals["rank"] == rank]
        coll = iv[iv["kind"] == "collective"]
        assert len(coll) >= 20, (rank, len(coll))  # an all_reduce of the gradients per step, at least
        assert set(coll["lane_kind"].astype(str)) == {"comm_stream"}
        assert all(str(n).startswith("gloo:") for n in coll["name"].unique())
        workers = iv["lane_label"].astype(str).str.startswith("gloo worker")
        waits = iv[workers & (iv["kind"] == "sync_wait")]
        assert len(waits) and set(waits["cause"].astype(str)) == {COLLECTIVE_CAUSE}
        assert all(str(s).startswith("gloo:") for s in waits["source"].unique())
    # naming stopped at once (gloo carries CUDA tensors), yet the backward's thread is named
    threads = [ln.label for ln in merged.lanes if ln.kind.value == "cpu_thread"]
    assert sum(label.startswith("autograd thread") for label in threads) == 2, threads
    assert not [label for label in threads if label.startswith("thread ")], threads
    _straggler_named(merged)


def test_two_nccl_ranks_name_their_kernels_group_and_bytes_and_the_straggler(tmp_path: Path) -> None:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("NCCL needs a GPU per rank: two GPUs")
    merged = _record(tmp_path, "nccl")
    for rank in (0, 1):
        iv = merged.intervals[merged.intervals["rank"] == rank]
        coll = iv[iv["kind"] == "collective"]
        assert len(coll) >= 20, (rank, len(coll))
        assert set(coll["group"].astype(str)) == {"default_pg (pg 0)"}, set(coll["group"].astype(str))
        assert (coll["bytes"] > 0).all()
    _straggler_named(merged)
