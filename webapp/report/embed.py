"""Timeline data for an offline report: level-of-detail views of a run, embedded within a byte budget.

The report cannot ask a server for the view the user zooms to, so it carries a fixed set of views, each a
:func:`webapp.timeline.view_payload` (JSON, gzip-compressed, base64). The whole run at OVERVIEW_WIDTH_PX
always (what the page draws zoomed out); then, when every interval of the run fits the budget, one view that
holds them all one by one (FULL_VIEW: every zoom draws from it exactly, nothing is coarse) and nothing more.
Otherwise:

1. the window each finding zooms to;
2. every step, each a view of its own, or 2, 4, 8 ... consecutive steps a view (the finest grouping that
   fits); a run without steps is one window, the whole run;
3. finer levels of every step (or group) together, a whole level at a time while the next level of all of
   them fits: the finest level that fits every step;
4. what is left: finer levels of the focus steps (the worst and a typical one), tile by tile, then one level
   finer for the first steps, in order, while they fit.

Each window is a pyramid: level 0 is the window itself; level ``L`` tile ``k`` spans half-tiles ``k`` to
``k + 2`` of width ``window / 2**(L+1)``, so any view at most half a tile wide lies inside one tile. A tile
that merges no interval (every interval in it drawn one by one) has no finer tiles: the page draws any view
inside it from it, exactly. The page draws each view from the finest embedded view that covers it. What is
coarse is listed in :attr:`EmbeddedTimeline.left_out`; :attr:`EmbeddedTimeline.detail` says what is fine.
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
MAX_EVIDENCE_ROWS = 1000
"""Interval rows embedded for the findings' outlines (the evidence of each finding's first windows)."""
MIN_BYTES_PER_INTERVAL = 8
"""Fewest bytes an interval takes in the full view (measured: 12-13); a run with more intervals than the budget
holds at this rate is not tried whole."""
UNLIMITED = 2**62
"""Box caps of the full view: no lane or view is coarsened."""
OVERVIEW = -1
"""EmbeddedView.focus of the whole-run overview; of a finding's window FINDING_VIEW; of a view of steps (or of
the whole run, in a run without steps) STEP_VIEW; of the view of every interval FULL_VIEW; 0, 1 ...: a tile of
that focus step."""
FINDING_VIEW = -2
STEP_VIEW = -3
FULL_VIEW = -4
OVER_BUDGET = "finer levels are over the data budget"
OUTSIDE_STEPS = "outside the steps (set-up, tail), zooming in shows the overview's merged boxes, not single intervals"


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
    focus: int  # OVERVIEW, FINDING_VIEW, STEP_VIEW, FULL_VIEW, or the index of a focus step
    blob: str
    merged: bool  # some of its boxes merge several intervals; False: every interval in it one by one
    label: str = ""  # what a STEP_VIEW shows: "step 4", "steps 4-7", "the whole run"

    def to_dict(self) -> dict[str, Any]:
        return {
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "width_px": self.width_px,
            "level": self.level,
            "focus": self.focus,
            "label": self.label,
            "merged": self.merged,
            "blob": self.blob,
        }


@dataclass(frozen=True)
class EmbeddedTimeline:
    """The views embedded for one run, the focus windows, the evidence rows (blob), what is fine
    (``detail``, one sentence) and what is coarse or left out (``left_out``)."""

    focus: tuple[Focus, ...]
    views: tuple[EmbeddedView, ...]
    evidence_blob: str
    left_out: tuple[str, ...]
    budget_bytes: int
    detail: str = ""

    @property
    def size_bytes(self) -> int:
        return sum(len(v.blob) for v in self.views) + len(self.evidence_blob)

    @property
    def full(self) -> bool:
        """Every interval of the run is embedded one by one: the full view, or an overview that merges none."""
        return any(v.focus == FULL_VIEW or (v.focus == OVERVIEW and not v.merged) for v in self.views)

    def to_dict(self) -> dict[str, Any]:
        return {
            "focus": [f.to_dict() for f in self.focus],
            "views": [v.to_dict() for v in self.views],
            "evidence": self.evidence_blob,
            "left_out": list(self.left_out),
            "detail": self.detail,
            "full": self.full,
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


def finding_window(start_ns: int, end_ns: int) -> tuple[int, int]:
    """The window the page shows when a finding is clicked (Timeline.focus: 15% or 2 us each side), with
    a margin for rounding; ns, same clock as the arguments."""
    pad = max((end_ns - start_ns) * 0.15, 2000) * 1.05
    return int(start_ns - pad), int(end_ns + pad + 1)


def _view(index: RunIndex, t0: int, t1: int, width: int, level: int, focus: int, label: str = "") -> EmbeddedView:
    """The view of [t0, t1) (run-relative ns) ``width`` pixels wide."""
    o = index.origin_ns
    payload = view_payload(index, o + t0, o + max(t1, t0 + 1), width)
    merged = any(len(lane["bs"]) for lane in payload["lanes"])
    return EmbeddedView(t0, t1, width, level, focus, pack(payload), merged, label)


def _full_view(index: RunIndex, room: int) -> EmbeddedView | None:
    """Every interval of the run one by one (1 ns per pixel, no box cap), when it fits in ``room`` bytes."""
    if len(index.start) * MIN_BYTES_PER_INTERVAL > room:
        return None
    o, span = index.origin_ns, index.end_ns - index.origin_ns + 1  # + 1: an interval of no length at the end
    payload = view_payload(index, o, o + span, span, max_per_lane=UNLIMITED, max_per_view=UNLIMITED)
    payload["exposed"] = [  # every window: a view merges them past 1,000
        {"rank": r, "s": (s - o).tolist(), "d": (e - s).tolist()} for r, (s, e) in index.exposed.items()
    ]
    blob = pack(payload)
    merged = any(len(lane["bs"]) for lane in payload["lanes"])  # only intervals of no length at one time
    return EmbeddedView(0, span, span, 0, FULL_VIEW, blob, merged) if len(blob) <= room else None


class _Views:
    """The views chosen so far and the bytes they take of ``budget``."""

    def __init__(self, budget: int) -> None:
        self.items: list[EmbeddedView] = []
        self.budget = budget
        self.used = 0

    @property
    def room(self) -> int:
        return self.budget - self.used

    def add(self, view: EmbeddedView) -> bool:
        """Keep ``view`` if it fits; False (and nothing kept) if not."""
        if len(view.blob) > self.room:
            return False
        self.items.append(view)
        self.used += len(view.blob)
        return True


@dataclass(eq=False)  # compared by identity: a focus step's pyramid may be a step's
class _Pyramid:
    """The tiles of one window [start_ns, end_ns) (run-relative ns) embedded so far: every tile of levels
    0..``level`` that a merged tile of the level above holds; ``frontier`` the level's tiles that still merge
    intervals (their children 2k, 2k + 1, 2k + 2 make the next level). ``kept`` counts the tiles of a level that
    did not fit whole (``tried`` of them), when it stopped on the budget."""

    start_ns: int
    end_ns: int
    label: str
    focus: int
    level: int = -1
    frontier: tuple[int, ...] = (0,)
    kept: int = 0
    tried: int = 0
    closed: bool = False

    @property
    def coarse(self) -> bool:
        """Finer tiles would draw something new: some tile of its deepest level merges intervals at more than
        1 ns per pixel (or no tile fitted)."""
        return bool(self.frontier) and self.px_ns(self.level) > 1

    @property
    def open(self) -> bool:
        """Coarse, and the budget has not stopped it yet."""
        return self.coarse and not self.closed

    def px_ns(self, level: int) -> float:
        """ns per pixel of a tile of ``level``."""
        return (self.end_ns - self.start_ns) / 2 ** max(0, level) / TILE_WIDTH_PX

    def next_tiles(self) -> list[tuple[int, int, int]]:
        """(k, start_ns, end_ns) of the next level's tiles."""
        level = self.level + 1
        ks = sorted({j for k in self.frontier for j in (2 * k, 2 * k + 1, 2 * k + 2)}) if level else [0]
        half = (self.end_ns - self.start_ns) / 2 ** (level + 1)
        return [(k, self.start_ns + round(k * half), self.start_ns + round((k + 2) * half)) for k in ks]

    def tile(self, index: RunIndex, k: int, t0: int, t1: int) -> EmbeddedView:
        """Tile ``k`` of the next level."""
        focus = self.focus if self.focus >= 0 else STEP_VIEW
        return _view(index, t0, t1, TILE_WIDTH_PX, self.level + 1, focus, self.label)

    def accept(self, tiles: Sequence[tuple[int, EmbeddedView]]) -> None:
        """The next level is embedded: ``tiles`` (k, view)."""
        self.level += 1
        self.frontier = tuple(k for k, v in tiles if v.merged)

    def stop(self, kept: int, tried: int) -> None:
        """The next level did not fit: ``kept`` of its ``tried`` tiles are embedded (a partial level)."""
        self.kept, self.tried, self.closed = kept, tried, True

    def note(self, where: str) -> str:
        """What is coarse in this window; "" when nothing is."""
        if not self.coarse:
            return ""
        if self.level < 0:
            return f"{where} has no view of its own: over the data budget"
        text = f"{where} is embedded down to {_fmt_ns(self.px_ns(self.level))} per pixel"
        if self.kept:
            text += f" ({self.kept} of {self.tried} views at {_fmt_ns(self.px_ns(self.level + 1))})"
        return f"{text}; {OVER_BUDGET}"


