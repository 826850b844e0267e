"""The registry of timing sources (collector.recording.sources): ``record()``, ``--timing`` (its choices and its
help) and the device checks all read it, so a source registered there is offered, built and checked with no
other change; a source whose ``needs_cuda`` is False records without CUDA."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest

from collector.cli import runner
from collector.model import Marker, MarkerKind, RunMeta, Trace
from collector.recording import sources
from collector.recording.api import TIMINGS, record
from collector.recording.base import NO_CUDA_MESSAGE, NoCudaError, Recorder
from collector.recording.cpu_recorder import CpuRecorder
from collector.recording.events_recorder import EventsRecorder
from collector.traceformat import read_trace


class HostOnly(Recorder):
    """A toy source that needs no CUDA device: step markers only."""

    timing = "host-only"
    needs_cuda = False
    summary = "step markers only"

    def _begin(self) -> None:
        pass

    def _end(self, step_open: bool, error: str) -> Trace:
        marks = [Marker(self.rank, MarkerKind(kind), name, a, b, step) for kind, name, a, b, step in self._markers]
        return Trace.build(RunMeta.new(workload=self.workload, error=error), [], [], marks)


class NeedsCuda(HostOnly):
    timing = "needs-cuda"
    needs_cuda = True
    summary = "a toy that needs CUDA"


@pytest.fixture
def toys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both toys registered, one line each, on a machine without CUDA outside any distributed job."""
    import torch

    monkeypatch.setitem(sources.TIMING_SOURCES, HostOnly.timing, HostOnly)
    monkeypatch.setitem(sources.TIMING_SOURCES, NeedsCuda.timing, NeedsCuda)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)


def _parse(*argv: str) -> runner.RecordRequest:
    parser = argparse.ArgumentParser()
    runner.add_record_arguments(parser)
    return runner.request_from_args(parser.parse_args(list(argv)))


def test_the_timing_names_are_the_registrys() -> None:
    assert tuple(sources.TIMING_SOURCES) == TIMINGS and TIMINGS[0] == sources.DEFAULT_TIMING
    assert all(name == cls.timing for name, cls in sources.TIMING_SOURCES.items())
    with pytest.raises(ValueError, match="timing must be one of cupti, events, cpu.*, got 'nope'"):
        record("w", timing="nope")


def test_record_and_timing_offer_a_registered_source(toys: None) -> None:
    assert type(record("w", timing="host-only", probe=False, stacks=False)) is HostOnly
    req = _parse("--timing", "host-only", "train.py")
    assert req.timing == "host-only"
    help_text = runner._timing_help()
    assert all(f"{name} ({cls.summary})" in help_text for name, cls in sources.TIMING_SOURCES.items())
    assert help_text.endswith("or needs-cuda (a toy that needs CUDA)")


def test_a_source_that_needs_no_cuda_records_a_script_without_cuda(toys: None, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nopt = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)\n"
        "for _ in range(3):\n    opt.step()\n"
    )
    out = tmp_path / "run.json.gz"
    assert runner.run_record(_parse("--timing", "host-only", "--out", str(out), str(script))) == 0
    trace = read_trace(str(out))
    assert trace.meta.notes["timing"] == "host-only" and trace.meta.notes["every"] == 1  # written by the base
    assert len(trace.steps()) == 3


def test_a_source_that_needs_cuda_is_refused_without_it(toys: None, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    with pytest.raises(NoCudaError, match=re.escape(NO_CUDA_MESSAGE)):
        runner.run_record(_parse("--timing", "needs-cuda", "--out", str(tmp_path / "r.json"), str(script)))
    with pytest.raises(NoCudaError):  # a demo that runs on the GPU needs CUDA whatever times it
        runner.run_record(_parse("--timing", "host-only", "--out", str(tmp_path / "r.json"), "demo:naive"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_the_plant_check_reads_needs_cuda(toys: None, tmp_path: Path) -> None:
    argv = ("--out", str(tmp_path / "r.json"), "demo:ddp", "--slow-rank", "0", "--slow-cause", "sync")
    with pytest.raises(runner.RecordUsageError, match="sync needs CUDA"):  # not "no CUDA device"
        runner.run_record(_parse("--timing", "host-only", *argv))
    with pytest.raises(NoCudaError):
        runner.run_record(_parse("--timing", "needs-cuda", *argv))


def test_a_rank_without_cuda_records_with_the_cpu_source(toys: None, monkeypatch: Any) -> None:
    assert sources.recorder_class("events") is EventsRecorder  # outside a distributed job: as asked
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert [sources.recorder_class(name) for name in ("cupti", "events", "needs-cuda")] == [CpuRecorder] * 3
    assert sources.recorder_class("host-only") is HostOnly
    assert type(record("w", timing="events", probe=False, calibrate=False)) is CpuRecorder
