"""Where the host's time goes, from a torch.profiler trace recorded with ``with_stack=True``.

Its ``python_function`` events are Python calls, nested through ``Python parent id``. Each thread's calls
are cut into stretches during which its stack stayed the same (a call's own time, between its children),
and each stretch becomes a ``sample`` interval named like the recorder's sampled stacks: frames ``func
(file:line)`` from the outermost to the innermost, joined by ``;``. So the analysis reads both the same
way; here the stretches are exact (every call is in the trace), not sampled.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from collector.importers.kineto_lanes import lookup_first, per_lane
from collector.importers.kineto_sync import PyFrames
from collector.model import Lane, LaneKind, conform_intervals, stack_lane_ident, step_at

SEP = ";"
STACKS_LABEL = "Python stack (torch.profiler)"
"""Label of the lane that holds a thread's stack stretches (after the thread's own label)."""
MAX_DEPTH = 512
"""Deeper calls (or parent links that loop) are cut off and start a stack of their own."""
_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<func>.+)$")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_INSTALLED = re.compile(r"^.*?(?:site|dist)-packages/")


def frame_text(name: str) -> str:
    """``"torch/nn/modules/module.py(1739): _call_impl"`` -> ``"_call_impl (torch/nn/modules/module.py:1739)"``,
    as the recorder names frames (installed files from site-packages on); object addresses dropped from the
    rest (``<built-in method item of Tensor object at 0x7f..>``), which pass through otherwise."""
    m = _FRAME.match(name)
    if m is None:
        return _ADDRESS.sub("", name)
    return f"{m.group('func')} ({_INSTALLED.sub('', m.group('file'))}:{m.group('line')})"


def _parents(frames: PyFrames) -> tuple[np.ndarray, np.ndarray]:
    """Each call's parent position (-1 for a root) and depth (0 for a root)."""
    parent = np.where(frames.parent_id >= 0, lookup_first(frames.py_id, frames.parent_id), -1)
    depth = np.zeros(len(parent), dtype=np.int64)
    up = parent.copy()
    for _ in range(MAX_DEPTH):
        live = up >= 0
        if not live.any():
            break
        depth[live] += 1
        up[live] = parent[up[live]]
    cut = depth >= MAX_DEPTH
    parent[cut], depth[cut] = -1, 0
    return parent, depth


def _stacks(frames: PyFrames, categories: pd.Index, parent: np.ndarray, depth: np.ndarray) -> tuple[np.ndarray, list]:
    """Each call's stack id and the folded text of every stack id, built one depth level at a time (a text is
    made once per distinct stack, not per call)."""
    stack = np.full(len(parent), -1, dtype=np.int64)
    texts: list[str] = []
    frame_of: dict[int, str] = {}
    for d in range(int(depth.max()) + 1 if len(depth) else 0):
        at = np.flatnonzero(depth == d)
        if not len(at):
            continue
        above = stack[parent[at]] if d else np.full(len(at), -1, dtype=np.int64)
        pairs, which = np.unique(np.stack([above, frames.code[at].astype(np.int64)]), axis=1, return_inverse=True)
        stack[at] = len(texts) + which.reshape(-1)
        for up, code in pairs.T.tolist():
            text = frame_of.get(code)
            if text is None:
                text = frame_of[code] = frame_text(str(categories[code])) if code >= 0 else "?"
            texts.append(text if up < 0 else texts[up] + SEP + text)
    return stack, texts


