"""Recording prints only Streamscope's own lines: Kineto's ``USDT: ... profiler_start/stop`` lines stay off the
terminal while a recorder's torch.profiler session runs, and the user's own log level is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from collector.recording.kineto_capture import KINETO_LOG_LEVEL, quiet_kineto  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import os, torch
from collector.recording.api import record
rec = record("quiet", None, probe=False, timing="cpu")
with rec:
    for _ in range(3):
        (torch.ones(64, 64) @ torch.ones(64, 64)).sum()
        rec.step()
print("level after:", os.environ.get("KINETO_LOG_LEVEL"))
"""


def test_a_cpu_recording_leaves_kinetos_lines_off_the_terminal() -> None:
    env = {k: v for k, v in os.environ.items() if k != KINETO_LOG_LEVEL}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "USDT" not in done.stderr and "profiler_st" not in done.stderr, done.stderr[-2000:]
    assert "level after: None" in done.stdout


def test_the_users_own_kineto_level_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KINETO_LOG_LEVEL, "2")
    restore = quiet_kineto()
    assert os.environ[KINETO_LOG_LEVEL] == "2"
    restore()
    assert os.environ[KINETO_LOG_LEVEL] == "2"
    monkeypatch.delenv(KINETO_LOG_LEVEL)
    restore = quiet_kineto()
    assert os.environ[KINETO_LOG_LEVEL] == "6"
    restore()
    assert KINETO_LOG_LEVEL not in os.environ
