"""What a report embeds of the timeline: a run that fits whole once, at full detail; a larger one the finest
level that fits every step, tiles only where they draw something new; notes that read correctly."""

from __future__ import annotations

import base64
import gzip
import json
import re

import pytest

from collector.ranks.merge import merge_traces
from collector.synthetic import synthetic_trace
from collector.synthetic.ranks import rank_job
from webapp.report import PreparedRun, prepare_run, run_report
from webapp.report.build import run_context
from webapp.report.embed import (
    FULL_VIEW,
    OVERVIEW,
    STEP_VIEW,
    EmbeddedView,
    _Steps,
    embed_timeline,
    focus_steps,
)

BUDGET = 1_500_000
"""Bytes: the large run below does not fit it whole (it needs about 2.4 MB)."""
BADLY_WRITTEN = re.compile(r"step -|\b1 (views|steps|intervals)\b|\(\)|[,;:] *[,;:)]|\s\s|[{}]|\bNone\b|\bnan\b")


def unpack(blob: str) -> dict:
    return json.loads(gzip.decompress(base64.b64decode(blob)))


@pytest.fixture(scope="module")
def two_ranks() -> PreparedRun:
    """A small 2-rank run: 2,612 intervals, as a short gloo job on the CPU records."""
    return prepare_run(merge_traces(rank_job(2, 1300, steps=9)), "two-ranks")


@pytest.fixture(scope="module")
def large() -> PreparedRun:
    """200,000 intervals in 10 steps: about 2.4 MB whole."""
    return prepare_run(synthetic_trace(200_000, pattern="sync-trap", steps=10), "large")


def step_windows(run: PreparedRun) -> list[tuple[int, int, int]]:
    per_step = run.analysis.per_step
    rows = per_step[per_step["rank"] == per_step["rank"].min()][["step", "start_ns", "end_ns"]]
    return [(int(s), int(a), int(b)) for s, a, b in rows.itertuples(index=False)]


def singles(view: dict) -> int:
    return sum(len(lane["s"]) for lane in unpack(view["blob"])["lanes"])


@pytest.mark.parametrize("name", ["two_ranks", "naive"])
def test_a_run_that_fits_is_embedded_whole_once_and_nothing_is_coarse(
    name: str, two_ranks: PreparedRun, prepared_samples: dict[str, PreparedRun]
) -> None:
    run = two_ranks if name == "two_ranks" else prepared_samples[name]
    ctx = run_context(run)
    views = ctx["page"]["timeline"]["views"]
    assert [v["focus"] for v in views] == [OVERVIEW, FULL_VIEW]  # no pyramid of tiles
    payload = unpack(views[1]["blob"])
    assert not views[1]["merged"] and not any(lane["bs"] for lane in payload["lanes"])
    assert singles(views[1]) == len(run.trace.intervals)
    ids = {i for lane in payload["lanes"] for i in lane["id"]}
    assert ids == set(run.trace.intervals["id"].tolist())  # each interval once
    assert ctx["page"]["timeline"]["full"] and ctx["detail"][0].endswith("nothing is coarse")
    assert not [n for n in ctx["left_out"] if "coarse" in n or "budget" in n or "merged" in n], ctx["left_out"]
    assert ctx["data_size"] < ctx["data_budget"] / 4
    html = run_report(run)
    assert "nothing is coarse" in html and 'id="left-out"' not in html


