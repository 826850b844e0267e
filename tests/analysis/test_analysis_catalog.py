"""The metric catalogue: it lists exactly the metrics the analysis computes, and the text reports and the
comparison take their labels, units and directions from it (a new entry shows up in each)."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import pytest
from analysis_traces import clean_run, pageable_run, trace

from collector.model import Trace
from webapp import PACKAGE_ROOT
from webapp.analysis import analyze, catalog
from webapp.analysis.catalog import Better, Metric, Unit
from webapp.analysis.compare import compare, compare_analyses, metrics_table
from webapp.analysis.report import analysis_text, comparison_text

SAMPLES = PACKAGE_ROOT / "sample_traces"
SAMPLE_FILES = ("naive.json.gz", "torch-profiler-overlap.pt.trace.json.gz")


def _runs() -> list[tuple[str, Trace]]:
    from collector.load import load_trace

    runs = [("pageable", pageable_run(3)), ("clean", clean_run(2)), ("empty", trace([]))]
    runs += [(name, load_trace(SAMPLES / name)) for name in SAMPLE_FILES if (SAMPLES / name).is_file()]
    return runs


@pytest.mark.parametrize("name_and_trace", _runs(), ids=lambda nt: nt[0])
def test_catalogue_lists_exactly_the_computed_metrics(name_and_trace: tuple[str, Trace]) -> None:
    computed = list(analyze(name_and_trace[1]).metrics)
    listed = [m.key for m in catalog.CATALOG]
    assert sorted(computed) == sorted(listed), {
        "computed, not catalogued": sorted(set(computed) - set(listed)),
        "catalogued, not computed": sorted(set(listed) - set(computed)),
    }


def test_entries_are_unique_immutable_and_carry_their_unit_in_the_key() -> None:
    keys = [m.key for m in catalog.CATALOG]
    labels = [m.label for m in catalog.CATALOG]
    assert len(set(keys)) == len(keys) and len(set(labels)) == len(labels)
    suffixes = tuple("_" + u.value for u in Unit)
    for m in catalog.CATALOG:
        assert m.key.endswith("_" + m.unit.value) or (m.unit is Unit.COUNT and not m.key.endswith(suffixes)), m
    with pytest.raises(dataclasses.FrozenInstanceError):
        catalog.CATALOG[0].label = "changed"  # type: ignore[misc]
    assert isinstance(catalog.CATALOG, tuple)


def test_lookups_and_fallbacks_for_unknown_keys() -> None:
    assert catalog.label("gpu_busy_frac") == "GPU busy" and catalog.unit_of("gpu_busy_frac") is Unit.FRAC
    assert catalog.direction("step_time_p90_ns") == -1 and catalog.direction("gpu_busy_frac") == 1
    assert catalog.direction("intervals") == 0 and catalog.get("intervals") is not None
    assert catalog.get("made_up_wait_ns") is None and catalog.direction("made_up_wait_ns") == 0
    assert catalog.label("made_up_wait_ns") == "made up wait" and catalog.unit_of("made_up_wait_ns") is Unit.NS
    assert catalog.unit_of("made_up") is Unit.COUNT
    assert catalog.ordered(["zzz", "ranks", "step_time_median_ns"]) == ["step_time_median_ns", "ranks", "zzz"]


def test_to_json_is_plain_and_in_catalogue_order() -> None:
    records = json.loads(json.dumps(catalog.to_json()))
    assert [r["key"] for r in records] == [m.key for m in catalog.CATALOG]
    by_key = {r["key"]: r for r in records}
    assert by_key["step_time_median_ns"] == {
        "key": "step_time_median_ns",
        "label": "Median step",
        "unit": "ns",
        "better": "lower",
        "headline": True,
        "card": True,
        "step_column": False,
        "gpu": False,
        "host_card": False,
        "host_step_column": False,
        "hint": "",
    }
    assert "share of the critical path" in by_key["cp_host_step_median_ns"]["hint"]  # sent to the pages too
    assert by_key["intervals"]["better"] is None


def test_a_run_without_gpu_work_shows_host_and_collective_figures_instead() -> None:
    assert catalog.gpu_work({"compute_busy_ns": 5.0, "transfer_busy_ns": 0.0})
    assert not catalog.gpu_work({"compute_busy_ns": 0.0, "transfer_busy_ns": 0.0, "gpu_busy_ns": 9.0})  # gloo
    assert catalog.gpu_work({})  # an analysis that does not say: as before
    gpu_cards = [m.key for m in catalog.cards(True)]
    host_cards = [m.key for m in catalog.cards(False)]
    assert "gpu_busy_frac" in gpu_cards and "host_busy_step_median_ns" not in gpu_cards
    assert host_cards == [
        "step_time_median_ns",
        "step_time_p90_ns",
        "host_busy_step_median_ns",
        "collective_step_median_ns",
        "steps",
    ]
    assert [m.key for m in catalog.step_columns(False)] == ["step_time_ns", "host_busy_ns", "collective_ns"]
    shown = {r["key"] for r in catalog.to_json(False)}
    assert not any(catalog.get(k).gpu for k in shown)  # type: ignore[union-attr]
    assert {m.key for m in catalog.headline(False)} >= {"host_busy_step_median_ns", "collective_step_median_ns"}
    assert not catalog.shown("cp_launch_step_median_ns", False) and catalog.shown("made_up_ns", False)


NEW = Metric("new_stall_ns", "Brand-new stall", Unit.NS, Better.LOWER, headline=True, card=True)


@pytest.fixture
def with_new_metric(monkeypatch: pytest.MonkeyPatch) -> Metric:
    """The catalogue plus NEW, a headline metric nothing computes yet."""
    monkeypatch.setattr(catalog, "CATALOG", (*catalog.CATALOG, NEW))
    return NEW


def test_a_new_entry_reaches_the_text_reports(with_new_metric: Metric) -> None:
    ra, rb = analyze(pageable_run(2)), analyze(clean_run(2))
    ra = dataclasses.replace(ra, metrics={**ra.metrics, NEW.key: 3_000_000.0})
    rb = dataclasses.replace(rb, metrics={**rb.metrics, NEW.key: 1_500_000.0})
    assert re.search(r"^  Brand-new stall +3\.000 ms$", analysis_text(ra), re.MULTILINE)
    text = comparison_text(compare_analyses(ra, rb))
    assert re.search(r"^Brand-new stall +3\.000 ms +1\.500 ms +-50\.0% better$", text, re.MULTILINE), text


def test_the_text_report_says_once_how_the_marked_figures_are_made() -> None:
    """The critical path's per-step rows are shares of the median step, not their own medians: a reader of
    "Path: sync waits / step 22 us" beside "Sync wait / step 15 ms" is told so, once, below the metrics."""
    text = analysis_text(analyze(pageable_run(3)))
    marked = [line for line in text.splitlines() if line.startswith("  Path: ")]
    assert marked and all(line.endswith(" *") for line in marked), marked
    assert text.count("share of the critical path") == 1
    assert re.search(r"^  \* The median step split by this part's share of the critical path", text, re.MULTILINE)
    assert not re.search(r"^  Median step +\S+ ms \*", text, re.MULTILINE)  # a figure without a hint: no mark


def test_reports_follow_the_catalogue_labels_and_order() -> None:
    result = analyze(pageable_run(2))
    lines = analysis_text(result).splitlines()
    start = lines.index("Metrics") + 1
    # the run's own figures: one it does not have (no pinned copy, no recorder cost taken out) is left out
    has = [m.label for m in catalog.headline() if math.isfinite(result.metrics[m.key])]
    assert "H2D pinned achieved" not in has and "Median step, recorder out" not in has
    shown = [line.strip().rsplit("  ", 1)[0].strip() for line in lines[start : start + len(has)]]
    assert shown == has
    compared = comparison_text(compare(pageable_run(2), clean_run(2))).splitlines()
    assert [line[:28].strip() for line in compared[1 : 1 + len(catalog.headline())]] == [
        m.label for m in catalog.headline()
    ]


def test_comparison_directions_come_from_the_catalogue(with_new_metric: Metric, monkeypatch) -> None:
    table = metrics_table({NEW.key: 2e6, "intervals": 10.0}, {NEW.key: 1e6, "intervals": 20.0})
    better = dict(zip(table["metric"], table["better"], strict=True))
    assert better == {NEW.key: True, "intervals": None}
    flipped = tuple(dataclasses.replace(m, better=Better.HIGHER) if m is NEW else m for m in catalog.CATALOG)
    monkeypatch.setattr(catalog, "CATALOG", flipped)
    table = metrics_table({NEW.key: 2e6}, {NEW.key: 1e6})
    assert table["better"].tolist() == [False]


def test_a_fraction_changes_by_points_in_the_text_comparison() -> None:
    a, b = analyze(pageable_run(2)), analyze(clean_run(2))
    text = comparison_text(compare_analyses(a, b))
    busy = next(line for line in text.splitlines() if line.startswith("GPU busy"))
    delta = 100 * (b.metrics["gpu_busy_frac"] - a.metrics["gpu_busy_frac"])
    assert re.search(rf" {re.escape(f'{delta:+.1f}')} pts( better| worse| same)?$", busy), busy
