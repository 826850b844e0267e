"""benchmarks/stack_sampling.py's CPU loop: its work runs at the bottom of a deep stack, as a sample sees it."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

pytest.importorskip("torch")

import stack_sampling as ss  # noqa: E402

from collector.recording.stacks import StackSampler  # noqa: E402


def test_the_host_cpu_step_is_sampled_under_every_one_of_its_frames() -> None:
    step = ss.host_cpu_step()
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            step()

    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    try:
        sampler = StackSampler(thread_id=worker.ident)
        for _ in range(20):
            sampler.sample()
            time.sleep(0.002)
    finally:
        stop.set()
        worker.join(timeout=5)
    stacks = [text for _, _, text in sampler.stop()]
    deepest = max(text.count("layer (host_cpu.py:") for text in stacks)
    assert deepest == ss.HOST_DEPTH + 1  # layer(HOST_DEPTH) down to layer(0), which calls the work
    assert any("work (" in text for text in stacks)


def test_py_spy_s_raw_output_is_counted_by_its_lines_counts(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text("main (a.py:3);f (a.py:9) 40\nmain (a.py:3) 2\n\n")
    assert ss.raw_samples(str(raw)) == 42
    assert ss.raw_samples(str(tmp_path / "none.txt")) == 0