def stack_stretches(frames: PyFrames, categories: pd.Index) -> pd.DataFrame:
    """Stretches of each thread's calls with one stack: columns ``thread`` (the events' thread key),
    ``start_ns``, ``end_ns`` and ``name`` (the folded stack), by thread then start. Empty without calls."""
    n = len(frames.key)
    if not n:
        return pd.DataFrame({"thread": [], "start_ns": [], "end_ns": [], "name": []})
    parent, depth = _parents(frames)
    stack, texts = _stacks(frames, categories, parent, depth)
    start, end = frames.start_ns.astype(np.int64), np.maximum(frames.end_ns, frames.start_ns).astype(np.int64)
    # a call's start opens its own stack; its end goes back to its parent's. At one time: ends before starts,
    # inner ends first, outer starts first. Calls that take no time hold no stretch
    timed = np.flatnonzero(end > start)
    t = np.concatenate([start[timed], end[timed]])
    opens = np.concatenate([np.ones(len(timed), bool), np.zeros(len(timed), bool)])
    call = np.concatenate([timed, timed])
    inner_first = np.concatenate([-(end - start)[timed], -start[timed]])
    key = np.concatenate([frames.key[timed], frames.key[timed]])
    if not len(t):
        return pd.DataFrame({"thread": [], "start_ns": [], "end_ns": [], "name": []})
    order = np.lexsort((inner_first, opens, t, key))
    t, opens, call, key = t[order], opens[order], call[order], key[order]
    now = np.where(opens, call, parent[call])  # the innermost call after each boundary
    t_next = np.append(t[1:], t[-1])
    keep = (now >= 0) & (t_next > t) & np.append(key[1:] == key[:-1], False)
    keep[keep] = end[now[keep]] >= t_next[keep]  # a parent that ended first (calls that do not nest)
    rows = np.flatnonzero(keep)
    sid, s, e, k = stack[now[rows]], t[rows], t_next[rows], key[rows]
    # a stack resumed right where it stopped (a child with no time between) is one stretch
    joined = np.append(False, (sid[1:] == sid[:-1]) & (k[1:] == k[:-1]) & (s[1:] == e[:-1]))
    head = np.flatnonzero(~joined)
    last = np.append(head[1:], len(rows)) - 1
    return pd.DataFrame(
        {
            "thread": k[head],
            "start_ns": s[head],
            "end_ns": e[last],
            "name": pd.Categorical.from_codes(sid[head], categories=pd.Index(texts, dtype=object)),
        }
    )


def stack_rows(
    stretches: pd.DataFrame, lanes: tuple[Lane, ...], rank: int, steps: pd.DataFrame, first_id: int
) -> tuple[pd.DataFrame, tuple[Lane, ...]]:
    """The stretches as ``sample`` intervals on a lane per thread, appended to ``lanes`` (ident:
    :func:`collector.model.stack_lane_ident`, label: the thread's own and STACKS_LABEL); rows in lane then start
    order, ids from ``first_id``."""
    tid = (stretches["thread"].to_numpy(np.int64) & 0xFFFFFFFF).astype(np.int64)
    threads, which = np.unique(tid, return_inverse=True)
    own = {ln.ident: ln.label for ln in lanes if ln.kind is LaneKind.CPU_THREAD}
    added = tuple(
        Lane(rank, LaneKind.CPU_THREAD, stack_lane_ident(t), f"{own.get(t, f'thread {t}')}: {STACKS_LABEL}")
        for t in threads.tolist()
    )
    lane = len(lanes) + which.reshape(-1)
    order = np.lexsort((stretches["start_ns"].to_numpy(np.int64), lane))
    start = stretches["start_ns"].to_numpy(np.int64)[order]
    frame = pd.DataFrame(
        {
            "id": np.arange(first_id, first_id + len(order), dtype=np.int64),
            "rank": rank,
            "lane": lane[order].astype(np.int32),
            "lane_kind": LaneKind.CPU_THREAD.value,
            "stream": np.array([a.ident for a in added], dtype=np.int64)[which.reshape(-1)[order]],
            "lane_label": per_lane([ln.label for ln in lanes + added], lane[order]),
            "kind": "sample",
            "name": stretches["name"].take(order).reset_index(drop=True),
            "start_ns": start,
            "end_ns": stretches["end_ns"].to_numpy(np.int64)[order],
            "step": step_at(steps, start),
        }
    )
    return conform_intervals(frame), lanes + added
