"""Where the host's time goes: host time by Python frame from ``sample`` intervals.

Each ``sample`` interval is a stretch during which a host thread's Python stack stayed the same, named by
the stack in folded form: frames ``func (file:line)`` from the outermost to the innermost, joined by ``;``.
The recorder samples them; a torch.profiler trace recorded with ``with_stack=True`` has them exactly (its
``python_function`` calls, collector.importers.kineto_stacks). The recorder's sync waits, timed exactly with
their line, take their part of a sampled stretch to that line (:func:`_waits_in_samples`). Without stacks,
host time by CPU op (self time, nested ops taken out) stands in.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from collector.model import IntervalKind, stack_lane_ident
from webapp.analysis import intervals as iv
from webapp.analysis.causal.graph import Graph
from webapp.analysis.context import RunData, kind_mask

SEP = ";"
LOADING = re.compile(r"^(__next__|_next_data) \(.*torch/utils/data/dataloader\.py:\d+\)$")
"""Frames of a DataLoader's ``__next__``: the step waiting for its batch to be loaded in this process."""
FROM_WORKERS = re.compile(r"(^|;)(_try_get_data|_get_data) \([^;]*torch/utils/data/dataloader\.py:\d+\)(;|$)")
"""Frames of a DataLoader whose batches come from worker processes (``num_workers`` above 0), waiting for one."""
OUTER_SHARE = 0.9
"""Frames holding more than this share of the host's time are the loop around everything (``main``,
``train``), not an answer to where the time went."""
EVERYWHERE = 0.99
"""Frames holding this share of the host's time are on (nearly) every sampled stack."""
SPECIFIC = 0.8
"""A frame inside a named one replaces it when it holds at least this share of its time."""
FRAME_FILE = re.compile(r"\((.*):\d+\)$")
RECORDER_FRAME = re.compile(r"(^|;)[^;]*\(collector/recording/")
"""A frame of the recorder itself (naming ops in the first step, its start-up probe): it and the frames it
calls are the recorder's time, counted to the user's line that was running."""

FRAME_COLUMNS = {
    "frame": "function and file:line ('func (file.py:12)'), or a CPU op's name",
    "self_ns": "host time with this frame innermost, over the steps, ns",
    "total_ns": "host time with this frame anywhere on the stack, over the steps, ns",
    "total_frac": "total_ns over all sampled host time in the steps",
    "per_step_ns": "total_ns per step, ns",
}


BASES = ("sampled", "traced", "cpu_ops")
"""What the frame table can be read from: the recorder's sampled Python stacks; torch.profiler's Python calls
(``with_stack=True``), exact; CPU ops' own and total time (a torch.profiler trace without Python stacks). The
run page words each (run_parts.js ``HOST_BASES``)."""


def frames_basis(rd: RunData) -> str:
    """Which of BASES the frame table reads, '' for none. CPU ops stand in only where the trace has all of
    them (torch.profiler's, and the recorder's ``--timing cpu``); with GPU timing the recorder names ops in
    its first step only."""
    profiler = rd.trace.meta.source == "torch.profiler"
    if len(sample_rows(rd)):
        return "traced" if profiler else "sampled"
    every_op = profiler or (rd.trace.meta.notes or {}).get("timing") == "cpu"
    return "cpu_ops" if every_op and kind_mask(rd.kind, IntervalKind.CPU_OP).any() else ""


def missing_text(rd: RunData) -> str:
    """Why the run has no host time by frame and how to get it (one sentence); '' when it has some."""
    if frames_basis(rd):
        return ""
    meta = rd.trace.meta
    if meta.source == "torch.profiler":
        return (
            "The trace has no Python stacks or CPU ops to say where the host's time went: profile with "
            "torch.profiler(..., with_stack=True)."
        )
    notes = meta.notes or {}
    timing = str(notes.get("timing") or "")
    if not meta.streamscope_version:
        return "The trace has no Python stacks to say where the host's time went."
    if "fell back" in str(notes.get("timing_note") or ""):
        return "CUPTI was taken by another tool, so the recorder fell back to CUDA events, which sample no stacks."
    if timing == "cpu":
        return (
            "Recorded with --timing cpu, which keeps host ops and collectives but no Python stacks (the recorder "
            "samples stacks when it times GPU work with CUPTI)."
        )
    if timing == "events":
        return "Recorded with --timing events: the recorder samples the host's Python stacks with CUPTI timing only."
    if "stack_samples" in notes:
        return "The recorder sampled no Python stack inside the steps (the steps are shorter than its 5 ms period)."
    return (
        "This recording has no Python stacks (recorded with stacks=False, or before the recorder sampled them): "
        "record it again to see where the host's time went."
    )


