"""The timeline's exploring API: launch/sync links, queue depth, range stats and name search, checked
against brute-force answers computed from the run DataFrame and against the analysis."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collector.model import COPY_KINDS, GPU_KINDS
from collector.synthetic import synthetic_trace
from webapp.analysis import analyze
from webapp.ingest import add_trace

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
GPU = [k.value for k in GPU_KINDS]


@pytest.fixture
def naive(store):
    trace = synthetic_trace(1500, pattern="naive", steps=4)
    return add_trace(store, trace, "naive"), trace.intervals


def _frame(store, run_id: str) -> pd.DataFrame:
    return store.load(run_id).intervals


def test_a_kernel_links_to_its_launch_and_back(client, store, naive) -> None:
    info, _ = naive
    df = _frame(store, info.id)
    kernel = df[(df["kind"] == "kernel") & (df["launch_id"] >= 0)].iloc[5]
    launch = df[df["id"] == kernel["launch_id"]].iloc[0]
    body = client.get(f"/api/runs/{info.id}/links?id={kernel['id']}").get_json()
    assert body["interval"]["id"] == kernel["id"]
    [link] = [lk for lk in body["links"] if lk["relation"] == "launch"]
    assert link["src"]["id"] == launch["id"] and link["dst"]["id"] == kernel["id"]
    assert link["delay_ns"] == kernel["start_ns"] - launch["end_ns"]
    back = client.get(f"/api/runs/{info.id}/links?id={launch['id']}").get_json()
    launched = set(df.loc[df["launch_id"] == launch["id"], "id"])
    assert {lk["dst"]["id"] for lk in back["links"]} == launched and kernel["id"] in launched


def test_a_sync_wait_links_to_the_gpu_work_it_waited_for(client, store, naive) -> None:
    info, _ = naive
    df = _frame(store, info.id)
    gpu = df[df["kind"].isin(GPU)]
    for _, sync in df[df["kind"] == "sync_wait"].iterrows():
        body = client.get(f"/api/runs/{info.id}/links?id={sync['id']}").get_json()
        waited = [lk for lk in body["links"] if lk["src"]["id"] == sync["id"]]
        assert waited, sync["name"]
        # brute force: of the GPU work unfinished when the wait began, the last to end by its end
        cand = gpu[(gpu["end_ns"] > sync["start_ns"]) & (gpu["end_ns"] <= sync["end_ns"])]
        ids = {lk["dst"]["id"] for lk in waited}
        if not cand.empty and all(lk["relation"] == "waited" for lk in waited):
            assert ids == {cand.loc[cand["end_ns"].idxmax(), "id"]}


def test_links_on_an_imported_torch_profiler_trace(client, store) -> None:
    from collector.load import load_trace

    info = add_trace(store, load_trace(SAMPLES / "torch-profiler-overlap.pt.trace.json.gz"), "kineto")
    df = _frame(store, info.id)
    kernel = df[(df["kind"] == "kernel") & (df["launch_id"] >= 0)].iloc[0]
    body = client.get(f"/api/runs/{info.id}/links?id={kernel['id']}").get_json()
    [link] = body["links"]
    assert link["src"]["kind"] == "launch" and link["src"]["name"].startswith("cuda")
    assert link["dst"]["id"] == kernel["id"]


def test_links_bad_input(client, naive) -> None:
    info, _ = naive
    assert client.get(f"/api/runs/{info.id}/links?id=999999999").status_code == 404
    bad = client.get(f"/api/runs/{info.id}/links?id=abc")
    assert bad.status_code == 400 and "id" in bad.get_json()["error"]
    assert client.get("/api/runs/0123456789abcdef/links?id=1").status_code == 404


def _brute_queue(df: pd.DataFrame, lane: int) -> tuple[np.ndarray, np.ndarray]:
    """(enqueue, end) ns of the GPU ops of one lane, from the DataFrame directly."""
    ends = df.set_index("id")["end_ns"]
    ops = df[(df["lane"] == lane) & df["kind"].isin(GPU)]
    linked = ops["launch_id"] >= 0
    launch_end = ends.reindex(ops["launch_id"]).to_numpy()
    q = np.where(linked, np.minimum(np.nan_to_num(launch_end, nan=0), ops["start_ns"]), ops["start_ns"])
    return q.astype(np.int64), ops["end_ns"].to_numpy(np.int64)


@pytest.mark.parametrize("window", [(0.0, 1.0), (0.3, 0.31), (0.52, 0.9)])
def test_queue_depth_matches_a_brute_force_count(client, store, naive, window) -> None:
    info, _ = naive
    df = _frame(store, info.id)
    origin = int(df["start_ns"].min())
    span = int(df["end_ns"].max()) - origin
    a, b = int(span * window[0]), int(span * window[1]) + 1
    width = 37
    body = client.get(f"/api/runs/{info.id}/queue?start_ns={a}&end_ns={b}&width_px={width}").get_json()
    gpu_lanes = sorted(df.loc[df["kind"].isin(GPU), "lane"].unique())
    assert [ln["lane"] for ln in body["lanes"]] == gpu_lanes
    edges = origin + a + (np.arange(width + 1) * ((b - a) / width)).astype(np.int64)
    edges[-1] = origin + b
    for lane in body["lanes"]:
        q, e = _brute_queue(df, lane["lane"])
        for k in range(width):
            lo, hi = edges[k], edges[k + 1]
            pts = np.unique(np.concatenate([[lo], q[(q > lo) & (q < hi)], e[(e > lo) & (e < hi)]]))
            depth = ((q[None, :] <= pts[:, None]) & (e[None, :] > pts[:, None])).sum(axis=1)
            horizon = np.where(q[None, :] <= pts[:, None], e[None, :], 0).max(axis=1)
            lead = np.maximum(0, horizon - pts)  # nothing queued yet: horizon 0, lead 0
            assert lane["depth"][k] == depth.max(), (lane["lane"], k)
            assert lane["lead_ns"][k] == lead.max(), (lane["lane"], k)
    if window == (0.0, 1.0):
        assert max(max(ln["depth"]) for ln in body["lanes"]) > 1  # the host queued ahead at times


def test_queue_bad_input(client, naive) -> None:
    info, _ = naive
    for query in ("start_ns=10&end_ns=5", "width_px=0", "width_px=x", "rank=x"):
        r = client.get(f"/api/runs/{info.id}/queue?{query}")
        assert r.status_code == 400 and r.get_json()["error"], query


def test_range_stats_equal_the_analysis_on_each_step(client, store) -> None:
    trace = synthetic_trace(3000, pattern="overlap", steps=5)
    info = add_trace(store, trace, "overlap")
    per_step = analyze(store.load(info.id)).per_step
    origin = info.start_ns
    assert per_step["copy_compute_overlap_ns"].sum() > 0
    for row in per_step.to_dict("records"):
        q = f"start_ns={row['start_ns'] - origin}&end_ns={row['end_ns'] - origin}"
        body = client.get(f"/api/runs/{info.id}/range?{q}").get_json()
        for key in ("gpu_busy_ns", "compute_busy_ns", "transfer_busy_ns", "copy_compute_overlap_ns", "exposed_copy_ns"):
            assert body[key] == row[key], (row["step"], key)
        assert body["gpu_busy_frac"] == pytest.approx(row["gpu_busy_frac"])
        assert body["top_ops"] and body["top_ops"][0]["total_ns"] >= body["top_ops"][-1]["total_ns"]


def test_range_stats_from_prefix_sums_equal_brute_force(store) -> None:
    """Random windows (and the whole run) on a 2-rank run: the prefix-sum path equals clipping the run's
    intervals to the window; a part of a rank's lanes is clipped and unioned on the spot."""
    from webapp.analysis import intervals as iv
    from webapp.analysis.rangestats import range_stats

    info = add_trace(store, synthetic_trace(4000, ranks=2, pattern="overlap", steps=5), "two ranks")
    index = store.index(info.id)
    df = _frame(store, info.id)
    kinds = {"gpu": GPU, "compute": ["kernel", "memset"], "copy": [k.value for k in COPY_KINDS]}

    def brute(a: int, b: int, lanes: list[int]) -> dict[str, int]:
        part = df[df["lane"].isin(lanes) & (df["start_ns"] < b) & (df["end_ns"] > a)]
        out = dict.fromkeys(("gpu", "compute", "copy", "overlap"), 0)
        for _, rows in part.groupby(part["lane"].map(lambda ln: index.lanes[ln].rank)):
            seg = {}
            for name, ks in kinds.items():
                sel = rows[rows["kind"].isin(ks)]
                seg[name] = iv.union(np.maximum(sel["start_ns"], a), np.minimum(sel["end_ns"], b))
                out[name] += seg[name].total
            out["overlap"] += iv.intersect(seg["copy"], seg["compute"]).total
        return out | {"intervals": len(part)}

    rng = np.random.default_rng(1)
    lo, hi = index.origin_ns, index.end_ns
    windows = [(lo, hi)] + [tuple(sorted(rng.integers(lo, hi, 2))) for _ in range(20)]
    rank1 = [i for i, ln in enumerate(index.lanes) if ln.rank == 1]
    for lanes in (list(range(len(index.lanes))), rank1, rank1[1:]):
        for a, b in windows:
            got = range_stats(index, int(a), int(b) + 1, lanes)
            want = brute(int(a), int(b) + 1, lanes)
            assert (got.gpu_busy_ns, got.compute_busy_ns, got.transfer_busy_ns) == (
                want["gpu"],
                want["compute"],
                want["copy"],
            ), (lanes, a, b)
            assert got.copy_compute_overlap_ns == want["overlap"] and got.intervals == want["intervals"]
    assert range_stats(index, lo, hi).copy_compute_overlap_ns > 0


