"""Every figure on a page is true of its run, read from the page in a real Chromium and checked against the run's
stored analysis: one run of each kind (single GPU, a recorded 2-rank gloo run on CPUs, a synthetic 2-rank NCCL
job, a synthetic 2-rank gloo job on GPUs, a torch.profiler import) and the compare page. Also: keys page-wide,
wheel zoom only over the timeline, lanes labelled by what they are, each rank's step lines marked as its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serving import REPO, running_server
from timeline_page import legend_and_drawn

from webapp.analysis import catalog
from webapp.analysis.report import what_if_rows
from webapp.figures import compare_metric_rows, metric_cards
from webapp.formatting import fmt_change, fmt_ns

pytestmark = [pytest.mark.browser, pytest.mark.multiprocess]  # the site records a 2-rank gloo job

FIRST_PAINT = "window.ssTimeline && window.ssTimeline.stats.firstPaintMs !== null"
SAMPLES = REPO / "sample_traces"
KINDS = ("naive", "gloo-ddp", "nccl-ranks", "gloo-cuda-ranks", "torch-profiler-overlap")


def _gloo_run(folder: Path) -> Path:
    """A 2-rank gloo job recorded by ``streamscope record --nproc 2`` (rank 1 planted slow on data)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = folder / "gloo-ddp.json.gz"
    args = ["--nproc", "2", "demo:ddp", "--steps", "6", "--slow-rank", "1", "--delay-ms", "30", "--out", str(out)]
    cmd = [sys.executable, "-m", "webapp.cli", "record", *args]
    done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    for rank_file in folder.glob("gloo-ddp.rank*.json.gz"):
        rank_file.unlink()
    return out


HOST_NOTE = {
    "sampled": "the recorder's sampled stacks",
    "traced": "torch.profiler's Python calls, exact",
    "cpu_ops": "by CPU op",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, dict[str, Any]]]]:
    """A server holding one run of each kind (and overlap, to compare with naive); yields (base url,
    name -> {"run": catalog row, "analysis": its stored analysis})."""
    from gloo_cuda_traces import rank_trace

    from collector.ranks.merge import merge_traces
    from collector.synthetic.gloo_cuda import ddp_job
    from collector.synthetic.ranks import rank_job
    from collector.traceformat.write import write_trace

    root = tmp_path_factory.mktemp("truth")
    samples = root / "samples"
    samples.mkdir()
    for name in ("naive.json.gz", "overlap.json.gz", "torch-profiler-overlap.pt.trace.json.gz"):
        shutil.copy(SAMPLES / name, samples / name)
    job = rank_job(2, 6000, steps=6, ranks_per_host=2, slow_rank=1, delay_ns=8_000_000)
    write_trace(merge_traces(job), str(samples / "nccl-ranks.json.gz"))
    gloo_cuda = [rank_trace(r, r.calls) for r in ddp_job(2, steps=6, side_streams=3)]
    write_trace(merge_traces(gloo_cuda), str(samples / "gloo-cuda-ranks.json.gz"))
    _gloo_run(samples)
    data = root / "data"
    with running_server(samples, data, cwd=root) as (base, _proc):
        rows = json.load(urllib.request.urlopen(base + "/api/runs", timeout=30))["runs"]
        runs = {}
        for row in rows:
            with urllib.request.urlopen(f"{base}/api/runs/{row['id']}/analysis", timeout=60) as resp:
                runs[row["name"]] = {"run": row, "analysis": json.loads(resp.read())}
        yield base, runs


def _open(page: Any, base: str, run: dict[str, Any]) -> None:
    page.goto(f"{base}/runs/{run['run']['id']}")
    page.wait_for_function(FIRST_PAINT)


def _drawn_texts(page: Any) -> list[str]:
    """The texts the timeline draws on its canvas in one redraw."""
    return page.evaluate(
        """() => { const tl = ssTimeline, ctx = tl.ctx, texts = [], orig = ctx.fillText;
                   ctx.fillText = function (t, x, y) { texts.push(String(t)); return orig.call(this, t, x, y); };
                   try { tl.draw(); } finally { ctx.fillText = orig; }
                   return texts; }"""
    )