def test_a_larger_run_gets_the_finest_level_that_fits_every_step(large: PreparedRun) -> None:
    steps, focus = step_windows(large), focus_steps(large.analysis.per_step)
    levels = []
    for budget in (BUDGET // 5, BUDGET):
        emb = embed_timeline(large.index, focus, (), budget, (), steps)
        assert 0.9 * budget < emb.size_bytes <= budget and not emb.full
        note = next(n for n in emb.left_out if n.startswith("each step is embedded down to "))
        found = re.search(r"zoom level (\d+) for every view", note)
        assert found, note
        level = int(found[1])
        assert note.endswith("finer levels are over the data budget")
        for step, _, _ in steps:  # every step, not only the worst and the typical one, reaches that level
            mine = [v for v in emb.views if v.label == f"step {step}"]
            assert max(v.level for v in mine) >= level or not all(v.merged for v in mine), step
        assert emb.detail.startswith("each step in a view of its own, down to ")
        assert any(n.startswith("outside the steps") for n in emb.left_out)
        levels.append(level)
    assert levels[1] > levels[0] >= 1


def test_tiles_refine_only_what_is_merged() -> None:
    """A tile of level L + 1 lies inside a tile of level L that merges intervals: a tile drawing every interval
    one by one has no finer tiles, as any view inside it draws exactly from it."""
    run = prepare_run(synthetic_trace(200_000, pattern="sync-trap", steps=40), "sparser")
    emb = embed_timeline(run.index, focus_steps(run.analysis.per_step), (), 2_000_000, (), step_windows(run))
    tiles = [v for v in emb.views if v.focus == STEP_VIEW or v.focus >= 0]
    assert any(not v.merged for v in tiles) and max(v.level for v in tiles) >= 2

    def parents(v: EmbeddedView) -> list[EmbeddedView]:
        return [
            p
            for p in tiles
            if p.label == v.label and p.level == v.level - 1 and p.start_ns <= v.start_ns and p.end_ns >= v.end_ns
        ]

    for v in tiles:
        if v.level:
            assert any(p.merged for p in parents(v)), (v.label, v.level, v.start_ns)


def test_a_run_without_steps_is_one_window_refined_while_the_budget_lasts() -> None:
    run = prepare_run(synthetic_trace(200_000, pattern="overlap", steps=4), "x")
    emb = embed_timeline(run.index, (), budget_bytes=BUDGET)
    assert emb.views[0].focus == OVERVIEW and {v.label for v in emb.views[1:]} == {"the whole run"}
    assert max(v.level for v in emb.views) >= 2 and emb.size_bytes <= BUDGET
    assert any(n.startswith("the run has no steps, so the whole run is embedded down to ") for n in emb.left_out)
    small = prepare_run(synthetic_trace(3000, pattern="overlap", steps=4), "y")
    assert embed_timeline(small.index, (), budget_bytes=BUDGET).full


@pytest.mark.parametrize("budget", [0.05, 0.2, 1.0])
def test_every_note_reads_correctly(budget: float, prepared_samples: dict[str, PreparedRun]) -> None:
    """At any budget (`--budget-mb 0.05` wrote "up to step -; the 1 views after it")."""
    many = prepare_run(synthetic_trace(100_000, pattern="sync-trap", steps=400), "many")
    for run in (prepared_samples["naive"], prepared_samples["overlap"], many):
        ctx = run_context(run, int(budget * 2**20))
        for note in [*ctx["left_out"], *ctx["detail"]]:
            assert not BADLY_WRITTEN.search(note), note
        assert ctx["data_size"] <= ctx["data_budget"] or len(ctx["page"]["timeline"]["views"]) == 1


def test_steps_with_no_view_that_fits_say_so(large: PreparedRun) -> None:
    steps = step_windows(large)
    bare = embed_timeline(large.index, (), budget_bytes=1, steps=steps)
    assert [v.focus for v in bare.views] == [OVERVIEW]  # always the overview
    none_fit = "no view of the steps fits the data budget (one view of all 10 steps); the overview draws them"
    assert bare.left_out[0] == none_fit
    assert _Steps(1, 10, 10, [], 8).budget_note().startswith("no view of the steps fits the data budget (10 views, ")
    partial = _Steps(4, 3, 10, [object(), object()], 7)  # type: ignore[list-item]
    assert partial.budget_note() == (
        "the steps' views (3 views of 4 steps) reach step 7; the 1 view after it is over the data budget "
        "(the overview draws those steps)"
    )
