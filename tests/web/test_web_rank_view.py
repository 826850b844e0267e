"""The summary lanes API (GET /api/runs/<id>/ranks), /timeline of chosen ranks and the step grid."""

from __future__ import annotations

from ranks.ranks_traces import MS, job

from collector.ranks.merge import merge_traces
from webapp.ingest import add_trace


def test_ranks_api_and_timeline_of_chosen_ranks(client, store) -> None:
    info = add_trace(store, merge_traces(job(4, slow_rank=2, delay_ns=8 * MS)), "job (4 ranks)")
    base = f"/api/runs/{info.id}"
    res = client.get(base + "/ranks?width_px=300")
    assert res.status_code == 200
    body = res.get_json()
    assert [r["rank"] for r in body["ranks"]] == [0, 1, 2, 3] and body["bins"] == 300
    two = client.get(base + "/ranks?width_px=300&ranks=1,3").get_json()
    assert [r["rank"] for r in two["ranks"]] == [1, 3]
    assert two["ranks"][0]["comm"] == body["ranks"][1]["comm"]
    lanes = client.get(base + "/timeline?width_px=300&ranks=1").get_json()["lanes"]
    assert lanes and {ln["rank"] for ln in lanes} == {1}
    assert client.get(base + "/timeline?width_px=300&ranks=none").get_json()["lanes"] == []
    bad = client.get(base + "/ranks?ranks=one")
    assert bad.status_code == 400 and "parameter ranks" in bad.get_json()["error"]
    assert client.get(base + "/ranks?start_ns=10&end_ns=5").status_code == 400
    assert client.get("/api/runs/nope/ranks").status_code == 404
    grid = client.get(base + "/analysis").get_json()["ranks"]["grid"]
    assert grid["ranks"] == [0, 1, 2, 3] and len(grid["wait_ns"][0]) == 12


def test_analysis_has_rank_heatmaps_for_several_ranks_only(client, store, two_runs) -> None:
    info = add_trace(store, merge_traces(job(4, slow_rank=2, delay_ns=8 * MS)), "job (4 ranks)")
    figs = client.get(f"/api/runs/{info.id}/analysis").get_json()["rank_figures"]
    assert set(figs) == {"step_time_ns", "wait_ns"}
    heat = figs["wait_ns"]["data"][0]
    assert heat["type"] == "heatmap" and heat["y"] == [0, 1, 2, 3] and heat["x"] == list(range(12))
    assert max(heat["z"][2]) < 0.1 and min(heat["z"][0]) > 7  # ms: rank 2 is waited for, it hardly waits
    one = client.get(f"/api/runs/{two_runs[0].id}/analysis").get_json()
    assert one["rank_figures"] == {}


def test_compare_of_multi_rank_runs_has_the_per_rank_table_and_notes(client, store) -> None:
    a = add_trace(store, merge_traces(job(4, slow_rank=2, delay_ns=8 * MS)), "slow (4 ranks)")
    b = add_trace(store, merge_traces(job(4, seed=1)), "fixed (4 ranks)")
    body = client.get(f"/api/compare?a={a.id}&b={b.id}").get_json()
    assert [r["rank"] for r in body["ranks"]] == [0, 1, 2, 3]
    assert body["ranks"][0]["delta_wait_ns"] < -7 * MS
    assert any(n.startswith("Straggler A: rank 2") for n in body["notes"])
    page = client.get(f"/compare?a={a.id}&b={b.id}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'id="cmp-ranks-card"' in html and "Straggler A: rank 2" in html and 'id="cmp-rank"' in html
    data = html[html.index("window.STREAMSCOPE") :]
    assert '"delta_wait_ns"' in data and '"rank":3' in data.replace(" ", "")