@pytest.mark.parametrize("name", KINDS)
def test_every_figure_on_the_run_page_is_the_runs(name: str, site, page, shot) -> None:
    base, runs = site
    run, analysis = runs[name]["run"], runs[name]["analysis"]
    metrics, findings = analysis["metrics"], analysis["findings"]
    gpu = catalog.gpu_work(metrics)
    assert gpu == (name != "gloo-ddp")  # the gloo ranks ran on CPUs; the others have GPU work
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    _open(page, base, runs[name])
    page.wait_for_function("document.querySelector('#steps-table thead') !== null")

    # header and notes
    assert page.inner_text("#run-name") == run["name"] and "/" not in run["name"]
    assert (
        page.eval_on_selector_all(".run-head + ul.notes li", "els => els.map(e => e.textContent)") == analysis["notes"]
    )
    # number cards: exactly the catalogue's cards for this kind of run, with the analysis' values
    cards = page.eval_on_selector_all(
        ".metrics .metric",
        "els => els.map(e => [e.dataset.key, e.querySelector('.v').textContent, e.querySelector('.k').textContent, "
        "(e.querySelector('.r') || {}).textContent || ''])",
    )
    per_rank = analysis.get("per_rank") or []
    assert cards == [[c["key"], c["value"], c["label"], c["ranks"]] for c in metric_cards(metrics, per_rank)]
    keys = [k for k, _, _, _ in cards]
    assert ("gpu_busy_frac" in keys) == gpu and all(catalog.shown(k, gpu) for k in keys)
    assert ("host_busy_step_median_ns" in keys) == (not gpu)
    # findings, each with the cost it states
    listed = page.eval_on_selector_all(
        "#findings li[data-finding]", "els => els.map(e => [e.dataset.rule, e.querySelector('.cost').textContent])"
    )
    assert listed == [[f["rule"], f"costs about {fmt_ns(f['cost_per_step_ns'])} per step"] for f in findings]
    # the what-if: one row per finding it applies, labelled with the finding's title and the saving it has
    rows = page.eval_on_selector_all(
        "#whatif .whatif-row", "els => els.map(e => [e.dataset.rule, ...[...e.children].map(c => c.textContent)])"
    )
    expect = what_if_rows(analysis["what_if"], findings)
    assert rows == [[r["rule"], r["title"], f"−{fmt_ns(r['saving_ns'])} / step"] for r in expect]
    assert {r["rule"] for r in expect} <= {f["rule"] for f in findings}
    # the per-step table: rank, step and the catalogue's step columns for this kind of run, the analysis' numbers
    head = page.eval_on_selector_all("#steps-table thead th", "els => els.map(e => e.textContent)")
    columns = ["rank", "step", *(m.key for m in catalog.step_columns(gpu))]
    assert head == ["Rank", "Step", *(m.label for m in catalog.step_columns(gpu))]
    first = page.eval_on_selector_all("#steps-table tbody tr:first-child td", "els => els.map(e => e.dataset.v)")
    want = [analysis["per_step"][0][c] for c in columns]
    assert [v is None for v in first] == [w is None for w in want]  # a missing value is shown as such
    assert [float(v) for v in first if v is not None] == pytest.approx([float(w) for w in want if w is not None])
    page.click(".tabs button[data-tab='tab-kernels']")
    kernel_head = page.eval_on_selector_all("#kernels-table thead th", "els => els.map(e => e.textContent)")
    assert ("GPU share" in kernel_head) == gpu
    # the host-time table: the analysis' frames, with a note that says what they are read from
    page.click(".tabs button[data-tab='tab-host']")
    basis, frames = analysis["host_frames_basis"], analysis["host_frames"]
    # Python calls in the torch.profiler trace, sampled stacks in the recorded sample; none in a synthetic run,
    # whose ops are named in their first step only: no table rather than one of those ops
    assert basis == {
        "torch-profiler-overlap": "traced",
        "naive": "sampled",
        "nccl-ranks": "",
        "gloo-cuda-ranks": "",
    }.get(name, basis)
    note = page.inner_text("#host-note")
    assert HOST_NOTE[basis] in note if basis else note == analysis["host_frames_missing"]
    if name == "nccl-ranks":  # Streamscope's own format without stacks: says so, not "record with Streamscope"
        assert "before the recorder sampled them" in note
    shown = page.eval_on_selector_all("#host-table tbody tr td:first-child", "els => els.map(e => e.textContent)")
    assert shown == ([f["frame"] for f in frames] or ["nothing to show"])
    wide, room = page.evaluate(
        "[document.querySelector('#host-table').scrollWidth, document.querySelector('#tab-host').clientWidth]"
    )
    assert wide <= room  # long frames wrap: the numbers stay in view
    # the timeline: a queue track under each stream of the user's GPU work only (not under gloo's comm lanes,
    # which are host threads, nor its copy streams); the legend lists exactly the kinds drawn
    views = page.evaluate("ssTimeline.lanes.filter(r => !r.header && !r.extra)")
    lanes = [(v["rank"], v["kind"], v["label"]) for v in views]
    queues = page.evaluate("ssTimeline.lanes.filter(r => r.extra === 'queue').length")
    assert queues == (sum(1 for v in views if v["kind"] != "cpu_thread" and v["queue"]) if gpu else 0)
    host_run = [v for v in views if v["kind"] == "comm_stream" and not v["queue"]]
    assert bool(host_run) == (name in ("gloo-ddp", "gloo-cuda-ranks"))
    kinds_in_legend, drawn = legend_and_drawn(page)
    assert kinds_in_legend == drawn
    legend = page.eval_on_selector_all("#tl-legend span", "els => els.map(e => e.textContent)")
    assert ("queued ops (queue track)" in legend) == bool(queues)
    # lanes labelled by what they are: one main thread per rank, the others named
    for r in {rank for rank, _, _ in lanes}:
        cpu = [label.removeprefix(f"rank {r} ") for rank, kind, label in lanes if rank == r and kind == "cpu_thread"]
        assert cpu.count("main thread") == 1 and len(set(cpu)) == len(cpu), cpu
    texts = _drawn_texts(page)
    if host_run:
        assert "comm thread" in texts and "comm stream" not in texts  # gloo's comm lanes are host threads
    if name == "gloo-cuda-ranks":  # gloo's 3 copy streams of each rank on one row until opened
        copies = [v for v in views if v["group"] == "gloo copies"]
        assert len(copies) == 6 and all(v["stacked"] for v in copies) and texts.count("▸ gloo copies") == 2
        assert "3 streams on one row · click" in texts
    # each rank's step lines are marked as its own
    if run["ranks"] > 1:
        assert any(t.startswith("r0 step ") for t in texts) and any(t.startswith("r1 step ") for t in texts)
    else:
        assert any(t.startswith("step ") for t in texts) and not any(t.startswith("r0 step") for t in texts)
    shot(page, f"truth-{name}")
    assert errors == []