def sample_rows(rd: RunData, rank: int | None = None) -> np.ndarray:
    """Rows of sampled host stacks inside the step windows (of ``rank`` only, when given)."""
    return _on_rank(rd, np.flatnonzero(kind_mask(rd.kind, IntervalKind.SAMPLE) & (rd.win_row >= 0)), rank)


def _on_rank(rd: RunData, rows: np.ndarray, rank: int | None) -> np.ndarray:
    """Those of ``rows`` on ``rank`` (all of them for None)."""
    return rows if rank is None else rows[rd.rank[rows] == rank]


def _stack_times(rd: RunData, rows: np.ndarray) -> pd.Series:
    """Sampled host time (ns) per folded stack over the ``sample`` rows ``rows``, each stack cut at the
    recorder's own frames (:func:`without_recorder`), and the recorded sync waits inside a sampled stretch
    given to the line that waited (:func:`_waits_in_samples`)."""
    dur = (rd.e[rows] - rd.s[rows]).astype(np.int64)
    codes, names = pd.factorize(rd.strings("name", rows))
    stacks = np.array([without_recorder(str(s)) for s in names], dtype=object)[codes]
    moved: list[tuple[str, int]] = []
    if rd.trace.meta.source != "torch.profiler":  # its Python calls are exact: a wait is inside its own line
        taken, moved = _waits_in_samples(rd, rows, stacks)
        dur = dur - taken
    by_stack = pd.Series(dur, index=stacks).groupby(level=0).sum()
    if moved:
        parts = pd.Series([ns for _, ns in moved], index=[st for st, _ in moved]).groupby(level=0).sum()
        by_stack = by_stack.add(parts, fill_value=0).astype(np.int64)
    return by_stack


def _waits_in_samples(rd: RunData, rows: np.ndarray, stacks: np.ndarray) -> tuple[np.ndarray, list[tuple[str, int]]]:
    """The recorded sync waits of a sampled thread that fall inside its sampled stretches. A stretch carries
    the stack sampled at its start, so a wait that begins within it (the host blocked at ``.item()`` right
    after a backward the sampler caught) would count to that stack; the wait is recorded exactly, with its
    line. Returns the ns of each of ``rows`` spent in such waits, and ``(stack, ns)`` for each part moved: the
    stretch's stack up to its innermost frame in the wait's file, that frame at the wait's line (the frame's
    function as sampled at that line anywhere in the run, where it was). A wait whose file is not on the
    stretch's stack stays with it (where it was called from is not known)."""
    taken = np.zeros(len(rows), dtype=np.int64)
    moved: list[tuple[str, int]] = []
    waits = np.flatnonzero(kind_mask(rd.kind, IntervalKind.SYNC_WAIT))
    if not len(waits) or not len(rows):
        return taken, moved
    lanes = rd.trace.lanes
    lane = rd.ints("lane", rows)
    wait_lane = rd.ints("lane", waits)
    source = rd.strings("source", waits)
    known = _frames_by_line(stacks)
    placed: dict[tuple[str, str], str | None] = {}  # (stretch's stack, wait's source) -> the wait's stack
    for sampled in np.unique(lane).tolist():
        ln = lanes[sampled]
        thread = [
            i
            for i, t in enumerate(lanes)
            if t.rank == ln.rank and stack_lane_ident(t.ident) == ln.ident and t.kind == ln.kind
        ]
        mine = np.flatnonzero(lane == sampled)
        mine = mine[np.argsort(rd.s[rows[mine]], kind="stable")]
        on = np.isin(wait_lane, thread) & (source != "") if thread else np.zeros(len(waits), dtype=bool)
        w, wsource = waits[on], source[on]
        if not len(w) or not len(mine):
            continue
        s, e = rd.s[rows[mine]], rd.e[rows[mine]]
        ws, we = rd.s[w], rd.e[w]
        lo = np.searchsorted(e, ws, side="right")  # the first stretch that ends after the wait starts
        hi = np.searchsorted(s, we, side="left")  # past the last that starts before it ends
        count = np.maximum(hi - lo, 0)
        pair_w = np.repeat(np.arange(len(w)), count)
        pair_k = lo[pair_w] + np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        overlap = np.minimum(e[pair_k], we[pair_w]) - np.maximum(s[pair_k], ws[pair_w])
        for k, j, ns in zip(pair_k.tolist(), pair_w.tolist(), overlap.tolist(), strict=True):
            if ns <= 0:
                continue
            key = (str(stacks[mine[k]]), str(wsource[j]))
            if key not in placed:
                placed[key] = _at_line(*key, known)
            stack = placed[key]
            if stack is None or stack == key[0]:
                continue
            taken[mine[k]] += ns
            moved.append((stack, ns))
    return taken, moved


