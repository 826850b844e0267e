"""GPU tests: lanes labelled by what the thread is, and a recording that survives a bad or failing --out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("timing", ["cupti", "events"])
def test_a_training_loop_has_one_main_thread_and_an_autograd_thread(timing: str) -> None:
    from collector.demos import loops
    from collector.model import LaneKind
    from collector.recording.api import record

    rec = record("demo:naive", None, probe=False, source="demo", timing=timing)
    loops.run_demo("naive", rec, steps=4, quiet=True)
    trace = rec.trace
    cpu = [ln.label for ln in trace.lanes if ln.kind is LaneKind.CPU_THREAD]
    assert cpu.count("main thread") == 1
    iv = trace.intervals
    on_threads = (iv["lane_kind"] == "cpu_thread") & (iv["kind"] != "sample")  # not the sampled stacks' lane
    backward = iv[iv["name"].astype(str).str.contains("backward") & on_threads]
    assert len(backward) and set(backward["lane_label"].astype(str)) <= {
        ln for ln in cpu if ln.startswith("autograd thread ")
    }


def test_record_into_a_missing_folder_on_the_gpu(tmp_path: Path) -> None:
    out = tmp_path / "new" / "naive.json.gz"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "webapp.cli", "record", "--steps", "3", "--out", str(out), "demo:naive"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.exists()


def test_a_failing_writer_saves_the_gpu_trace_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """--out's folder became a file while the job ran: the trace lands in the fallback folder, printed."""
    from collector.demos import loops
    from collector.load import load_trace
    from collector.recording.api import record
    from collector.traceformat import save

    (tmp_path / "run").write_text("not a folder")
    spare = tmp_path / "spare"
    spare.mkdir()
    monkeypatch.setenv(save.FALLBACK_DIR_ENV, str(spare))
    rec = record("demo:naive", str(tmp_path / "run" / "naive.json.gz"), probe=False, source="demo")
    loops.run_demo("naive", rec, steps=3, quiet=True)
    assert rec.out == str(spare / "naive.json.gz")
    assert save.saved_path(capsys.readouterr().err.splitlines()) == rec.out
    assert len(load_trace(rec.out).steps()) == 3