@pytest.mark.parametrize("name", KINDS)
def test_the_what_if_applies_exactly_the_listed_findings(name: str, site) -> None:
    """The contract of RunAnalysis.what_if the pages render: a saving_<rule>_ns for exactly each listed
    finding, equal to that finding's cost per step, the straggler's included on runs of several ranks
    (``saving_applied_ns`` is their total, not a rule)."""
    _, runs = site
    analysis = runs[name]["analysis"]
    savings = {k: v for k, v in analysis["what_if"].items() if k.startswith("saving_") and k != "saving_applied_ns"}
    expect = {f"saving_{f['rule'].replace('-', '_')}_ns": f["cost_per_step_ns"] for f in analysis["findings"]}
    assert savings.keys() == expect.keys()
    assert all(savings[k] == pytest.approx(v, rel=1e-6, abs=1) for k, v in expect.items())
    if runs[name]["run"]["ranks"] > 1 and any(f["rule"] == "straggler" for f in analysis["findings"]):
        assert "saving_straggler_ns" in savings
    if name == "gloo-ddp":  # its rank 1 is planted slow
        assert "saving_straggler_ns" in savings


def test_the_compare_page_says_which_run_is_the_baseline_and_means_its_numbers(site, page, shot) -> None:
    base, runs = site
    page.goto(base + "/")
    ids = {name: runs[name]["run"]["id"] for name in ("naive", "overlap")}
    page.check(f".pick-run[value='{ids['naive']}']")  # naive ticked first: the baseline, whatever the table order
    page.check(f".pick-run[value='{ids['overlap']}']")
    page.click("#compare-btn")
    page.wait_for_url(f"**/compare?a={ids['naive']}&b={ids['overlap']}")
    page.wait_for_function("window.ssCompare && ssCompare.a.data && ssCompare.b.data")
    roles = page.inner_text("#cmp-roles")
    assert roles.startswith("A naive is the baseline") and "B overlap" in roles
    assert "(baseline)" in page.inner_text(".cmp-label >> nth=0")
    with urllib.request.urlopen(f"{base}/api/compare?a={ids['naive']}&b={ids['overlap']}", timeout=60) as resp:
        result = json.loads(resp.read())
    metrics_a, metrics_b = runs["naive"]["analysis"]["metrics"], runs["overlap"]["analysis"]["metrics"]
    headline, _ = compare_metric_rows(result["metrics"], metrics_a, metrics_b)
    shown = page.eval_on_selector_all(
        "#metric-deltas tbody tr", "els => els.map(e => [...e.children].map(c => c.textContent.trim()))"
    )
    assert shown == [[r["label"], r["a"], r["b"], fmt_change(r)] for r in headline]
    busy = next(row for row in shown if row[0] == "GPU busy")
    assert busy[3].endswith(" pts")  # a fraction changes by percentage points
    median = next(r for r in headline if r["metric"] == "step_time_median_ns")
    assert median["change"].startswith("-") and median["cls"] == "better"  # the baseline reads as faster
    # each op's status is the sign of the per-step change beside it
    cell = "c => (c.dataset.v !== undefined ? Number(c.dataset.v) : c.textContent)"
    ops = page.eval_on_selector_all("#ops-table tbody tr", f"els => els.map(e => [...e.children].map({cell}))")
    head = page.eval_on_selector_all("#ops-table thead th", "els => els.map(e => e.textContent)")
    status, delta = head.index("Change"), head.index("B − A per step")
    for row in ops:
        if row[status] == "slower":
            assert row[delta] > 0, row
        elif row[status] == "faster":
            assert row[delta] < 0, row
    shot(page, "truth-compare")


