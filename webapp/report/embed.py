"""Timeline data for an offline report: level-of-detail views of a run, embedded within a byte budget.

The report cannot ask a server for the view the user zooms to, so it carries a fixed set of views, each a
:func:`webapp.timeline.view_payload` (JSON, gzip-compressed, base64): the whole run at OVERVIEW_WIDTH_PX; each
*focus* window (the worst step and a representative one) and each finding's window; then every step, each in
a view of its own when they all fit in STEP_SHARE of what is left, else in views of 2, 4, 8 ... consecutive
steps (the finest grouping that fits every step); then for the focus windows a pyramid of tiles. Level 0 is the
window itself; level ``L`` has ``2**(L+1) - 1`` tiles, each ``1 / 2**L`` of the window wide, starting every
half tile, so any view at most half a tile wide lies inside one tile. Tiles are added level by level,
interleaved over the focus windows, while the budget lasts (the last level may be partial: where it has
no tile, the page draws the next coarser one), and stop for a window once its tiles merge nothing (every
interval is already drawn one by one). What did not fit is listed in :attr:`EmbeddedTimeline.left_out`.
Times are ns relative to the run's first interval (``origin_ns``), as in the payloads.
"""

from __future__ import annotations

import base64
import gzip
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from webapp.analysis.lod import RunIndex
from webapp.timeline import OVERVIEW_WIDTH_PX, interval_rows, view_payload

DEFAULT_BUDGET_BYTES = 5 * 2**19
"""Compressed timeline data per run (base64 characters), 2.5 MiB; the rest of a report is Plotly (~1.9 MiB) and
tables."""
TILE_WIDTH_PX = 2000
MAX_LEVEL = 8
MAX_EVIDENCE_ROWS = 1000
"""Interval rows embedded for the findings' outlines (the evidence of each finding's first windows)."""
STEP_SHARE = 0.6
"""Share of the budget left after the focus and finding windows that the views of every step may take; the
rest goes to finer levels of the focus windows."""
STEP_VIEW = -3
"""EmbeddedView.focus of a view of one step or of a group of consecutive steps."""


@dataclass(frozen=True)
class Focus:
    """A window the report zooms into: ``label`` ("worst step"), ``step`` (-1 when not a step), ns times."""

    label: str
    rank: int
    step: int
    start_ns: int
    end_ns: int
    step_time_ns: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "rank": self.rank,
            "step": self.step,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "step_time_ns": self.step_time_ns,
        }


@dataclass(frozen=True)
class EmbeddedView:
    """One view: [start_ns, end_ns) drawn ``width_px`` wide; ``blob`` its payload, gzip + base64."""

    start_ns: int
    end_ns: int
    width_px: int
    level: int
    focus: int  # index into EmbeddedTimeline.focus; -1 the whole-run overview, -2 a finding's window, -3 steps
    blob: str
    merged: bool  # some of its boxes merge several intervals
    label: str = ""  # what a STEP_VIEW shows: "step 4", "steps 4-7"

    def to_dict(self) -> dict[str, Any]:
        return {
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "width_px": self.width_px,
            "level": self.level,
            "focus": self.focus,
            "label": self.label,
            "blob": self.blob,
        }


@dataclass(frozen=True)
class EmbeddedTimeline:
    """The views embedded for one run, the focus windows, the evidence rows (blob) and what was left out."""

    focus: tuple[Focus, ...]
    views: tuple[EmbeddedView, ...]
    evidence_blob: str
    left_out: tuple[str, ...]
    budget_bytes: int
    levels: tuple[int, ...] = field(default=())  # deepest level embedded per focus window

    @property
    def size_bytes(self) -> int:
        return sum(len(v.blob) for v in self.views) + len(self.evidence_blob)

    def to_dict(self) -> dict[str, Any]:
        return {
            "focus": [f.to_dict() for f in self.focus],
            "views": [v.to_dict() for v in self.views],
            "evidence": self.evidence_blob,
            "left_out": list(self.left_out),
            "size_bytes": self.size_bytes,
            "budget_bytes": self.budget_bytes,
        }


def pack(payload: Any) -> str:
    """JSON -> gzip -> base64 text (what the report's script unpacks with DecompressionStream)."""
    return base64.b64encode(gzip.compress(msgspec.json.encode(payload), 6, mtime=0)).decode("ascii")


def focus_steps(per_step: pd.DataFrame) -> tuple[Focus, ...]:
    """The worst (longest) step and the step closest to the median step time, of rank 0 (or the first
    rank); one Focus when they are the same step, none without step windows."""
    need = {"step", "start_ns", "end_ns", "step_time_ns"}
    if per_step.empty or not need <= set(per_step.columns):
        return ()
    steps = per_step
    if "rank" in steps.columns:
        steps = steps[steps["rank"] == steps["rank"].min()]
    times = steps["step_time_ns"].to_numpy(dtype=np.float64)
    if np.isnan(times).all():
        return ()
    worst = steps.iloc[int(np.nanargmax(times))]
    typical = steps.iloc[int(np.nanargmin(np.abs(times - np.nanmedian(times))))]
    rank = int(steps["rank"].iloc[0]) if "rank" in steps.columns else 0

    def one(label: str, row: pd.Series) -> Focus:
        return Focus(
            label, rank, int(row["step"]), int(row["start_ns"]), int(row["end_ns"]), int(row["step_time_ns"] or 0)
        )

    if int(worst["step"]) == int(typical["step"]):
        return (one("typical step", typical),)
    return (one("worst step", worst), one("typical step", typical))


