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


def _hex(color: str) -> str:
    """'#AbC123' or 'rgb(171, 193, 35)' -> '#abc123'."""
    if color.startswith("#"):
        return color.lower()
    r, g, b = (int(v) for v in color[color.index("(") + 1 : color.index(")")].split(",")[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def _lab(color: str) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB hex colour, for a perceptual distance."""

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(color[i : i + 2], 16) / 255) for i in (1, 3, 5))
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def test_critical_path_colours_are_not_interval_colours(page, server) -> None:
    run = _runs(server)[0]
    page.goto(f"{server}/runs/{run['id']}")
    page.wait_for_function(FIRST_PAINT)
    colours = page.evaluate(
        """async () => {
          const src = document.querySelector('script[type=module][src*="run.js"]').src;
          const path = (await import(new URL("tl_critical.js", src))).PATH_COLORS;
          const boxes = (await import(new URL("tl_theme.js", src))).TL_COLORS;
          return { path, boxes };
        }"""
    )
    path = {part: _hex(c) for part, c in colours["path"].items()}
    boxes = {kind: _hex(c) for kind, c in colours["boxes"].items()}
    assert set(path) == {"host", "launch", "compute", "copy", "comm", "sync", "other"}
    assert not set(path.values()) & set(boxes.values())
    assert len(set(path.values())) == len(path)
    # not merely different strings: every band is far (CIELAB delta E >= 40) from every interval colour
    import math

    for part, c in path.items():
        nearest = min(boxes, key=lambda k: math.dist(_lab(c), _lab(boxes[k])))
        assert math.dist(_lab(c), _lab(boxes[nearest])) >= 40, (part, c, nearest, boxes[nearest])

    # the legend shows the path's own colours, one swatch per part, in the same order
    page.check("#tl-critical")
    page.wait_for_function("window.ssTimeline.criticalPath.stretches.length > 0")
    legend = page.evaluate(
        """[...document.querySelectorAll('#tl-critical-legend span')].map(
             (s) => [s.textContent, getComputedStyle(s.querySelector('i')).backgroundColor])"""
    )
    assert [(text, _hex(c)) for text, c in legend] == [(f"critical path: {p}", c) for p, c in path.items()]

    # and the canvas draws each band in its part's colour: the pixel in the middle of the widest stretch
    pixel = page.evaluate(
        """() => {
          const t = window.ssTimeline, dpr = window.devicePixelRatio || 1;
          const shown = t.criticalPath.stretches.filter((m) => t.rowByLane[m.lane]);
          const m = shown.reduce((a, b) => (b.d > a.d ? b : a));
          const row = t.rowByLane[m.lane];
          const a = Math.max(t.opts.gutter, t.x(t.rel(m.s))), b = Math.min(t.x(t.view[1]), t.x(t.rel(m.s + m.d)));
          const px = t.ctx.getImageData(Math.round((a + b) / 2 * dpr), Math.round((row.y + row.h - 2) * dpr), 1, 1);
          return { part: m.part, rgb: Array.from(px.data.slice(0, 3)) };
        }"""
    )
    r, g, b = pixel["rgb"]
    assert f"#{r:02x}{g:02x}{b:02x}" == path[pixel["part"]]