def test_range_sync_wait_is_the_clipped_wait_time(client, store, naive) -> None:
    info, _ = naive
    df = _frame(store, info.id)
    origin = int(df["start_ns"].min())
    syncs = df[df["kind"] == "sync_wait"]
    a, b = int(syncs["start_ns"].iloc[1]) - 1000, int(syncs["end_ns"].iloc[1]) - 500
    body = client.get(f"/api/runs/{info.id}/range?start_ns={a - origin}&end_ns={b - origin}").get_json()
    s, e = np.maximum(syncs["start_ns"], a), np.minimum(syncs["end_ns"], b)
    assert body["sync_wait_ns"] == int(np.maximum(e - s, 0).max())  # one wait here, no overlaps
    assert client.get(f"/api/runs/{info.id}/range?start_ns=5&end_ns=5").status_code == 400


def test_search_substring_regex_and_paging(client, store, naive) -> None:
    info, _ = naive
    df = _frame(store, info.id)  # sorted by lane then start: row order is the index's
    names = df["name"].astype(str)
    want = df[names.str.lower().str.contains("gemm")]
    body = client.get(f"/api/runs/{info.id}/search?q=GEMM&limit=1000").get_json()
    assert body["total"] == len(want) > 0
    got = [(m["s"], m["row"]) for m in body["matches"]]
    assert got == sorted(got) and {m["id"] for m in body["matches"]} == set(want["id"])

    pattern = r"^aten::(item|to)$"
    regex = client.get(f"/api/runs/{info.id}/search", query_string={"q": pattern, "regex": "1"}).get_json()
    assert regex["total"] == int(names.str.match(pattern).sum()) > 0
    assert set(regex["names"]) == {n for n in set(names) if re.search(pattern, n)}

    # page forward 7 at a time, then backward: the same matches, in time order, none twice
    pages, cursor = [], None
    while True:
        q = {"q": "gemm", "limit": 7, **({"after": cursor} if cursor else {})}
        page = client.get(f"/api/runs/{info.id}/search", query_string=q).get_json()["matches"]
        if not page:
            break
        pages += page
        cursor = page[-1]["cursor"]
    assert [m["cursor"] for m in pages] == [m["cursor"] for m in body["matches"]]
    back: list[dict] = []
    cursor = pages[-1]["cursor"]
    while True:
        page = client.get(
            f"/api/runs/{info.id}/search", query_string={"q": "gemm", "limit": 5, "before": cursor}
        ).get_json()["matches"]
        if not page:
            break
        back = page + back
        cursor = page[0]["cursor"]
    assert [m["cursor"] for m in back] == [m["cursor"] for m in pages[:-1]]


