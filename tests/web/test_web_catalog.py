"""The pages take metric labels, units, directions and placement from the metric catalogue: the run page's
cards, the compare page's tables and the catalogue each page sends to its scripts."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from collector.synthetic import synthetic_trace
from webapp.analysis import RunAnalysis, catalog
from webapp.analysis.catalog import Better, Metric, Unit
from webapp.analysis.compare import metrics_table
from webapp.analysis.records import frame_records
from webapp.analysis.version import analysis_version
from webapp.figures import compare_rows, format_value, metric_cards
from webapp.formatting import fmt_bytes
from webapp.ingest import add_trace
from webapp.pipeline import analyze_dict


def page_data(html: str) -> dict[str, Any]:
    """The page's window.STREAMSCOPE object."""
    found = re.search(r"<script>window\.STREAMSCOPE = (.*?);</script>", html)
    assert found, "the page sends no data"
    data: dict[str, Any] = json.loads(found.group(1))
    return data


def relabel(key: str, label: str, headline: bool | None = None) -> tuple[Metric, ...]:
    """The catalogue with ``key``'s entry relabelled (and made headline or not)."""
    out = []
    for m in catalog.CATALOG:
        if m.key == key:
            m = dataclasses.replace(m, label=label, headline=m.headline if headline is None else headline)
        out.append(m)
    return tuple(out)


NEW = Metric("new_stall_ns", "Brand-new stall", Unit.NS, Better.LOWER, headline=True, card=True)


def test_cards_and_compare_rows_follow_the_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog, "CATALOG", (*catalog.CATALOG, NEW))
    cards = metric_cards({"step_time_median_ns": 21_500_000, "intervals": 9, NEW.key: 2_500_000})
    assert [c["key"] for c in cards] == ["step_time_median_ns", NEW.key]  # intervals is no card
    assert cards[1] == {"key": NEW.key, "label": "Brand-new stall", "value": "2.5 ms", "ranks": "", "hint": ""}
    rows = compare_rows(frame_records(metrics_table({NEW.key: 2e6}, {NEW.key: 1e6})))
    assert rows[0]["label"] == "Brand-new stall" and rows[0]["a"] == "2 ms" and rows[0]["cls"] == "better"
    assert format_value("gpu_busy_frac", 0.5) == "50.0%" and format_value("pageable_copy_bytes", 2e9) == "1.86 GiB"
    assert format_value("h2d_pinned_achieved_gbps", 25.04) == "25 GB/s" and format_value("steps", 7.0) == "7"


@pytest.mark.parametrize(
    "nbytes, shown",
    [
        (0, "0 B"),
        (1000, "1000 B"),
        (32 * 1024, "32 KiB"),
        (64 * 2**20, "64 MiB"),
        (67.1e6, "64 MiB"),  # what a decimal formatter shows as 67.1 MB
        (6403.1 * 2**20, "6.25 GiB"),
        (2 * 1024**3, "2 GiB"),
        (1000 * 2**20, "1000 MiB"),  # never 1e+03
        (-3 * 2**20, "-3 MiB"),
        (None, "—"),
    ],
)
def test_sizes_are_in_binary_units(nbytes: float | None, shown: str) -> None:
    assert fmt_bytes(nbytes) == shown


def test_run_page_sends_the_catalogue_and_shows_its_cards(client, two_runs, monkeypatch) -> None:
    a, _ = two_runs
    html = client.get(f"/runs/{a.id}").get_data(as_text=True)
    assert page_data(html)["metrics_catalog"] == catalog.to_json()
    card_keys = re.findall(r'<div class="metric" data-key="([^"]+)"', html)
    # every card the run has a figure for: no collectives in this run, so no Collectives card
    assert card_keys == [m.key for m in catalog.cards() if m.key != "collective_step_median_ns"]

    monkeypatch.setattr(catalog, "CATALOG", (*relabel("step_time_median_ns", "Typical step"), NEW))
    html = client.get(f"/runs/{a.id}").get_data(as_text=True)
    sent = {m["key"]: m for m in page_data(html)["metrics_catalog"]}
    assert sent[NEW.key] == NEW.to_dict() and sent["step_time_median_ns"]["label"] == "Typical step"
    assert '<div class="k">Typical step</div>' in html and '<div class="k">Median step</div>' not in html