def _frames_by_line(stacks: np.ndarray) -> dict[str, str]:
    """``file:line`` -> the function sampled there, over the distinct ``stacks``."""
    out: dict[str, str] = {}
    for stack in dict.fromkeys(stacks.tolist()):
        for frame in str(stack).split(SEP):
            if _frame_file(frame):
                out.setdefault(frame[frame.rfind(" (") + 2 : -1], _frame_func(frame))
    return out


def _frame_func(frame: str) -> str:
    """``"func (path/file.py:12)"`` -> ``"func"``."""
    return frame[: frame.rfind(" (")]


def _at_line(stack: str, source: str, known: dict[str, str]) -> str | None:
    """``stack`` up to its innermost frame in ``source``'s file (of the function sampled at ``source``'s line,
    where ``known``, :func:`_frames_by_line`, has it), that frame at ``source``'s line (``source``:
    ``path:line``, the path absolute or as the frames give it); None where no such frame is on the stack."""
    path, _, line = source.rpartition(":")
    if not path or not line.isdigit():
        return None
    frames = stack.split(SEP)
    for k in range(len(frames) - 1, -1, -1):
        file, func = _frame_file(frames[k]), _frame_func(frames[k])
        if not file or not (path == file or path.endswith("/" + file)):
            continue
        if known.get(f"{file}:{line}", func) != func:
            continue  # that line is in another function of the file: a frame further out may be it
        return SEP.join([*frames[:k], f"{func} ({file}:{line})"])
    return None


def without_recorder(stack: str) -> str:
    """``stack`` without its innermost frames from the recorder's first frame on: the op the user's line ran
    while the recorder named it is that line's time, not the recorder's ``__torch_dispatch__``. A stack that is
    the recorder's alone stays whole."""
    m = RECORDER_FRAME.search(stack)
    return stack if m is None or m.start() == 0 else stack[: m.start()]


def frame_table(rd: RunData, limit: int = 50, rank: int | None = None) -> pd.DataFrame:
    """Host time by frame over the steps (of ``rank`` only, when given), most time first; columns
    :data:`FRAME_COLUMNS`. Empty without samples or CPU ops."""
    basis = frames_basis(rd)
    rows = _on_rank(rd, _basis_rows(rd, basis), rank)
    n_steps = len(rd.win) if rank is None else int(np.sum(rd.win_rank == rank))
    return _frame_table(rd, rows, basis, max(n_steps, 1), limit)


def frame_tables_by_rank(rd: RunData, limit: int = 50) -> dict[int, pd.DataFrame]:
    """:func:`frame_table` of each rank that has rows for it, the trace's rows read once."""
    basis = frames_basis(rd)
    rows = _basis_rows(rd, basis)
    owner = rd.rank[rows]
    return {
        int(r): _frame_table(rd, rows[owner == r], basis, max(int(np.sum(rd.win_rank == r)), 1), limit)
        for r in np.unique(owner).tolist()
    }


def _basis_rows(rd: RunData, basis: str) -> np.ndarray:
    """The rows ``basis`` reads inside the steps: sampled stacks, or CPU ops (none for '')."""
    if basis != "cpu_ops":
        return sample_rows(rd) if basis else np.zeros(0, dtype=np.int64)
    return np.flatnonzero(kind_mask(rd.kind, IntervalKind.CPU_OP) & (rd.win_row >= 0))