def _next_level(index: RunIndex, pyramids: Sequence[_Pyramid], room: int) -> list[list[tuple[int, EmbeddedView]]]:
    """The next level's tiles of every pyramid, or [] as soon as they pass ``room`` bytes together."""
    out, size = [], 0
    for p in pyramids:
        tiles = []
        for k, t0, t1 in p.next_tiles():
            view = p.tile(index, k, t0, t1)
            size += len(view.blob)
            if size > room:
                return []
            tiles.append((k, view))
        out.append(tiles)
    return out


def _deepen_together(index: RunIndex, pyramids: Sequence[_Pyramid], views: _Views) -> None:
    """Add whole levels to every open pyramid while the next level of all of them fits."""
    while True:
        todo = [p for p in pyramids if p.open]
        level = _next_level(index, todo, views.room) if todo else []
        if not level:
            return
        for p, tiles in zip(todo, level, strict=True):
            for _, view in tiles:
                views.add(view)
            p.accept(tiles)


def _deepen_each(index: RunIndex, pyramids: Sequence[_Pyramid], views: _Views) -> None:
    """Add levels to the open pyramids, their tiles interleaved, each kept while it fits; a pyramid stops at its
    first tile that does not fit (that level then partial)."""
    while todo := [p for p in pyramids if p.open]:
        upcoming = [p.next_tiles() for p in todo]
        made: list[list[tuple[int, EmbeddedView]]] = [[] for _ in todo]
        for turn in range(max(len(tiles) for tiles in upcoming)):
            for p, tiles, kept in zip(todo, upcoming, made, strict=True):
                if p.closed or turn >= len(tiles):
                    continue
                view = p.tile(index, *tiles[turn])
                if views.add(view):
                    kept.append((tiles[turn][0], view))
                else:
                    p.stop(len(kept), len(tiles))
        for p, kept in zip(todo, made, strict=True):
            if not p.closed:
                p.accept(kept)


