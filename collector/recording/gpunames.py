"""Names of GPU work in a recorded trace: the ``aten::`` op that launched it, or the compiled graph it ran in.

Used by collector.recording.enrich. :class:`Strings` relabels a string column by category code (never a
Python string per row); :func:`op_names` names GPU work by the innermost op around its launch where ops were
recorded, else by the op most often seen launching the same kernel; :func:`region_names` names the rest
(Triton's kernels, launched by compiled code outside any op) after the ``torch.compile`` graph they ran in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from collector.importers.kineto_sync import latest_start
from collector.model import GPU_CODES, KIND_CODE


class Strings:
    """A string column as codes into a list of distinct labels that can grow: rows are relabelled by code,
    never by a Python string per row."""

    def __init__(self, col: pd.Series) -> None:
        cat = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype(str).astype("category")
        self.labels = [str(c) for c in cat.cat.categories]
        self._index = {label: i for i, label in enumerate(self.labels)}
        codes = cat.cat.codes.to_numpy().astype(np.int64)
        self.codes = np.where(codes < 0, self.code(""), codes) if (codes < 0).any() else codes

    def code(self, label: str) -> int:
        """The code of ``label`` (added when new)."""
        at = self._index.get(label)
        if at is None:
            at = self._index[label] = len(self.labels)
            self.labels.append(label)
        return at

    def codes_of(self, labels: Sequence[str]) -> np.ndarray:
        return np.array([self.code(x) for x in labels], dtype=np.int64)

    def categorical(self) -> pd.Categorical:
        return pd.Categorical.from_codes(self.codes, categories=pd.Index(self.labels, dtype=object))


def op_names(
    names: Strings, kind: np.ndarray, start: np.ndarray, end: np.ndarray, key: np.ndarray, launch: np.ndarray
) -> str:
    """GPU work renamed (in place) after the ``aten::`` op that launched it; returns how names were found."""
    ops = np.flatnonzero(kind == KIND_CODE["cpu_op"])
    work = np.flatnonzero(np.isin(kind, GPU_CODES) & (launch >= 0))
    if len(ops) == 0 or len(work) == 0:
        return "kernel names (no op names were recorded)"
    lpos = launch[work]
    inner = np.full(len(work), -1, dtype=np.int64)
    near = np.flatnonzero(start[lpos] <= end[ops].max())  # launches after the last named op have no op
    inner[near] = innermost_enclosing(key[ops], start[ops], end[ops], key[lpos[near]], start[lpos[near]])
    ok = inner >= 0
    op_of = np.full(len(work), -1, dtype=np.int64)
    op_of[ok] = names.codes[ops[inner[ok]]]
    if ok.any():
        op_of[~ok] = usual_op(names.codes[work[ok]], op_of[ok], len(names.labels))[names.codes[work[~ok]]]
    have = op_of >= 0
    names.codes[work[have]] = op_of[have]
    exact = int(ok.sum())
    return f"aten ops: {exact} exact (recorded), {int(have.sum()) - exact} by their kernel, rest kernel names"


def usual_op(kernel: np.ndarray, op: np.ndarray, n_codes: int) -> np.ndarray:
    """Per name code (``n_codes`` of them): the op code seen most often with it as ``kernel``, the first
    seen among equals, or -1 if never seen."""
    out = np.full(n_codes, -1, dtype=np.int64)
    pairs, first, counts = np.unique(kernel * n_codes + op, return_index=True, return_counts=True)
    k = pairs // n_codes
    best = np.lexsort((first, -counts, k))  # per kernel: most seen, then earliest
    lead = np.ones(len(best), dtype=bool)
    lead[1:] = k[best[1:]] != k[best[:-1]]
    out[k[best[lead]]] = pairs[best[lead]] % n_codes
    return out


def innermost_enclosing(
    iv_key: np.ndarray, iv_start: np.ndarray, iv_end: np.ndarray, pt_key: np.ndarray, pt_t: np.ndarray
) -> np.ndarray:
    """For each point (key, t): position of the innermost interval with that key containing t, or -1.

    Intervals on one key nest like a call stack (``aten::mm`` holds the ``aten::empty`` that made its output,
    then the launch). The latest interval starting before t may have ended already; then its enclosing one
    is tried, and so on outward. Parents come from one stack pass over the intervals (host ops of the
    named steps only); the walk outward is vectorized over the points.
    """
    out = np.full(len(pt_t), -1, dtype=np.int64)
    if len(iv_start) == 0 or len(pt_t) == 0:
        return out
    order = np.lexsort((-iv_end, iv_start, iv_key))
    k, s, e = iv_key[order], iv_start[order], iv_end[order]
    parent = np.full(len(order), -1, dtype=np.int64)
    stack: list[int] = []
    for i in range(len(order)):
        if stack and k[stack[-1]] != k[i]:
            stack = []
        while stack and e[stack[-1]] < s[i]:
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    cur = latest_start(k, s, pt_key, pt_t)
    while True:
        open_ = np.flatnonzero(cur >= 0)
        ended = open_[e[cur[open_]] < pt_t[open_]]
        if len(ended) == 0:
            break
        cur[ended] = parent[cur[ended]]
    hit = cur >= 0
    out[hit] = order[cur[hit]]
    return out


def region_names(
    names: Strings,
    work: np.ndarray,
    launch_key: np.ndarray,
    launch_t: np.ndarray,
    regions: Sequence[tuple[int, str, int, int]],
    region_key: np.ndarray,
) -> int:
    """GPU work rows ``work`` (launched at ``launch_t`` on thread key ``launch_key``) that no op named,
    renamed (in place) ``<region>: <kernel>`` after the compiled graph call they were launched in, innermost
    first; ``regions``: (tid, name, start_ns, end_ns) with ``region_key`` their thread keys. Returns how many."""
    if not len(work) or not regions:
        return 0
    r_start = np.array([r[2] for r in regions], dtype=np.int64)
    r_end = np.array([r[3] for r in regions], dtype=np.int64)
    hit = innermost_enclosing(region_key, r_start, r_end, launch_key, launch_t)
    rows, hit = work[hit >= 0], hit[hit >= 0]
    if not len(rows):
        return 0
    region_code = pd.factorize(np.array([r[1] for r in regions], dtype=object))[0]
    n_regions = int(region_code.max()) + 1
    pair = names.codes[rows] * n_regions + region_code[hit]
    distinct, at = np.unique(pair, return_inverse=True)
    region_of = {int(c): r[1] for c, r in zip(region_code.tolist(), regions, strict=True)}
    labels = [f"{region_of[int(p % n_regions)]}: {names.labels[int(p // n_regions)]}" for p in distinct.tolist()]
    names.codes[rows] = names.codes_of(labels)[at.reshape(-1)]
    return len(rows)