def _frame_table(rd: RunData, rows: np.ndarray, basis: str, n_steps: int, limit: int) -> pd.DataFrame:
    self_t: dict[str, int] = {}
    total_t: dict[str, int] = {}
    whole = 0
    if basis in ("sampled", "traced"):
        by_stack = _stack_times(rd, rows)
        for stack, t in by_stack.items():
            frames = str(stack).split(SEP)
            self_t[frames[-1]] = self_t.get(frames[-1], 0) + int(t)
            for f in dict.fromkeys(frames):
                total_t[f] = total_t.get(f, 0) + int(t)
        whole = int(by_stack.sum())
    elif basis == "cpu_ops":
        self_t, total_t, whole = _cpu_op_times(rd, rows)
    if not total_t:
        return pd.DataFrame({c: pd.Series(dtype="object" if c == "frame" else "float64") for c in FRAME_COLUMNS})
    out = pd.DataFrame(
        {
            "frame": list(total_t),
            "self_ns": [self_t.get(f, 0) for f in total_t],
            "total_ns": list(total_t.values()),
        }
    )
    out["total_frac"] = out["total_ns"] / max(whole, 1)
    out["per_step_ns"] = out["total_ns"] / n_steps
    # frames on every stack (the script, the framework's loop, a test runner's dozens) say nothing and would
    # crowd out the rest: only the innermost of them stays
    everywhere = out[(out["total_frac"] >= EVERYWHERE) & (out["self_ns"] == 0)]
    if len(everywhere) > 1:
        out = out.drop(everywhere.index[:-1])
    return out.sort_values(["total_ns", "self_ns"], ascending=False, kind="stable").head(limit).reset_index(drop=True)


def _cpu_op_times(rd: RunData, rows: np.ndarray) -> tuple[dict[str, int], dict[str, int], int]:
    """Host CPU ops ``rows`` (inside the steps) by name: self time (children's time taken out), total time
    (each call whole, a call inside another of the same name not counted again), and the union of their
    time."""
    if not len(rows):
        return {}, {}, 0
    lane = rd.ints("lane", rows)
    order = np.lexsort((-(rd.e[rows] - rd.s[rows]), rd.s[rows], lane))
    rows, lane = rows[order], lane[order]
    s, e = rd.s[rows].tolist(), rd.e[rows].tolist()
    names = rd.strings("name", rows)
    name_list = names.tolist()
    child = [0] * len(rows)
    outermost = [True] * len(rows)
    stack: list[int] = []
    lanes = lane.tolist()
    for i in range(len(rows)):
        while stack and (lanes[stack[-1]] != lanes[i] or e[stack[-1]] <= s[i]):
            stack.pop()
        if stack:
            child[stack[-1]] += e[i] - s[i]
            outermost[i] = all(name_list[j] != name_list[i] for j in stack)
        stack.append(i)
    dur = rd.e[rows] - rd.s[rows]
    own = np.maximum(dur - np.array(child, dtype=np.int64), 0)
    by_self = pd.Series(own, index=names).groupby(level=0).sum()
    by_total = pd.Series(np.where(outermost, dur, 0), index=names).groupby(level=0).sum()
    return (
        {str(k): int(v) for k, v in by_self.items()},
        {str(k): int(v) for k, v in by_total.items()},
        iv.union(rd.s[rows], rd.e[rows]).total,
    )