def _deepen_leading(index: RunIndex, pyramids: Sequence[_Pyramid], views: _Views) -> list[_Pyramid]:
    """One more level for the open pyramids in order, each whole, until one does not fit; returns those."""
    done = []
    for p in (p for p in pyramids if p.open):
        level = _next_level(index, [p], views.room)
        if not level:
            break
        for _, view in level[0]:
            views.add(view)
        p.accept(level[0])
        done.append(p)
    return done


def _add_findings(index: RunIndex, windows: Sequence[tuple[int, int]], views: _Views) -> str:
    """A view of each finding window (absolute ns) that fits; says what did not ("" when all did)."""
    o, skipped = index.origin_ns, 0
    for a, b in windows:
        if not views.add(_view(index, max(0, a - o), max(1, b - o), TILE_WIDTH_PX, 0, FINDING_VIEW)):
            skipped += 1
    if not skipped:
        return ""
    return f"the detailed view of {skipped} of {len(windows)} findings' windows: over the data budget"


def _step_group(index: RunIndex, group: Sequence[tuple[int, int, int]], focus: Sequence[Focus]) -> _Pyramid:
    """The pyramid of consecutive steps ((step, start_ns, end_ns), absolute ns), padded as the focus windows
    are (5% each side: what "go to step" shows lies inside); a focus step's tiles carry its focus index."""
    o = index.origin_ns
    pad = (group[-1][2] - group[0][1]) // 20
    first, last = group[0][0], group[-1][0]
    label = f"step {first}" if first == last else f"steps {first}-{last}"
    mine = [i for i, f in enumerate(focus) if first == last == f.step]
    start, end = max(0, group[0][1] - o - pad), max(1, group[-1][2] - o + pad)
    return _Pyramid(start, end, label, mine[0] if mine else STEP_VIEW)


