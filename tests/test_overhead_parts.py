"""benchmarks/overhead_parts.py's segments of a framework loop, with a stub loop and recorder in place of the
GPU ones: which part each mode switches off, and that it is switched back on after."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import overhead_parts as op  # noqa: E402

from collector.recording import gcspans  # noqa: E402

INSTALL = gcspans.GcSpans.install
"""The recorder's hook that times collections, as installed."""


class Loop:
    """Records, per run, whether the steps were marked and whether collections were being timed."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []

    def run(self, n: int, on_step: Any = None) -> float:
        off = gcspans.GcSpans.install is not INSTALL
        self.runs.append({"steps": n, "marked": on_step is not None, "gc_hook_off": off})
        return 0.004


@pytest.fixture
def recorders(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The options of every recorder started, in order; each records nothing."""
    made: list[dict[str, Any]] = []

    class Stub:
        def __init__(self, options: dict[str, Any]) -> None:
            self.options = options

        def start(self) -> None:
            made.append(self.options)

        def stop(self) -> None:
            pass

        def step(self) -> None:
            pass

    import collector.recording.api as api

    monkeypatch.setattr(api, "record", lambda name, out, **options: Stub(options))
    return made


@pytest.mark.parametrize(
    ("mode", "stacks", "gc_off"),
    [("rec", True, False), ("rec-nostacks", False, False), ("rec-nogc", True, True), ("rec-bare", True, False)],
)
def test_each_recorder_mode_switches_off_its_part_for_the_segment(
    recorders: list[dict[str, Any]], mode: str, stacks: bool, gc_off: bool
) -> None:
    loop = Loop()
    assert op.pair_segment(loop, 12, mode) == 0.004
    assert recorders == [{"probe": False, "auto_steps": True, "stacks": stacks}]
    assert loop.runs == [{"steps": 12, "marked": True, "gc_hook_off": gc_off}]
    assert gcspans.GcSpans.install is INSTALL  # switched back on after the segment


def test_a_plain_segment_starts_no_recorder_and_marks_no_steps(recorders: list[dict[str, Any]]) -> None:
    loop = Loop()
    assert op.pair_segment(loop, 5, "plain") == 0.004
    assert recorders == [] and loop.runs == [{"steps": 5, "marked": False, "gc_hook_off": False}]


def test_an_unknown_mode_is_refused(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["overhead_parts.py", "--pairs", "lightning-mlp", "--modes", "rec,rec-fast"])
    with pytest.raises(SystemExit) as stop:
        op.main()
    assert stop.value.code == 2 and "unknown modes: rec-fast" in capsys.readouterr().err


def test_a_demo_loop_s_segment_marks_each_step_without_auto_steps(
    recorders: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regime loop's step function runs as a loop of its own: the recorder marks a step after each, as it
    did before it shared the pairs' segment, and no step after an optimizer step on top."""
    monkeypatch.setattr(op, "sync", lambda: None)
    ran: list[int] = []
    total, first = op.segment(lambda: ran.append(1), 3, "rec-nostacks")
    assert ran == [1, 1, 1] and total >= first >= 0
    assert recorders == [{"probe": False, "auto_steps": False, "stacks": False}]


def test_a_step_function_as_a_loop_calls_on_step_after_each_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(op, "sync", lambda: None)
    order: list[str] = []
    loop = op.Steps(lambda: order.append("step"))
    loop.run(2, on_step=lambda: order.append("mark"))
    assert order == ["step", "mark", "step", "mark"] and loop.first > 0