def _span(page: Any) -> float:
    return float(page.evaluate("ssTimeline.view[1] - ssTimeline.view[0]"))


def _settled(page: Any, before: float) -> None:
    page.wait_for_function(f"Math.abs(ssTimeline.view[1] - ssTimeline.view[0] - {before}) > 1")


def test_gloos_copy_streams_fold_to_one_row_that_opens_on_a_click(site, page) -> None:
    base, runs = site
    _open(page, base, runs["gloo-cuda-ranks"])
    group = "ssTimeline.lanes.find(r => r.extra === 'group' && r.rank === 0)"
    members = "ssTimeline.lanes.filter(r => r.group === 'gloo copies' && r.rank === 0 && !r.extra)"
    assert page.evaluate(f"{members}.map(r => r.y)") == [page.evaluate(f"{group}.y")] * 3  # one row
    # a copy on the folded row is found under the pointer (whichever of the three streams ran it)
    box = page.locator("#timeline canvas").bounding_box()
    assert box is not None
    hit = page.evaluate(
        f"""() => {{ const tl = ssTimeline, row = {group};
                   for (const l of tl.data.lanes) {{
                     const r = tl.rowByLane[l.lane];
                     if (!r || !r.stacked || r.rank !== 0 || !l.s.length) continue;
                     const x = tl.x(tl.rel(l.s[0] + l.d[0] / 2));
                     const hit = tl.hitAt(x, row.y + row.h / 2);
                     return hit && [hit.kind, hit.lane === l.lane || tl.rowByLane[hit.lane].stacked];
                   }} return null; }}"""
    )
    assert hit is not None and hit[0].startswith("memcpy_") and hit[1]
    y = page.evaluate(f"{group}.y")
    page.mouse.click(box["x"] + 40, box["y"] + y + 8)
    page.wait_for_function(f"{group}.open")
    ys = page.evaluate(f"{members}.map(r => r.y)")
    assert len(set(ys)) == 3 and page.evaluate(f"{members}.every(r => !r.stacked)")
    assert "▾ gloo copies · 3 streams" in _drawn_texts(page)
    page.mouse.click(box["x"] + 40, box["y"] + page.evaluate(f"{group}.y") + 8)
    page.wait_for_function(f"!{group}.open")
    assert len(set(page.evaluate(f"{members}.map(r => r.y)"))) == 1