def _focus_pyramid(index: RunIndex, i: int, f: Focus) -> _Pyramid:
    """The pyramid of focus window ``i`` (padded 5% each side, as the steps are)."""
    pad = (f.end_ns - f.start_ns) // 20
    o = index.origin_ns
    return _Pyramid(max(0, f.start_ns - o - pad), max(1, f.end_ns - o + pad), _name(f), i)


@dataclass
class _Steps:
    """The step pyramids at level 0: ``total`` views of ``size`` consecutive steps each (of ``n_steps``), of
    which the first ``len(pyramids)`` fit; ``last_step`` the last step they hold."""

    size: int
    total: int
    n_steps: int
    pyramids: list[_Pyramid] = field(default_factory=list)
    last_step: int = -1

    @property
    def grouping(self) -> str:
        """How the steps share views: "9 views, one per step", "one view of all 40 steps" ..."""
        if self.size == 1:
            return f"{_count(self.total, 'view')}, one per step"
        if self.total == 1:
            return f"one view of all {self.n_steps} steps"
        return f"{self.total} views of {self.size} steps"

    def budget_note(self) -> str:
        """Which steps have no view of their own ("" when all have)."""
        kept, left = len(self.pyramids), self.total - len(self.pyramids)
        if not left:
            return ""
        if not kept:
            return f"no view of the steps fits the data budget ({self.grouping}); the overview draws them"
        return (
            f"the steps' views ({self.grouping}) reach step {self.last_step}; the {_count(left, 'view')} after it "
            f"{'is' if left == 1 else 'are'} over the data budget (the overview draws those steps)"
        )

    @property
    def per_view(self) -> str:
        """ "each step", "the steps, 4 a view," or "all 40 steps, in one view,"."""
        if self.size == 1:
            return "each step"
        return f"the steps, {self.size} a view," if self.total > 1 else f"all {self.n_steps} steps, in one view,"

    def coarse_note(self, finer: Sequence[_Pyramid]) -> str:
        """How fine the steps' views go ("" when every one holds every interval of its steps); ``finer``: the
        views that went one level further than the others."""
        coarse = [p for p in self.pyramids if p.coarse]
        if not coarse:
            return ""
        level = min(p.level for p in coarse)
        whole = len(self.pyramids) - len(coarse)
        text = (
            f"{self.per_view} {'is' if self.size == 1 else 'are'} embedded down to "
            f"{_fmt_ns(max(p.px_ns(level) for p in coarse if p.level == level))} per pixel (zoom level {level} "
            "for every view"
        )
        if whole:
            text += (
                f"; {_count(whole, 'view')} of {len(self.pyramids)} {'holds' if whole == 1 else 'hold'} every interval"
            )
        if finer:
            text += (
                f"; {_count(len(finer), 'view')}, {finer[0].label} to {finer[-1].label}, one level finer, down to "
                f"{_fmt_ns(max(p.px_ns(p.level) for p in finer))} per pixel"
            )
        return f"{text}); {OVER_BUDGET}"

    def detail(self) -> str:
        """What the steps' views hold, in a few words."""
        if not self.pyramids:
            return "the steps: no view of their own"
        where = self.per_view.rstrip(",") + (" in a view of its own" if self.size == 1 else "")
        if len(self.pyramids) < self.total:
            where += f" up to step {self.last_step}"
        coarse = [p for p in self.pyramids if p.coarse]
        if not coarse:
            return f"{where}: every interval one by one"
        level = min(p.level for p in coarse)
        return f"{where}, down to {_fmt_ns(max(p.px_ns(level) for p in coarse if p.level == level))} per pixel"


