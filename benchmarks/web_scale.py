"""Web app at scale: server time and size per timeline view, first paint and zoom redraw in Chromium.

Builds a data folder with a 100-interval run and two 10-million-interval runs (``stress`` and a synthetic
``overlap`` loop), times opening the stress run's saved index against rebuilding it from Parquet, starts
``streamscope serve`` on a free port, then

0. asks for the first timeline views of each big run, cold (not yet in the server's memory), and reports
   the server's time to open the run and to build the view;

1. asks the timeline API for views of the big run (whole run, 10%, 1%, one step, 0.1%, 0.001%) and
   reports the server's own time (``Server-Timing``), the wall time and the answer's size;
2. in one headless Chromium session, opens each run page five times (small first, so plotly.js and the
   static files are in the browser cache for both) and reports the median first paint (navigation start
   to the timeline drawn with data) and the ratio big / small;
3. on the big run's page, once it has settled (step chart drawn), zooms and pans five times and reports each redraw
   (input to redrawn with the
   new data, debounce included).

Writes the figures into the ``## web_scale`` section of benchmarks/RESULTS.md.
Usage: python3 benchmarks/web_scale.py [--intervals 10000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from results_file import write_section

if TYPE_CHECKING:
    from collector.model import Trace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEW_BUDGET_MS, VIEW_BUDGET_BYTES, PAINT_RATIO, ZOOM_BUDGET_MS = 150.0, 1_000_000, 1.2, 1000.0
COLD_RESTARTS = 3


def stress_trace(n: int, ranks: int = 2, seed: int = 0) -> Trace:
    """``n`` intervals on 4 lanes per rank with lognormal durations and random gaps: every zoom level
    has structure, so views hit the box budgets (the synthetic training loops merge into few boxes)."""
    import numpy as np
    import pandas as pd

    from collector.model import Lane, LaneKind, Marker, MarkerKind, RunMeta, Trace, conform_intervals

    rng = np.random.default_rng(seed)
    kinds = [LaneKind.CPU_THREAD, LaneKind.TRANSFER_STREAM, LaneKind.COMPUTE_STREAM, LaneKind.OTHER_STREAM]
    lane_kinds = {
        LaneKind.CPU_THREAD: ["launch", "cpu_op", "sync_wait"],
        LaneKind.TRANSFER_STREAM: ["memcpy_h2d", "memcpy_d2h"],
        LaneKind.COMPUTE_STREAM: ["kernel"],
        LaneKind.OTHER_STREAM: ["kernel", "memset"],
    }
    lanes = [Lane(r, k, i, f"rank {r} {k.value}") for r in range(ranks) for i, k in enumerate(kinds)]
    per = n // len(lanes)
    cols: dict[str, list[np.ndarray]] = {
        c: [] for c in ("lane", "rank", "lane_kind", "stream", "lane_label", "kind", "start_ns", "end_ns", "step")
    }
    span = 0
    for i, lane in enumerate(lanes):
        dur = np.maximum(200, rng.lognormal(np.log(4000), 1.0, per)).astype(np.int64)
        gap = rng.exponential(3000, per).astype(np.int64) * (rng.random(per) < 0.6)
        start = np.cumsum(dur + gap) - dur
        span = max(span, int(start[-1] + dur[-1]))
        choices = lane_kinds[lane.kind]
        for name, value in (
            ("lane", np.full(per, i)),
            ("rank", np.full(per, lane.rank)),
            ("lane_kind", np.full(per, lane.kind.value)),
            ("stream", np.full(per, lane.ident)),
            ("lane_label", np.full(per, lane.label)),
            ("kind", np.array(choices)[rng.integers(0, len(choices), per)]),
            ("start_ns", start),
            ("end_ns", start + dur),
            ("step", start * 20 // (span or 1)),
        ):
            cols[name].append(value)
    frame = pd.DataFrame({k: np.concatenate(v) for k, v in cols.items()})
    frame["step"] = np.minimum(19, frame["start_ns"] * 20 // span)
    frame["name"] = pd.Categorical.from_codes(
        rng.integers(0, 500, len(frame)), pd.Index([f"op_{j}" for j in range(500)])
    )
    steps = [
        Marker(r, MarkerKind.STEP, f"step {s}", s * span // 20, (s + 1) * span // 20, s)
        for r in range(ranks)
        for s in range(20)
    ]
    meta = RunMeta.new(source="synthetic", workload="stress", device_name="synthetic")
    markers = Trace.build(meta, lanes, [], steps).markers
    return Trace(meta, tuple(lanes), conform_intervals(frame), markers)


def build_data(folder: Path, n_big: int) -> dict[str, str]:
    from collector.synthetic import synthetic_trace
    from webapp.ingest import add_trace
    from webapp.store import Store

    store = Store(folder)
    small = add_trace(store, synthetic_trace(100, pattern="overlap", steps=4), "small (100 intervals)")
    ids = {"small": small.id}
    for key, make in (
        ("big", lambda: stress_trace(n_big)),  # stored first: the server warms only the newest
        ("loop", lambda: synthetic_trace(n_big, pattern="overlap", steps=20)),
    ):
        t = time.perf_counter()
        trace = make()
        t_gen = time.perf_counter() - t
        t = time.perf_counter()
        ids[key] = add_trace(store, trace, f"{key} ({len(trace.intervals):,} intervals)").id
        print(
            f"{key}: generated {len(trace.intervals):,} intervals in {t_gen:.1f} s, stored (analysis, "
            f"Parquet, overview) in {time.perf_counter() - t:.1f} s",
            flush=True,
        )
    store.set_setting("samples_imported", "1")
    return ids


def cold_load_seconds(folder: Path, run_id: str) -> tuple[float, float, float, int]:
    """(seconds to open the big run's saved index in a fresh store, seconds to read its Parquet file and
    build the index as a fresh server must for a run stored without one, seconds to save the index as
    ingest does, bytes of the saved index)."""
    import shutil

    from webapp.analysis.lod import RunIndex
    from webapp.index_files import save_index
    from webapp.store import Store, read_run_file

    t = time.perf_counter()
    store = Store(folder, cache_runs=1)
    store.index(run_id)
    opened = time.perf_counter() - t
    t = time.perf_counter()
    index = RunIndex(read_run_file(store.run_path(run_id)))
    rebuilt = time.perf_counter() - t
    scratch = Path(tempfile.mkdtemp(prefix="web-scale-index-")) / "copy.lod"
    t = time.perf_counter()
    save_index(index, scratch)
    saved = time.perf_counter() - t
    shutil.rmtree(scratch.parent, ignore_errors=True)
    size = sum(f.stat().st_size for f in store.lod_path(run_id).iterdir())
    return opened, rebuilt, saved, size


def cold_views(base: str, ids: dict[str, str]) -> list[tuple[str, str, float, float, float]]:
    """The first timeline views of each big run from a server just started on the data folder (the run
    not yet in its memory): (run, view, ms to open the run, ms to build the answer, wall ms)."""
    rows = []
    catalog = {r["id"]: r for r in json.loads(fetch(f"{base}/api/runs")[0])["runs"]}  # no run is opened
    for key in ("big", "loop"):
        span = catalog[ids[key]]["end_ns"] - catalog[ids[key]]["start_ns"]
        for view, query in (
            ("whole run (first request)", ""),
            ("1% (next request)", f"&start_ns={span // 2}&end_ns={span // 2 + span // 100}"),
        ):
            url = f"{base}/api/runs/{ids[key]}/timeline?width_px=1240{query}"
            _, wall, lod_ms, _, open_ms = fetch_timed(url)
            rows.append(("stress" if key == "big" else key, view, open_ms, lod_ms, wall))
            print(rows[-1], flush=True)
    return rows


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "webapp.cli", "serve", "--port", str(port), "--data", str(folder), "--no-samples"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/", timeout=2):
                return proc, base
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("server did not start")


def fetch(url: str, gz: bool = False) -> tuple[bytes, float, float, int]:
    """(body, wall ms, server ms from Server-Timing, bytes on the wire)."""
    return fetch_timed(url, gz)[:4]


def fetch_timed(url: str, gz: bool = False) -> tuple[bytes, float, float, int, float]:
    """(body, wall ms, server ms building the view, bytes on the wire, server ms opening the run)."""
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if gz else {})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as resp:
        raw = resp.read()
        timing = resp.headers.get("Server-Timing", "")
        enc = resp.headers.get("Content-Encoding", "")
    wall = (time.perf_counter() - t) * 1000
    m = re.search(r"dur=([0-9.]+)", timing)
    o = re.search(r"open;dur=([0-9.]+)", timing)
    body = gzip.decompress(raw) if enc == "gzip" else raw
    return (body, wall, float(m.group(1)) if m else float("nan"), len(raw), float(o.group(1)) if o else float("nan"))


def view_table(base: str, run_id: str, span: int, width: int) -> list[dict[str, object]]:
    views = [
        ("whole run", 0, span),
        ("10%", int(span * 0.45), int(span * 0.55)),
        ("one step (5%)", int(span * 0.30), int(span * 0.35)),
        ("1%", int(span * 0.5), int(span * 0.51)),
        ("0.3%", int(span * 0.2), int(span * 0.203)),
        ("0.1%", int(span * 0.6), int(span * 0.601)),
        ("0.01%", int(span * 0.8), int(span * 0.8001)),
        ("0.001%", int(span * 0.7), int(span * 0.70001)),
    ]
    rows = []
    for name, a, b in views:
        url = f"{base}/api/runs/{run_id}/timeline?start_ns={a}&end_ns={b}&width_px={width}"
        samples = [fetch(url) for _ in range(5)]
        body = samples[0][0]
        data = json.loads(body)
        boxes = [len(ln["s"]) + len(ln["bs"]) for ln in data["lanes"]]
        _, _, _, wire = fetch(url, gz=True)
        rows.append(
            {
                "view": name,
                "server_ms": statistics.median(s[2] for s in samples),
                "wall_ms": statistics.median(s[1] for s in samples),
                "bytes": len(body),
                "gzip_bytes": wire,
                "boxes": sum(boxes),
                "max_lane_boxes": max(boxes),
            }
        )
        print(rows[-1], flush=True)
    return rows


def browser_figures(base: str, ids: dict[str, str]) -> dict[str, object]:
    from playwright.sync_api import sync_playwright

    paint_js = """() => new Promise((resolve) => {
        const done = () => resolve(window.ssTimeline.stats.firstPaintMs);
        if (window.ssTimeline && window.ssTimeline.stats.firstPaintMs !== null) return done();
        document.getElementById('timeline').addEventListener('tl-firstpaint', done, {once: true});
    })"""
    zoom_js = """(action) => new Promise((resolve) => {
        const tl = window.ssTimeline, root = document.getElementById('timeline');
        const t0 = performance.now();
        root.addEventListener('tl-drawn', () => resolve(performance.now() - t0), {once: true});
        const [a, b] = tl.view, w = b - a;
        if (action === 'in4') tl.zoom(0.25);
        else if (action === 'in10') tl.zoom(0.1);
        else if (action === 'pan') tl.pan(0.5);
        else if (action === 'in100') tl.zoom(0.01);
        else tl.reset();
    })"""
    out: dict[str, object] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        paints: dict[str, list[float]] = {"small": [], "big": []}
        for _ in range(5):
            for key in ("small", "big"):
                page.goto(f"{base}/runs/{ids[key]}")
                paints[key].append(float(page.evaluate(paint_js)))
        out["first_paint_ms"] = {k: statistics.median(v) for k, v in paints.items()}
        out["first_paint_all_ms"] = paints
        out["paint_ratio"] = out["first_paint_ms"]["big"] / out["first_paint_ms"]["small"]  # type: ignore[index]
        page.wait_for_selector("#step-chart .main-svg")  # let the page settle: plotly.js parsed, chart drawn
        zooms = []
        for action in ("in4", "in10", "pan", "in100", "reset"):
            zooms.append((action, float(page.evaluate(zoom_js, action))))
        out["zoom_ms"] = zooms
        page.screenshot(path=str(REPO / "test-output" / "web_scale_big.png"))
        browser.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--intervals", type=int, default=10_000_000)
    ap.add_argument("--keep", help="data folder to build in and keep (default: a temporary one)")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="web-scale-"))
    (REPO / "test-output").mkdir(exist_ok=True)
    ids = build_data(folder, args.intervals)
    open_s, rebuild_s, save_s, lod_bytes = cold_load_seconds(folder, ids["big"])
    print(f"big run: saved index opened in {open_s * 1000:.1f} ms; Parquet + index build {rebuild_s:.1f} s", flush=True)
    restarts = []
    for _ in range(COLD_RESTARTS):  # a fresh server each time, asked nothing before
        proc, base = start_server(folder)
        try:
            restarts.append(cold_views(base, ids))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    cold = [
        (r[0][0], r[0][1], *(statistics.median(x[i] for x in r) for i in (2, 3, 4)))
        for r in zip(*restarts, strict=True)
    ]
    proc, base = start_server(folder)
    try:
        runs, views = {}, []
        for key in ("loop", "big"):  # both runs in memory first (the server warms the newest in the background)
            fetch(f"{base}/api/runs/{ids[key]}/timeline?width_px=100")
        for key in ("loop", "big"):
            runs[key] = json.loads(fetch(f"{base}/api/runs/{ids[key]}")[0])["run"]
            span = runs[key]["end_ns"] - runs[key]["start_ns"]
            views += [{"run": key, **v} for v in view_table(base, ids[key], span, 1240)]
        browser = browser_figures(base, ids)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    fp = browser["first_paint_ms"]
    lines = [
        f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node() or 'this machine'} "
        f"({os.cpu_count()} cores, Python {platform.python_version()}), headless Chromium (software rendering), "
        f"`python3 benchmarks/web_scale.py --intervals {args.intervals}`; load average before the run "
        f"{load_before:.2f} (other work on the machine inflates the times).",
        "",
        f"Two big runs: **loop**, a synthetic training loop (`synthetic_trace`, overlap pattern) of "
        f"{runs['loop']['intervals']:,} intervals on {runs['loop']['lanes']} lanes, whose back-to-back kernels "
        f"merge into few boxes; and **stress**, {runs['big']['intervals']:,} intervals on {runs['big']['lanes']} "
        "lanes with random durations and gaps, so that middle zoom levels hit the box budgets (2,000 per lane, "
        "10,000 per view). Timeline views at 1,240 px (median of 5; server time from the Server-Timing header; "
        f"budget {VIEW_BUDGET_MS:.0f} ms and {VIEW_BUDGET_BYTES / 1e6:.0f} MB per view):",
        "",
        "| run | view | server ms | wall ms | JSON bytes | gzip bytes | boxes | max per lane |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for v in views:
        name = "stress" if v["run"] == "big" else "loop"
        lines.append(
            f"| {name} | {v['view']} | {v['server_ms']:.1f} | {v['wall_ms']:.1f} | {v['bytes']:,} | "
            f"{v['gzip_bytes']:,} | {v['boxes']:,} | {v['max_lane_boxes']:,} |"
        )
    worst_ms = max(float(v["server_ms"]) for v in views)  # type: ignore[arg-type]
    worst_b = max(int(v["bytes"]) for v in views)  # type: ignore[call-overload]
    zooms = browser["zoom_ms"]
    lines += [
        "",
        f"Worst view: {worst_ms:.1f} ms server time ({'meets' if worst_ms <= VIEW_BUDGET_MS else 'MISSES'} "
        f"{VIEW_BUDGET_MS:.0f} ms), {worst_b:,} bytes ({'meets' if worst_b <= VIEW_BUDGET_BYTES else 'MISSES'} 1 MB).",
        "",
        f"First paint of the run page (navigation start to timeline drawn, median of 5 in one browser session): "
        f"100-interval run {fp['small']:.0f} ms, stress run {fp['big']:.0f} ms, ratio "  # type: ignore[index]
        f"**{browser['paint_ratio']:.2f}x** (budget {PAINT_RATIO}x).",
        "",
        "Zoom/pan redraws on the stress run once the page has settled (input to redrawn with new data, 90 ms "
        "debounce included): "
        + ", ".join(f"{a} {ms:.0f} ms" for a, ms in zooms)  # type: ignore[attr-defined]
        + f"; worst {max(ms for _, ms in zooms):.0f} ms (budget {ZOOM_BUDGET_MS:.0f} ms).",  # type: ignore[attr-defined]
        "",
        "Cold start (a run not in the server's memory, after a restart or evicted from its cache): the "
        "run's level-of-detail index is saved at ingest as memory-mapped `.npy` files "
        f"(`runs/<id>.lod/`, {lod_bytes / 1e6:,.0f} MB for the stress run, written in {save_s:.1f} s at ingest); "
        f"a fresh store opens it in {open_s * 1000:.1f} ms. Reading the Parquet file and building the index "
        f"instead, the only way before and still the fallback for runs stored without a saved index (whose "
        f"index is then saved in the background), takes {rebuild_s:.2f} s. First timeline views of a server "
        f"just started on the data folder (median of {COLD_RESTARTS} restarts; the server warms only the "
        "newest run, **loop**, in the background; `open` is the server time to get the run's index, `lod` "
        "to build the answer):",
        "",
        "| run | first views after a restart | open ms | lod ms | server ms | wall ms |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, view, open_ms, lod_ms, wall_ms in cold:
        lines.append(f"| {name} | {view} | {open_ms:.1f} | {lod_ms:.1f} | {open_ms + lod_ms:.1f} | {wall_ms:.1f} |")
    worst_cold = max(c[2] + c[3] for c in cold)
    lines += [
        "",
        f"Worst first view after a restart: {worst_cold:.1f} ms server time "
        f"({'meets' if worst_cold <= VIEW_BUDGET_MS else 'MISSES'} {VIEW_BUDGET_MS:.0f} ms).",
    ]
    text = "\n".join(lines)
    print(text)
    write_section("web_scale", "\n" + text.strip())
    if not args.keep:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