def _tiles(start: int, end: int, level: int) -> list[tuple[int, int]]:
    """The tiles of one pyramid level over [start, end): half-overlapping, 1/2**level of the span wide."""
    if level == 0:
        return [(start, end)]
    span = end - start
    width, stride = span / 2**level, span / 2 ** (level + 1)
    return [(start + round(i * stride), start + round(i * stride + width)) for i in range(2 ** (level + 1) - 1)]


def _view(index: RunIndex, t0: int, t1: int, width: int, level: int, focus: int, label: str = "") -> EmbeddedView:
    o = index.origin_ns
    payload = view_payload(index, o + t0, o + max(t1, t0 + 1), width)
    merged = any(len(lane["bs"]) for lane in payload["lanes"])
    return EmbeddedView(t0, t1, width, level, focus, pack(payload), merged, label)


def finding_window(start_ns: int, end_ns: int) -> tuple[int, int]:
    """The window the page shows when a finding is clicked (Timeline.focus: 15% or 2 us each side), with
    a margin for rounding; ns, same clock as the arguments."""
    pad = max((end_ns - start_ns) * 0.15, 2000) * 1.05
    return int(start_ns - pad), int(end_ns + pad + 1)


def embed_timeline(
    index: RunIndex,
    focus: Sequence[Focus],
    evidence_ids: Sequence[int] = (),
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    finding_windows: Sequence[tuple[int, int]] = (),
    steps: Sequence[tuple[int, int, int]] = (),
) -> EmbeddedTimeline:
    """The views of ``index`` to embed: the overview, each ``focus`` window (absolute ns, as in the
    analysis), each of ``finding_windows`` (absolute ns: what a click on a finding shows, at full
    resolution), every one of ``steps`` ((step, start_ns, end_ns), absolute ns; :func:`_add_steps`), then
    deeper pyramid levels of the focus windows while ``budget_bytes`` lasts; rows of ``evidence_ids`` (at most
    MAX_EVIDENCE_ROWS) for the findings' outlines. The overview is always embedded."""
    o = index.origin_ns
    span = max(1, index.end_ns - o)
    views = [_view(index, 0, span, OVERVIEW_WIDTH_PX, 0, -1)]
    left_out: list[str] = []
    ids = list(dict.fromkeys(int(i) for i in evidence_ids))
    if len(ids) > MAX_EVIDENCE_ROWS:
        left_out.append(f"outlines of {len(ids) - MAX_EVIDENCE_ROWS:,} of the findings' {len(ids):,} intervals")
    evidence = pack(interval_rows(index, ids[:MAX_EVIDENCE_ROWS]) if ids else [])
    used = len(views[0].blob) + len(evidence)
    windows = [(max(0, f.start_ns - o), max(1, f.end_ns - o)) for f in focus]
    pads = [(b - a) // 20 for a, b in windows]
    names = [""] * len(windows)  # a step window's name; the focus windows are named by their Focus
    depth = [-1] * len(windows)
    open_ = [True] * len(windows)
    for level in range(MAX_LEVEL + 1):
        if level == 1:  # after the focus windows themselves: what a click on each finding shows, every step
            used += _add_findings(index, finding_windows, views, budget_bytes - used, left_out)
            room = int((budget_bytes - used) * (STEP_SHARE if any(open_) else 1.0))
            first = len(views)
            used += _add_steps(index, steps, views, room, left_out)
            for v in views[first:]:  # one view per step: its finer levels join the focus windows' pyramid
                if v.label.startswith("step "):
                    windows.append((v.start_ns, v.end_ns))
                    pads.append(0)
                    names.append(v.label)
                    depth.append(0)
                    open_.append(v.merged)
        # this level's tiles of every open window, interleaved, each added while it fits
        todo = {
            i: _tiles(a - pads[i], b + pads[i], level)
            for i, (a, b) in enumerate(windows)
            if open_[i] and (level > 0 or not names[i])
        }
        added: dict[int, list[EmbeddedView]] = {i: [] for i in todo}
        full: set[int] = set()
        for k in range(max((len(t) for t in todo.values()), default=0)):
            for i, tiles in todo.items():
                if k >= len(tiles) or i in full:
                    continue
                view = _view(index, *tiles[k], TILE_WIDTH_PX, level, STEP_VIEW if names[i] else i, names[i])
                if used + len(view.blob) > budget_bytes:
                    full.add(i)
                    continue
                views.append(view)
                used += len(view.blob)
                added[i].append(view)
        for i, tiles in todo.items():
            span = windows[i][1] - windows[i][0]
            if len(added[i]) == len(tiles):
                depth[i] = level
                open_[i] = any(t.merged for t in added[i])  # all drawn one by one: finer adds nothing
                continue
            open_[i] = False
            if names[i]:
                continue  # the steps are summed up below
            where = f"the {focus[i].label} ({_name(focus[i])})"
            if level == 0:
                left_out.append(f"{where}: over the data budget")
            else:
                left_out.append(
                    f"zoom levels finer than {_res(span, level - 1)} per pixel in {where}: over the data budget"
                    + (f" ({len(added[i])} of {len(tiles)} views at {_res(span, level)} kept)" if added[i] else "")
                )
    step_px = [(b - a) / 2 ** depth[i] / TILE_WIDTH_PX for i, (a, b) in enumerate(windows) if names[i]]
    if step_px:
        left_out.append(
            f"each step is embedded down to {_fmt_ns(max(step_px))} per pixel or finer (the finest reach "
            f"{_fmt_ns(min(step_px))}); finer levels are over the data budget or would draw nothing new"
        )
    if not windows:
        left_out.append("zoomed views: the run has no steps, so only the whole-run overview is embedded")
    where = "outside the steps (set-up, tail)" if any(v.focus == STEP_VIEW for v in views) else "elsewhere in the run"
    left_out.append(f"{where}, zooming in shows the overview's merged boxes, not single intervals")
    return EmbeddedTimeline(tuple(focus), tuple(views), evidence, tuple(left_out), budget_bytes, tuple(depth))


def _add_findings(
    index: RunIndex, windows: Sequence[tuple[int, int]], views: list[EmbeddedView], room: int, left_out: list[str]
) -> int:
    """Append a view of each finding window (absolute ns) that fits in ``room`` bytes; returns the bytes used."""
    used, skipped = 0, 0
    for a, b in windows:
        view = _view(index, max(0, a - index.origin_ns), max(1, b - index.origin_ns), TILE_WIDTH_PX, 0, -2)
        if used + len(view.blob) > room:
            skipped += 1
            continue
        views.append(view)
        used += len(view.blob)
    if skipped:
        left_out.append(f"the detailed view of {skipped} of {len(windows)} findings' windows: over the data budget")
    return used


def _add_steps(
    index: RunIndex, steps: Sequence[tuple[int, int, int]], views: list[EmbeddedView], room: int, left_out: list[str]
) -> int:
    """Append views that cover every step ((step, start_ns, end_ns), absolute ns): one view per step when they
    all fit in ``room`` bytes, else one per 2, 4, 8 ... consecutive steps, the finest grouping that fits (sized
    from a few of its views); says in ``left_out`` how coarse they are. Returns the bytes used."""
    if not steps:
        return 0
    o, ordered = index.origin_ns, sorted(steps, key=lambda s: s[1])
    made: dict[tuple[int, int], EmbeddedView] = {}

    def view(group: Sequence[tuple[int, int, int]]) -> EmbeddedView:
        pad = (group[-1][2] - group[0][1]) // 20  # as the focus windows: what "go to step" shows lies inside
        a, b = max(0, group[0][1] - o - pad), max(1, group[-1][2] - o + pad)
        if (a, b) not in made:
            first, last = group[0][0], group[-1][0]
            name = f"step {first}" if first == last else f"steps {first}-{last}"
            made[(a, b)] = _view(index, a, b, TILE_WIDTH_PX, 0, STEP_VIEW, name)
        return made[(a, b)]

    size = 1
    while True:
        groups = [ordered[i : i + size] for i in range(0, len(ordered), size)]
        sample = [view(g) for g in groups[:: max(1, len(groups) // 4)][:4]]
        if sum(len(v.blob) for v in sample) * len(groups) <= room * len(sample) or len(groups) == 1:
            break
        size *= 2
    used, kept = 0, 0
    for group in groups:
        v = view(group)
        if used + len(v.blob) > room:
            break
        views.append(v)
        used, kept = used + len(v.blob), kept + 1
    px = _res_px((ordered[-1][2] - ordered[0][1]) / len(groups))
    which = "each step" if size == 1 else f"the steps, {size} at a time,"
    if kept == len(groups):
        if size > 1:
            left_out.append(f"{which} embedded at about {px} per pixel: finer zoom levels only in the focus steps")
    else:
        left_out.append(
            f"{which} embedded at about {px} per pixel up to step {groups[kept - 1][-1][0] if kept else '-'}; "
            f"the {len(groups) - kept} views after it are over the data budget (the overview draws them)"
        )
    return used


def _res_px(span_ns: float) -> str:
    return _fmt_ns(span_ns / TILE_WIDTH_PX)


def _fmt_ns(ns: float) -> str:
    from webapp.formatting import fmt_ns

    return fmt_ns(ns)


def _name(f: Focus) -> str:
    return f"step {f.step}" if f.step >= 0 else "window"


def _res(span_ns: int, level: int) -> str:
    return _fmt_ns(span_ns * 1.1 / 2**level / TILE_WIDTH_PX)