def _add_steps(index: RunIndex, steps: Sequence[tuple[int, int, int]], focus: Sequence[Focus], views: _Views) -> _Steps:
    """Level 0 of every step ((step, start_ns, end_ns), absolute ns): one view per step when they all fit,
    else one per 2, 4, 8 ... consecutive steps, the finest grouping that fits (sized from a few of its views),
    kept in order while they fit."""
    ordered = sorted(steps, key=lambda s: s[1])
    made: dict[tuple[int, int], tuple[_Pyramid, EmbeddedView]] = {}

    def level0(group: Sequence[tuple[int, int, int]]) -> tuple[_Pyramid, EmbeddedView]:
        p = _step_group(index, group, focus)
        key = (p.start_ns, p.end_ns)
        if key not in made:
            made[key] = (p, p.tile(index, 0, p.start_ns, p.end_ns))
        return made[key]

    size = 1
    while True:
        groups = [ordered[i : i + size] for i in range(0, len(ordered), size)]
        sample = [level0(g)[1] for g in groups[:: max(1, len(groups) // 4)][:4]]
        if sum(len(v.blob) for v in sample) * len(groups) <= views.room * len(sample) or len(groups) == 1:
            break
        size *= 2
    out = _Steps(size, len(groups), len(ordered))
    for group in groups:
        p, view = level0(group)
        if not views.add(view):
            break
        p.accept([(0, view)])
        out.pyramids.append(p)
        out.last_step = group[-1][0]
    return out


def _evidence(index: RunIndex, evidence_ids: Sequence[int]) -> tuple[str, str]:
    """The rows of the findings' outlines (blob) and what was cut from them ("" when nothing)."""
    ids = list(dict.fromkeys(int(i) for i in evidence_ids))
    cut = ""
    if len(ids) > MAX_EVIDENCE_ROWS:
        cut = f"outlines of {len(ids) - MAX_EVIDENCE_ROWS:,} of the findings' {len(ids):,} intervals"
    return pack(interval_rows(index, ids[:MAX_EVIDENCE_ROWS]) if ids else []), cut


def embed_timeline(
    index: RunIndex,
    focus: Sequence[Focus],
    evidence_ids: Sequence[int] = (),
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    finding_windows: Sequence[tuple[int, int]] = (),
    steps: Sequence[tuple[int, int, int]] = (),
) -> EmbeddedTimeline:
    """The views of ``index`` to embed within ``budget_bytes`` (module doc): the overview, then every interval
    when they fit, else each of ``finding_windows`` (absolute ns: what a click on a finding shows), every one of
    ``steps`` ((step, start_ns, end_ns), absolute ns) at the finest level that fits them all, then finer levels
    of the ``focus`` windows (absolute ns, as in the analysis); rows of ``evidence_ids`` (at most
    MAX_EVIDENCE_ROWS) for the findings' outlines. The overview is always embedded."""
    span = max(1, index.end_ns - index.origin_ns)
    evidence, cut = _evidence(index, evidence_ids)
    overview = _view(index, 0, span, OVERVIEW_WIDTH_PX, 0, OVERVIEW)
    views = _Views(budget_bytes - len(evidence) - len(overview.blob))
    full = _full_view(index, views.room) if overview.merged else None
    if full is not None or not overview.merged:
        chosen = (overview, full) if full else (overview,)
        detail = f"every interval of the run ({len(index.start):,}), one by one; nothing is coarse"
        return EmbeddedTimeline(tuple(focus), chosen, evidence, _notes(cut), budget_bytes, detail)
    notes, detail = _embed_levels(index, focus, finding_windows, steps, views)
    return EmbeddedTimeline(tuple(focus), (overview, *views.items), evidence, _notes(cut, *notes), budget_bytes, detail)


def _embed_levels(
    index: RunIndex,
    focus: Sequence[Focus],
    finding_windows: Sequence[tuple[int, int]],
    steps: Sequence[tuple[int, int, int]],
    views: _Views,
) -> tuple[list[str], str]:
    """Into ``views``: the finding windows, the steps (or the whole run) at the finest level that fits all of
    them, the focus steps finer, then the first steps one level finer while they fit. Returns what is coarse
    (notes) and what is fine (detail)."""
    notes = [_add_findings(index, finding_windows, views)]
    if steps:
        by_step = _add_steps(index, steps, focus, views)
        pyramids = by_step.pyramids
    else:
        pyramids = [_Pyramid(0, max(1, index.end_ns - index.origin_ns), "the whole run", STEP_VIEW)]
    _deepen_together(index, pyramids, views)
    uniform = max((p.level for p in pyramids), default=-1)
    shared = {(p.start_ns, p.end_ns): p for p in pyramids}
    extra = [shared.get((q.start_ns, q.end_ns), q) for q in (_focus_pyramid(index, i, f) for i, f in enumerate(focus))]
    _deepen_each(index, extra, views)
    leading = _deepen_leading(index, pyramids, views)
    own = [(p, f) for p, f in zip(extra, focus, strict=True) if p.kept or p.level > uniform or p not in pyramids]
    if steps:
        notes += [by_step.budget_note(), by_step.coarse_note(leading), OUTSIDE_STEPS]
        detail = by_step.detail()
    else:
        notes += [pyramids[0].note("the run has no steps, so the whole run")]
        detail = "the run has no steps: the whole run in one view, " + _depth(pyramids[0])
    notes += [p.note(f"the {f.label} ({_name(f)})") for p, f in own if p not in leading]
    detail += "".join(f"; the {f.label} ({_name(f)}) {_depth(p)}" for p, f in own)
    return notes, detail


def _depth(p: _Pyramid) -> str:
    """How fine a pyramid goes, in a few words."""
    if p.level < 0:
        return "no view of its own"
    return f"down to {_fmt_ns(p.px_ns(p.level))} per pixel" if p.coarse else "every interval one by one"


def _notes(*notes: str) -> tuple[str, ...]:
    return tuple(n for n in notes if n)


def _count(n: int, noun: str) -> str:
    """A count and its noun: "1 view", "3 views"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _fmt_ns(ns: float) -> str:
    from webapp.formatting import fmt_ns

    return fmt_ns(ns)


def _name(f: Focus) -> str:
    return f"step {f.step}" if f.step >= 0 else "window"
