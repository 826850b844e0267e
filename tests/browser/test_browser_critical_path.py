"""The critical path on the timeline, in real Chromium."""

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