def top_frames(rd: RunData, count: int = 3, rank: int | None = None) -> str:
    """The few frames that say where the host's time went (on ``rank`` only, when given), with their share:
    the heaviest frames that are not the loop around everything, each replaced by a frame inside it that holds
    most of its time, and named with its caller where that is another file's (:func:`_with_caller`). A frame
    around everything whose own line holds a tenth of the time or more is named with that share. '' without
    samples."""
    rows = sample_rows(rd, rank)
    if not len(rows):
        return ""
    table = frame_table(rd, limit=200, rank=rank)
    # a frame around everything answers nothing, unless its own line holds the time (a loop of ops in C++)
    own = table["self_ns"] * table["total_frac"] / table["total_ns"].clip(lower=1)
    lines = table[(table["total_frac"] > OUTER_SHARE) & (own >= 1 - OUTER_SHARE)]
    own_lines = set(lines["frame"])
    table = table[table["total_frac"] <= OUTER_SHARE]
    by_stack = _stack_times(rd, rows)
    inside: dict[str, set[str]] = {}
    total: dict[str, int] = {}  # each frame's time anywhere on the stack
    pairs: dict[tuple[str, str], int] = {}  # (caller, frame): time with the caller calling the frame
    for stack, t in by_stack.items():
        frames = str(stack).split(SEP)
        for i, f in enumerate(frames):
            inside.setdefault(f, set()).update(frames[i + 1 :])
        for f in dict.fromkeys(frames):
            total[f] = total.get(f, 0) + int(t)
        for pair in dict.fromkeys(zip(frames, frames[1:], strict=False)):
            pairs[pair] = pairs.get(pair, 0) + int(t)
    share = dict(zip(table["frame"], table["total_frac"], strict=True))
    share |= dict(zip(lines["frame"], own[lines.index], strict=True))
    chosen: list[str] = []
    named: list[str] = []  # chosen frames and the frames they stand for
    for frame in sorted(share, key=lambda f: -share[f]):
        if frame in own_lines:
            chosen.append(frame)  # its own line's time: the frames inside it are the rest, named on their own
            if len(chosen) == count:
                break
            continue
        if any(frame in inside.get(c, ()) for c in named) or any(c in inside.get(frame, ()) for c in named):
            continue
        best = frame
        for deeper in sorted(inside.get(frame, ()), key=lambda f: -share.get(f, 0.0)):
            if share.get(deeper, 0.0) >= SPECIFIC * share[frame]:
                best = deeper
            break
        chosen.append(best)
        named += [frame, best]
        if len(chosen) == count:
            break
    return ", ".join(f"{_with_caller(f, pairs, total)} {share.get(f, 0.0):.0%}" for f in chosen)


def _with_caller(frame: str, pairs: dict[tuple[str, str], int], total: dict[str, int]) -> str:
    """``frame``, and the frame of another file that called it for most of its time when that caller's own
    time is mostly spent calling it ("decode (PIL/Image.py:80) in load_batch (train.py:40)"): the line of the
    user's code behind a library's time. ``pairs``: ns per (caller, frame); ``total``: ns per frame."""
    calls = {c: t for (c, f), t in pairs.items() if f == frame}
    caller = max(calls, key=calls.__getitem__, default="")
    if caller and _frame_file(caller) != _frame_file(frame) and calls[caller] >= SPECIFIC * total.get(caller, 0):
        return f"{frame} in {caller}"
    return frame


def _frame_file(frame: str) -> str:
    """``"func (path/file.py:12)"`` -> ``"path/file.py"`` ('' for a frame without a file)."""
    m = FRAME_FILE.search(frame)
    return m.group(1) if m else ""


def loads_in_workers(rd: RunData) -> bool:
    """Whether a sampled stack shows the DataLoader waiting for a worker's batch: its batches already reach the
    process in shared memory."""
    rows = sample_rows(rd)
    return bool(len(rows)) and any(FROM_WORKERS.search(str(u)) for u in pd.unique(rd.strings("name", rows)))


def loading_cut(rd: RunData, g: Graph, nodes: np.ndarray) -> np.ndarray | None:
    """Host time before each of ``nodes`` (in its ``h_delta``) spent in a DataLoader's ``__next__``, ns (0 for
    other nodes); None without samples."""
    rows = sample_rows(rd)
    if not len(rows):
        return None
    stacks = pd.Series(rd.strings("name", rows))
    codes, uniq = pd.factorize(stacks)
    loads = np.array([any(LOADING.match(f) for f in str(u).split(SEP)) for u in uniq], dtype=bool)
    hit = rows[loads[codes]] if len(uniq) else rows[:0]
    if not len(hit):
        return np.zeros(g.n_host, dtype=np.int64)
    loading = iv.union(rd.s[hit], rd.e[hit])
    prev = g.h_start - g.h_delta  # the previous node's start (or the epoch's start)
    cut = loading.measure_in(prev, g.h_start)
    keep = np.zeros(g.n_host, dtype=bool)
    keep[nodes] = True
    return np.where(keep, cut, 0).astype(np.int64)
