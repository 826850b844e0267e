"""The lifecycle every timing source shares (collector.recording.base.Recorder), driven through a timing source
that times nothing: what it is asked to do and when, the steps and marks, the error, the notes and the write; and
what every registered source (collector.recording.sources.TIMING_SOURCES) takes from the base."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
import torch

from collector.model import Marker, MarkerKind, RunMeta, Trace
from collector.recording.base import Recorder
from collector.recording.sources import TIMING_SOURCES
from collector.traceformat import read_trace
from collector.traceformat.deflate import usable_cpus


class Untimed(Recorder):
    """Steps and marks only: each hook notes that it ran."""

    timing = "untimed"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[str] = []

    def _begin(self) -> None:
        self.calls.append("begin")
        self._undo.append(lambda: self.calls.append("undo"))

    def _step_ended(self) -> None:
        self.calls.append(f"ended {self._step}")

    def _step_skipped(self, start: int, end: int) -> None:
        assert start <= end
        self.calls.append(f"skipped {self._step}")

    def _next_step(self, was_on: bool) -> None:
        self.calls.append(f"next {int(was_on)}{int(self._on)}")

    def _halt(self) -> None:
        self.calls.append("halt")

    def _end(self, step_open: bool, error: str) -> Trace:
        self.calls.append(f"end {int(step_open)}")
        marks = [Marker(self.rank, MarkerKind(kind), name, a, b, step) for kind, name, a, b, step in self._markers]
        return Trace.build(RunMeta.new(workload=self.workload, error=error), [], [], marks)


def test_cupti_events_and_cpu_are_registered_cupti_first() -> None:
    assert list(TIMING_SOURCES)[:3] == ["cupti", "events", "cpu"]
    assert [TIMING_SOURCES[name].needs_cuda for name in ("cupti", "events", "cpu")] == [True, True, False]


@pytest.mark.parametrize("name", list(TIMING_SOURCES))
def test_every_timing_source_shares_the_base_and_its_options(name: str) -> None:
    cls = TIMING_SOURCES[name]
    assert issubclass(cls, Recorder) and cls.timing == name and cls.summary
    options: dict[str, Any] = {"every": 3, "rank": 2, "source": "s", "command": "c", "auto_steps": True}
    rec = cls("w", "o.json", probe=False, calibrate=False, stacks=False, **options)  # no source filters them
    assert (rec.workload, rec.out, rec.timing) == ("w", "o.json", name)
    assert (rec.every, rec.rank, rec.source, rec.command, rec.auto_steps) == tuple(options.values())
    assert (rec.calibrate, rec.stacks) == (False, False)
    assert cls("w").stacks and cls("w").calibrate
    misspelt: dict[str, Any] = {"no_such_option": 1}
    with pytest.raises(TypeError, match="no_such_option"):  # an option no source has is still an error
        cls("w", **misspelt)


def test_every_other_step_is_recorded_and_the_hooks_run_in_order() -> None:
    rec = Untimed("w", every=2)
    with rec:
        for i in range(4):
            if i == 1:
                rec.mark("in a skipped step")
            rec.step()
        rec.mark("in a recorded step")
    assert rec.calls == [
        "begin",
        *("ended 0", "next 10", "skipped 1", "next 01", "ended 2", "next 10", "skipped 3", "next 01"),
        *("halt", "undo", "end 1"),
    ]
    assert rec.trace is not None and rec.stop() is rec.trace and rec.calls[-1] == "end 1"
    markers = rec.trace.markers
    assert list(markers.loc[markers["kind"] == MarkerKind.STEP.value, "step"]) == [0, 2]
    assert dict(zip(markers["name"], markers["step"], strict=True))["in a skipped step"] == -1
    assert dict(zip(markers["name"], markers["step"], strict=True))["in a recorded step"] == 4


def test_once_each_and_the_error_the_workload_ended_with() -> None:
    with pytest.raises(RuntimeError, match="never started"):
        Untimed().stop()
    rec = Untimed()
    with pytest.raises(KeyError), rec:
        raise KeyError("k")
    assert rec.error == "KeyError: 'k'" and rec.trace is not None and rec.trace.meta.error == rec.error
    with pytest.raises(RuntimeError, match="already started"):
        rec.start()
    clean = Untimed()
    with pytest.raises(SystemExit), clean:
        raise SystemExit(0)
    assert clean.error == "" and clean.trace is not None


def test_the_base_writes_timing_every_rank_and_the_host_s_cpus_into_the_notes() -> None:
    rec = Untimed("w", every=2, rank=1)
    with rec:
        rec.step()
    assert rec.trace is not None
    assert dict(rec.trace.meta.notes) == {
        "timing": "untimed",
        "every": 2,
        "rank": 1,
        "host_cpus": usable_cpus(),
        "torch_threads": torch.get_num_threads(),
    }
    assert usable_cpus() >= 1

    class Noted(Untimed):
        def _end(self, step_open: bool, error: str) -> Trace:
            trace = super()._end(step_open, error)
            notes = {"timing": "fallback", "timing_note": "n", "every": 2, "rank": 0, "host_cpus": 3}
            return trace.with_meta(notes=notes)

    noted = Noted("w", rank=5)
    with noted:
        pass
    assert noted.trace is not None  # a source's own values stay (a fallback's timing, a merged rank)
    assert list(noted.trace.meta.notes.items()) == [
        ("timing", "fallback"),
        ("timing_note", "n"),
        ("every", 2),
        ("rank", 0),
        ("host_cpus", 3),
        ("torch_threads", torch.get_num_threads()),  # left out by the source: added after its own
    ]
    assert noted._noted(noted.trace) is noted.trace  # nothing left out: the source's trace as it is
    partial = Untimed("w")._noted(noted.trace.with_meta(notes={"timing_note": "n"}))
    # what it left out comes last
    assert list(partial.meta.notes) == ["timing_note", "timing", "every", "rank", "host_cpus", "torch_threads"]


def test_auto_steps_after_each_optimizer_step_and_the_trace_written(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = tmp_path / "run" / "w.json.gz"
    with Untimed("w", str(out), auto_steps=True) as rec:
        for _ in range(3):
            opt.step()
    assert rec.calls.count("ended 0") == 1 and "ended 2" in rec.calls and rec.out == str(out)
    assert len(read_trace(str(out)).markers) == 3
    opt.step()  # the hook is gone with the recording
    assert "ended 3" not in rec.calls


class GcWatching(Untimed):
    """Notes whether Python's garbage collector could run while it started and stopped."""

    def _begin(self) -> None:
        super()._begin()
        self.calls.append(f"gc {int(gc.isenabled())}")

    def _end(self, step_open: bool, error: str) -> Trace:
        self.calls.append(f"gc {int(gc.isenabled())}")
        return super()._end(step_open, error)


@pytest.mark.parametrize("enabled", [True, False])
def test_start_and_stop_hold_the_garbage_collector_off_and_leave_it_as_found(enabled: bool) -> None:
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        rec = GcWatching("w").start()
        assert gc.isenabled() is enabled  # the workload runs with the collector as it was
        rec.stop()
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert [c for c in rec.calls if c.startswith("gc")] == ["gc 0", "gc 0"]


def test_a_stop_that_fails_still_gives_the_garbage_collector_back() -> None:
    class Failing(Untimed):
        def _end(self, step_open: bool, error: str) -> Trace:
            raise RuntimeError("no trace")

    assert gc.isenabled()
    rec = Failing("w").start()
    with pytest.raises(RuntimeError, match="no trace"):
        rec.stop()
    assert gc.isenabled()
