"""The served compare page in Chromium: the verdict opens the page, a finding below the listing threshold in B
reads as still there with its cost, and run totals of runs of different step counts read per step."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest
from compare_traces import MINOR_COPY_NS, copy_run
from serving import running_server

from webapp.formatting import fmt_ns
from webapp.report import Verdict


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, tuple[dict, dict]]]:
    """A server holding two runs: 12 ms copies (4 steps) and 8 ms copies (2 steps); yields (base url, the
    catalog rows of the two, in that order)."""
    from collector.traceformat.write import write_trace

    samples = tmp_path_factory.mktemp("copies")
    write_trace(copy_run(n_steps=4), str(samples / "big-copies.json"))
    write_trace(copy_run(MINOR_COPY_NS), str(samples / "small-copies.json"))
    data = tmp_path_factory.mktemp("data")
    with running_server(samples, data, cwd=data) as (base, _proc):
        runs = {r["name"]: r for r in _get(f"{base}/api/runs")["runs"]}
        big, small = (next(r for name, r in runs.items() if name.startswith(p)) for p in ("big", "small"))
        yield base, (big, small)


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return json.loads(resp.read())


def test_the_compare_page_opens_with_the_verdict(copies, page, shot) -> None:
    base, (big, small) = copies
    a, b = big["id"], small["id"]
    page.goto(f"{base}/compare?a={a}&b={b}")
    verdict = page.locator("#verdict")
    result = _get(f"{base}/api/compare?a={a}&b={b}")
    assert verdict.inner_text() == Verdict(result["step_time_change"], None).text
    box, roles, timeline = (page.locator(s).bounding_box() for s in ("#verdict", "#cmp-roles", "#timeline-a"))
    assert box and roles and timeline
    assert 0 < box["y"] < roles["y"] < timeline["y"] and box["y"] + box["height"] < 200  # on top, in view
    below = page.locator("#fdiff-minor")
    assert below.is_visible() and "Below threshold now" in below.inner_text()
    cost = result["finding_costs"]["pageable-copy"]
    assert f"pageable-copy · {fmt_ns(cost)}/step" in below.inner_text()
    assert "pageable-copy" not in page.locator(".fdiff >> nth=0").inner_text()  # not "Fixed in B"
    # A has 4 steps and B 2: the run totals read per step, and say so
    cell = page.locator("#metric-deltas td[title='sync_wait_count']")
    assert cell.inner_text() == "Sync waits, mean per step"
    assert "A has 4 steps and B 2" in page.inner_text("#cmp-notes")
    shot(page, "compare-verdict-minor-findings")