def test_search_in_a_window(client, store, naive) -> None:
    info, _ = naive
    df = _frame(store, info.id)
    origin = int(df["start_ns"].min())
    a, b = 20_000_000, 40_000_000
    body = client.get(f"/api/runs/{info.id}/search?q=kernel&start_ns={a}&end_ns={b}&limit=1000").get_json()
    names = df["name"].astype(str).str.lower()
    inside = names.str.contains("kernel") & (df["end_ns"] > origin + a) & (df["start_ns"] < origin + b)
    assert body["total"] == int(inside.sum()) > 0
    assert {m["id"] for m in body["matches"]} == set(df.loc[inside, "id"])


@pytest.mark.parametrize(
    ("query", "needle"),
    [
        ({"q": "(", "regex": "1"}, "regular expression"),
        ({"q": "[a-", "regex": "1"}, "regular expression"),
        ({}, "missing parameter q"),
        ({"q": "x" * 600}, "longer than"),
        ({"q": "mm", "after": "nope"}, "cursor"),
        ({"q": "mm", "limit": "0"}, "limit"),
    ],
)
def test_search_bad_input_is_a_400_json(client, naive, query, needle) -> None:
    info, _ = naive
    r = client.get(f"/api/runs/{info.id}/search", query_string=query)
    assert r.status_code == 400 and r.is_json
    assert needle in r.get_json()["error"] and "\n" not in r.get_json()["error"]


def test_search_without_matches(client, naive) -> None:
    info, _ = naive
    body = client.get(f"/api/runs/{info.id}/search?q=no-such-op").get_json()
    assert body == {"total": 0, "names": [], "matches": []}
