"""The critical path on the timeline and the host-time table, in real Chromium."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

pytestmark = pytest.mark.browser

FIRST_PAINT = "window.ssTimeline && window.ssTimeline.stats.firstPaintMs !== null"


def _runs(server: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(server + "/api/runs", timeout=60) as resp:
        return list(json.loads(resp.read())["runs"])


def test_critical_path_toggle_draws_the_path_of_the_view(page, server, shot) -> None:
    run = _runs(server)[0]
    page.goto(f"{server}/runs/{run['id']}")
    page.wait_for_function(FIRST_PAINT)
    assert page.locator("#tl-critical-legend").is_hidden()
    page.check("#tl-critical")
    page.wait_for_function("window.ssTimeline.criticalPath.stretches.length > 0")
    parts = page.evaluate("[...new Set(window.ssTimeline.criticalPath.stretches.map((s) => s.part))]")
    assert set(parts) <= {"host", "launch", "compute", "copy", "comm", "sync", "other"} and parts
    assert page.locator("#tl-critical-legend").is_visible()
    assert "critical path: host" in page.inner_text("#tl-critical-legend")
    shot(page, "40-critical-path")
    page.uncheck("#tl-critical")
    page.wait_for_function("window.ssTimeline.criticalPath.stretches.length === 0")


def test_host_time_tab_says_when_a_run_has_no_samples(page, server) -> None:
    run = _runs(server)[0]
    page.goto(f"{server}/runs/{run['id']}")
    page.wait_for_function(FIRST_PAINT)
    page.click("button[data-tab=tab-host]")
    note = page.locator("#host-note")
    note.wait_for()
    assert "no sampled host stacks" in note.inner_text() or "Host time over the steps" in note.inner_text()