def test_keys_work_page_wide_and_the_wheel_zooms_only_over_the_timeline(site, page) -> None:
    base, runs = site
    _open(page, base, runs["naive"])
    box = page.locator("#timeline canvas").bounding_box()
    # hover (no click) and W: zooms
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 60)
    whole = _span(page)
    page.keyboard.press("w")
    _settled(page, whole)
    assert _span(page) < whole
    # after a toolbar button took the focus: W still zooms
    page.click("#tl-reset")
    page.wait_for_function(f"Math.abs(ssTimeline.view[1] - ssTimeline.view[0] - {whole}) < 1")
    page.mouse.move(5, 5)  # the pointer away from the timeline: keys are the page's
    page.keyboard.press("w")
    _settled(page, whole)
    # typing in a text field types
    page.click("#tl-reset")
    page.wait_for_function(f"Math.abs(ssTimeline.view[1] - ssTimeline.view[0] - {whole}) < 1")
    page.fill("#tl-search input[type=search]", "")
    page.focus("#tl-search input[type=search]")
    page.keyboard.type("w")
    assert page.input_value("#tl-search input[type=search]") == "w" and _span(page) == pytest.approx(whole)
    # the wheel over the timeline zooms and leaves the page where it is
    _open(page, base, runs["naive"])
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 60)
    page.mouse.wheel(0, -400)
    page.wait_for_function(f"Math.abs(ssTimeline.view[1] - ssTimeline.view[0] - {whole}) > 1")
    assert page.evaluate("window.scrollY") == 0
    # elsewhere nothing takes the wheel from the page's scrolling, and the timeline stays (a dispatched event:
    # Chromium may send a real wheel gesture to where the previous one went)
    span = _span(page)
    taken = page.evaluate(
        """() => { const e = new WheelEvent('wheel', { deltaY: 300, bubbles: true, cancelable: true });
                   document.querySelector('.metrics').dispatchEvent(e); return e.defaultPrevented; }"""
    )
    assert taken is False and _span(page) == pytest.approx(span)
    # over the lane names (the canvas's left gutter) the wheel scrolls the page too
    taken = page.evaluate(
        """() => { const c = document.querySelector('#timeline canvas'), r = c.getBoundingClientRect();
                   const e = new WheelEvent('wheel', { deltaY: 300, bubbles: true, cancelable: true,
                                                       clientX: r.left + 10, clientY: r.top + 60 });
                   c.dispatchEvent(e); return e.defaultPrevented; }"""
    )
    assert taken is False and _span(page) == pytest.approx(span)


def test_a_gpu_start_before_its_launch_returned_is_said_not_a_negative_delay(site, page) -> None:
    base, runs = site
    _open(page, base, runs["torch-profiler-overlap"])
    lines = page.evaluate(
        """async () => { const { describeLink } = await import('/static/tl_handoff.js');
             const lk = (d) => ({ relation: 'launch', delay_ns: d, src: { id: 1, name: 'cudaLaunchKernel' },
                                  dst: { id: 2, name: 'gemm' } });
             return [describeLink(lk(-4250), 2), describeLink(lk(-4250), 1), describeLink(lk(3000), 2)]; }"""
    )
    assert (
        lines[0]
        == "queued by cudaLaunchKernel · no queueing delay: the GPU started it 4.25 µs before the launch call returned"
    )
    assert lines[1] == "queued gemm · it started 4.25 µs before the launch call returned"
    assert lines[2] == "queued by cudaLaunchKernel · queueing delay 3.00 µs (launch end → GPU start)"
    assert not any("-" in line for line in lines)
    cpu = page.evaluate("ssTimeline.lanes.filter(r => r.kind === 'cpu_thread').map(r => r.label)")
    assert cpu[:2] == ["main thread", "main thread: Python stack (torch.profiler)"]  # its Python calls right under it
    assert cpu[2].startswith("autograd thread ")


def test_a_sampled_stack_shows_its_innermost_frame_and_lists_its_callers(site, page) -> None:
    """The Python calls of a torch.profiler trace: the box and the tooltip name the innermost frame first."""
    base, runs = site
    _open(page, base, runs["torch-profiler-overlap"])
    found = page.evaluate(
        """() => { const tl = ssTimeline, d = tl.data;
             for (const l of d.lanes) {
               const row = tl.rowByLane[l.lane];
               for (let i = 0; row && i < l.s.length; i++) {
                 const name = d.names[l.n[i]];
                 if (d.kinds[l.k[i]] !== 'sample' || !name.includes(';')) continue;
                 const x = tl.x(tl.rel(l.s[i] + l.d[i] / 2));
                 const hit = tl.hitAt(x, row.y + row.h / 2);
                 if (!hit || hit.id !== l.id[i]) continue;
                 return [name, tl.describe(hit)];
               }
             } return null; }"""
    )
    assert found is not None
    name, lines = found
    frames = name.split(";")
    assert lines[0] == frames[-1]
    assert lines[2] == "  called from " + frames[-2]
    label = page.evaluate("async (name) => (await import('/static/timeline.js')).boxLabel('sample', name)", name)
    assert label == frames[-1]
