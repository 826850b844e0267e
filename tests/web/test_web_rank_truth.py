"""Every figure on a run page is true of its run: each card of several ranks names the ranks where they stand
apart, and a card of a run's collectives has the Collectives tab behind it, one rank or many."""

from __future__ import annotations

import re

import pytest
from ranks.ranks_traces import MS, nccl_job

from collector.ranks.merge import merge_traces
from webapp.analysis import analyze, catalog
from webapp.figures import metric_cards
from webapp.ingest import add_trace
from webapp.report import prepare_run, run_report

HOST_CARD = "cp_host_step_median_ns"


def test_every_card_has_each_ranks_own_figure() -> None:
    result = analyze(merge_traces(nccl_job(world=2, delay_ns=0)))
    cards = {m.key for gpu in (True, False) for m in catalog.cards(gpu)}
    assert HOST_CARD in cards
    assert cards <= set(result.per_rank.columns)


def test_the_host_work_card_names_the_rank_whose_host_works_longer() -> None:
    """Rank 1's host works 20 ms more each step: that is its critical path, while rank 0 waits for it in the
    all_reduce. The run's figure, over both ranks' steps, is true of neither; the card names each one's own."""
    result = analyze(merge_traces(nccl_job(world=2, delay_ns=0, slow_host_ns=20 * MS)))
    per_rank = result.to_dict()["per_rank"]
    host = {int(r["rank"]): r[HOST_CARD] for r in per_rank}
    assert host[1] > 15 * MS and host[0] < 0.1 * MS, host
    card = {c["key"]: c for c in metric_cards(result.metrics, per_rank)}[HOST_CARD]
    assert host[0] < result.metrics[HOST_CARD] < host[1]
    assert re.fullmatch(r"rank 0 [\d.]+ µs, rank 1 [\d.]+ ms", card["ranks"]), card["ranks"]


def test_each_ranks_path_adds_up_to_its_own_median_step() -> None:
    result = analyze(merge_traces(nccl_job(world=2, delay_ns=0, slow_host_ns=20 * MS)))
    parts = result.per_rank.filter(regex=r"^cp_\w+_step_median_ns$")
    assert len(parts.columns) == 7
    assert parts.sum(axis=1).to_numpy() == pytest.approx(result.per_rank["step_time_median_ns"].to_numpy())


def test_ranks_alike_get_no_rank_line_and_one_rank_its_runs_figures() -> None:
    alike = analyze(merge_traces(nccl_job(world=2, delay_ns=0)))
    assert all(c["ranks"] == "" for c in metric_cards(alike.metrics, alike.to_dict()["per_rank"]))
    alone = analyze(nccl_job(world=1)[0])
    row = alone.per_rank.iloc[0]
    for part in ("host", "launch", "compute", "comm", "other"):
        key = f"cp_{part}_step_median_ns"
        assert row[key] == pytest.approx(alone.metrics[key]), key


def test_a_one_rank_run_with_collectives_has_the_collectives_tab(client, store, two_runs) -> None:
    """One GPU rank that runs an NCCL all_reduce each step: its Collectives card has the tab behind it, which
    lists each collective with its duration (no skew, wait or last rank: there is no other rank)."""
    info = add_trace(store, nccl_job(world=1)[0], "one rank, nccl")
    html = client.get(f"/runs/{info.id}").get_data(as_text=True)
    assert 'data-key="collective_step_median_ns"' in html
    assert re.search(r'id="tab-colls-button">Collectives<', html)
    rows = client.get(f"/api/runs/{info.id}/analysis").get_json()["ranks"]["collectives"]
    assert len(rows) == 10
    assert rows[0] == {
        "seq": 0,
        "name": "all_reduce",
        "group": "default_pg (pg 0)",
        "bytes": 4 << 20,
        "dur_ns": 300_000,
    }
    plain = client.get(f"/runs/{two_runs[0].id}").get_data(as_text=True)  # no collectives: no card, no tab
    assert 'data-key="collective_step_median_ns"' not in plain
    assert re.search(r'id="tab-colls-button" hidden>', plain)


def test_the_report_of_a_one_rank_run_with_collectives_has_the_tab() -> None:
    run = prepare_run(nccl_job(world=1)[0], "one rank, nccl")
    html = run_report(run)
    assert re.search(r'id="tab-colls-button">Collectives<', html)
    assert run.analysis_dict["ranks"]["collective_count"] == 10


def test_the_rank_count_is_said_once_in_the_header_not_again_as_a_card() -> None:
    result = analyze(merge_traces(nccl_job(world=2, delay_ns=0)))
    keys = [c["key"] for c in metric_cards(result.metrics, result.to_dict()["per_rank"])]
    assert "steps" in keys and "ranks" not in keys, keys
