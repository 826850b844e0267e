"""Driving the run page's timeline in the browser tests: a step's window, setting the view, a range selection."""

from __future__ import annotations

from typing import Any

LANE_RANKS = "[...new Set(ssTimeline.lanes.filter(r => !r.header && !r.extra).map(r => r.rank))]"
"""JS: the ranks whose lanes (not headers or summary rows) the timeline lays out."""


def step_window(page: Any, nth: int = 1) -> dict[str, Any]:
    """The nth step of rank 0 from the page's analysis: its number and window (ns from the run start)."""
    return page.evaluate(
        f"(() => {{ const P = window.STREAMSCOPE, all = P.analysis.steps.filter(x => x.rank === 0);"
        f" const s = all[Math.min({nth}, all.length - 1)];"
        " return {step: s.step, s: s.start_ns - P.run.start_ns, e: s.end_ns - P.run.start_ns}; })()"
    )


def set_view(page: Any, a: float, b: float) -> None:
    """Show [a, b] (ns from the run start) and wait until the timeline has drawn it."""
    seq = int(page.get_attribute("#timeline", "data-seq") or 0)
    page.evaluate(f"ssTimeline.setView({a}, {b})")
    page.wait_for_function(f"Number(document.getElementById('timeline').dataset.seq) > {seq}")


def select_range(page: Any, a: float, b: float) -> dict[str, Any]:
    """Shift-drag from a to b (ns from the run start) across the compute stream; the range's statistics."""
    xs = page.evaluate(f"[ssTimeline.x({a}), ssTimeline.x({b})]")
    row_y = page.evaluate("ssTimeline.lanes.find(r => r.kind === 'compute_stream').y + 5")
    box = page.locator("#timeline canvas").bounding_box()
    page.keyboard.down("Shift")
    page.mouse.move(box["x"] + xs[0], box["y"] + row_y)
    page.mouse.down()
    page.mouse.move(box["x"] + (xs[0] + xs[1]) / 2, box["y"] + row_y, steps=4)
    page.mouse.move(box["x"] + xs[1], box["y"] + row_y, steps=4)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_selector("#tl-range[data-ready='1']")
    return dict(page.evaluate("ssTimeline.rangeStats"))


def step_row(page: Any, step: int, rank: int = 0) -> dict[str, Any]:
    """The analysis's per-step row of ``step`` on ``rank``, as the page's analysis URL serves it."""
    analysis = page.evaluate("fetch(window.STREAMSCOPE.analysis_url).then(r => r.json())")
    return dict(next(r for r in analysis["per_step"] if r["rank"] == rank and r["step"] == step))


TL_LABELS = {
    "kernel": "kernel",
    "memcpy_h2d": "copy H2D",
    "memcpy_d2h": "copy D2H",
    "memcpy_d2d": "copy D2D",
    "memset": "memset",
    "cpu_op": "CPU op",
    "launch": "launch",
    "sync_wait": "sync wait",
    "collective": "collective",
    "annotation": "annotation",
    "sample": "Python stack",
}
"""The legend's label of each interval kind (webapp/static/tl_theme.js)."""


def legend_and_drawn(page: Any, hooks: tuple[str, ...] = ("ssTimeline",)) -> tuple[list[str], list[str]]:
    """(the kind labels the legend lists, the labels of the kinds the timelines ``hooks`` drew), both sorted."""
    legend = page.eval_on_selector_all("#tl-legend span", "els => els.map(e => e.textContent)")
    drawn: set[str] = set()
    for hook in hooks:
        drawn |= set(
            page.evaluate(
                f"[...new Set({hook}.data.lanes.flatMap(l => [...l.k, ...l.bk].map(k => {hook}.data.kinds[k])))]"
            )
        )
    return sorted(t for t in legend if t in TL_LABELS.values()), sorted(TL_LABELS[k] for k in drawn)
