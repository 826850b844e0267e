"""benchmarks/whatif_truth.py's protocol, with stub loops in place of the GPU ones: how a round's timings are
taken and read (the predictions come from recordings, which need a GPU, and are stubbed too)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import whatif_truth as wt  # noqa: E402
from whatif_loops import Pair  # noqa: E402


class Drifting:
    """A loop whose seconds per step grow by 1% with every timing of either loop (a host slowing down), the
    fixed loop ``speedup`` times quicker than the base at the same moment; ``log`` keeps what ran, in order."""

    def __init__(self, fixed: bool, clock: list[int], log: list[str], speedup: float) -> None:
        self.fixed, self.clock, self.log, self.speedup = fixed, clock, log, speedup

    def run(self, n: int, on_step: Any = None) -> float:
        self.clock[0] += 1
        self.log.append("fixed" if self.fixed else "base")
        pace = 0.010 * (1 + 0.01 * self.clock[0])
        return pace / self.speedup if self.fixed else pace

    def close(self) -> None:
        pass


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What ran, in order: the loops' timings, full collections (``gc``) and recordings (``recorded``)."""
    events: list[str] = []
    finding = SimpleNamespace(rule="pageable-copy", detail="", severity="warning")
    result = SimpleNamespace(
        findings=[finding], metrics={}, host_frames=SimpleNamespace(head=lambda n: SimpleNamespace(itertuples=list))
    )

    def recorded(pair: Pair, loop: Any, suffix: str = "") -> Any:
        events.append("recorded")
        return result

    def predict(pair: Pair, result: Any, warm: int) -> dict[str, Any]:
        return {
            **dict(finding=finding, advised="", severity="warning", saving=2e6, now=12e6, predicted=1.2),
            **dict(pace=1.2, recorded=12e6, call_ns=0.0),
        }

    monkeypatch.setattr(wt, "_recorded", recorded)
    monkeypatch.setattr(wt, "_predict", predict)

    def collect(*generation: int) -> int:
        events.append("gc")
        return 0

    monkeypatch.setattr(wt.gc, "collect", collect)
    return events


def _pair(log: list[str], speedup: float, alternations: int = 1) -> Pair:
    clock = [0]
    return Pair(
        "stub",
        lambda fixed: Drifting(fixed, clock, log, speedup),
        "pageable-copy",
        "fix",
        10,
        alternations=alternations,
    )


@pytest.mark.parametrize("alternations", [1, 4])
def test_each_fixed_timing_is_read_against_the_base_on_its_two_sides(log: list[str], alternations: int) -> None:
    row = wt.run_pair(_pair(log, 1.25, alternations), rounds=3)
    # the host slowed 1% a timing; the base's two neighbours of each fixed timing average out that drift
    assert row["measured_each"] == pytest.approx([1.25] * 3, rel=1e-9)
    assert row["alternations"] == alternations
    assert [len(t) for t in row["fixed_timings"]] == [alternations] * 3
    assert [len(t) for t in row["base_timings"]] == [alternations + 2] * 3  # ahead, then around each fixed
    assert row["paired"] == pytest.approx(1.2 / 1.25)
    assert wt.verdicts(row) == []  # within 10%
    assert wt._alternated(row) == ("; 4 alt." if alternations == 4 else "")  # the table's measured column


def test_every_timing_and_recording_starts_after_a_full_collection(log: list[str]) -> None:
    wt.run_pair(_pair(log, 1.1, 2), rounds=2)
    assert log[:2] == ["base", "fixed"]  # each loop's warm-up, untimed
    rounds = log[2:]
    assert rounds.count("recorded") == 2
    assert rounds.count("fixed") == 4 and rounds.count("base") == 2 * (1 + 1 + 1 + 2)  # ahead, settle, around
    for i, event in enumerate(rounds):
        if event in ("base", "fixed", "recorded"):
            assert i > 0 and rounds[i - 1] == "gc", rounds[: i + 1]


def test_the_pairs_own_alternations_give_way_to_the_callers(log: list[str]) -> None:
    assert wt.run_pair(_pair(log, 1.1, 3), rounds=1)["alternations"] == 3
    assert wt.run_pair(_pair(log, 1.1, 3), rounds=1, alternations=1)["alternations"] == 1


@pytest.mark.parametrize("traces", [False, True])
def test_the_fixed_loop_is_recorded_beside_the_base_where_traces_are_kept(
    log: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, traces: bool
) -> None:
    """A fix that pays is recorded only where the recordings are kept (``--traces``), once, after the rounds:
    its trace beside the base's shows where a prediction and the fix part."""
    suffixes: list[str] = []
    stub = wt._recorded

    def recorded(pair: Pair, loop: Any, suffix: str = "") -> Any:
        suffixes.append(suffix)
        return stub(pair, loop, suffix)

    monkeypatch.setattr(wt, "_recorded", recorded)
    monkeypatch.setattr(wt, "TRACES", [tmp_path] if traces else [])
    wt.run_pair(_pair(log, 1.25), rounds=2)
    assert suffixes == (["", "-1", "-fixed"] if traces else ["", "-1"])