def test_compare_page_places_metrics_by_the_catalogue(client, two_runs, monkeypatch) -> None:
    a, b = two_runs
    url = f"/compare?a={a.id}&b={b.id}"
    html = client.get(url).get_data(as_text=True)
    assert page_data(html)["metrics_catalog"] == catalog.to_json()
    head, rest = html.split("<details>", 1)
    # every catalogued figure in order, but one neither run has (no collectives, no pinned copy in either)
    metrics = [client.get(f"/api/runs/{r.id}/analysis").get_json()["metrics"] for r in (a, b)]

    def has(key: str) -> bool:
        return any(isinstance(m.get(key), (int, float)) and m[key] == m[key] for m in metrics)

    headline = re.findall(r'<td class="wrap" title="([^"]+)">', head)
    assert headline == [m.key for m in catalog.headline() if has(m.key)]
    assert "collective_step_median_ns" not in headline and "step_time_median_ns" in headline
    others = re.findall(r'<td class="wrap" title="([^"]+)">', rest.split("</details>", 1)[0])
    assert others == [m.key for m in catalog.CATALOG if not m.headline and has(m.key)]
    # a run total among them is named as one (the per-step column it sums keeps its label in the step table)
    assert '<td class="wrap" title="step_time_ns">Step time, total over the steps</td>' in rest
    assert '<td class="wrap" title="step_time_p90_ns">p90 step</td>' in head

    monkeypatch.setattr(catalog, "CATALOG", relabel("intervals", "Interval count", headline=True))
    html = client.get(url).get_data(as_text=True)
    head, rest = html.split("<details>", 1)
    assert '<td class="wrap" title="intervals">Interval count</td>' in head
    assert 'title="intervals"' not in rest
    assert {m["key"]: m for m in page_data(html)["metrics_catalog"]}["intervals"]["headline"] is True


def test_a_failed_analysis_is_stored_as_an_empty_analysis(store, client, monkeypatch) -> None:
    import webapp.analysis

    def broken(_trace: object) -> RunAnalysis:
        raise RuntimeError("boom")

    monkeypatch.setattr(webapp.analysis, "analyze", broken)
    trace = synthetic_trace(300, steps=2)
    failed = analyze_dict(trace)
    empty = RunAnalysis.from_dict({}).to_dict()
    assert failed.keys() == empty.keys() | {"analysis_version"}
    assert failed == empty | {"notes": ["analysis failed: boom"], "summary": {}, "analysis_version": analysis_version()}
    info = add_trace(store, trace, "unlucky run")
    assert store.analysis(info.id)["notes"] == ["analysis failed: boom"]
    assert client.get(f"/runs/{info.id}").status_code == 200
    assert client.get(f"/compare?a={info.id}&b={info.id}").status_code == 200


def test_a_run_without_collectives_has_no_collectives_card() -> None:
    """A single CPU process has host figures, no collective ones; CPU ranks have both."""
    from analysis.analysis_traces import CPU, MS, iv, steps, trace
    from ranks.ranks_traces import job

    from collector.ranks.merge import merge_traces
    from webapp.analysis import analyze

    rows = [iv(CPU, "cpu_op", k * 10 * MS, k * 10 * MS + 6 * MS, "aten::mm", step=k) for k in range(3)]
    alone = analyze(trace(rows, steps(*[(k * 10 * MS, (k + 1) * 10 * MS) for k in range(3)]))).metrics
    ranks = analyze(merge_traces(job(world=2, steps=4))).metrics
    assert "collective_step_median_ns" not in [c["key"] for c in metric_cards(alone)]
    assert "collective_step_median_ns" in [c["key"] for c in metric_cards(ranks)]


def test_a_card_of_ranks_that_stand_apart_names_the_lowest_and_highest() -> None:
    """Two ranks, rank 1 20 ms late each step: rank 0 waits about 20 ms in each collective and rank 1 under
    1 ms, so the run's median over both ranks' steps is true of neither; the card names each one's own."""
    from ranks.ranks_traces import job

    from collector.ranks.merge import merge_traces
    from webapp.analysis import analyze

    result = analyze(merge_traces(job(world=2, steps=8, slow_rank=1, delay_ns=20_000_000)))
    per_rank = result.to_dict()["per_rank"]
    cards = {c["key"]: c for c in metric_cards(result.metrics, per_rank)}
    waits = {int(r["rank"]): r["collective_step_median_ns"] for r in per_rank}
    assert waits[0] > 15e6 and waits[1] < 2e6, waits
    text = cards["collective_step_median_ns"]["ranks"]
    assert text.startswith("rank 1 ") and ", rank 0 " in text, text
    assert cards["step_time_median_ns"]["ranks"] == ""  # the ranks step together: nothing to tell apart
    assert all(c["ranks"] == "" for c in metric_cards(result.metrics))  # a stored analysis without them


def test_ranks_apart_only_in_digits_the_card_hides_are_not_named() -> None:
    metrics = {"step_time_median_ns": 5e6, "gpu_busy_frac": 0.0003, "gpu_idle_step_median_ns": 4e6}
    per_rank: list[dict[str, Any]] = [{"rank": 0, "gpu_busy_frac": 0.0001}, {"rank": 1, "gpu_busy_frac": 0.0004}]
    assert {c["key"]: c["ranks"] for c in metric_cards(metrics, per_rank)}["gpu_busy_frac"] == ""
    per_rank = [{"rank": 0, "gpu_busy_frac": None}, {"rank": 1, "gpu_busy_frac": 0.40}]  # NaN as stored
    assert {c["key"]: c["ranks"] for c in metric_cards(metrics, per_rank)}["gpu_busy_frac"] == ""
    per_rank = [{"rank": 0, "gpu_busy_frac": 0.10}, {"rank": 1, "gpu_busy_frac": 0.40}]
    assert {c["key"]: c["ranks"] for c in metric_cards(metrics, per_rank)}[
        "gpu_busy_frac"
    ] == "rank 0 10.0%, rank 1 40.0%"
