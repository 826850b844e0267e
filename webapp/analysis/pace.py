"""Whether one median describes a run's steps: a loop that changes pace part-way (a different code path, a
warm-up that never ends, a fix switched on half-way) has two groups of step times, and their median may lie
between them, describing no step at all.

:func:`pace_note` splits the step times at their widest gap (ratio of neighbours when sorted); the split is a
change of pace when both groups hold at least MIN_GROUP_FRAC of the steps, the gap is at least GAP_RATIO
wide and each group is tight (its p90/p10 below the gap).
"""

from __future__ import annotations

import numpy as np

MIN_GROUP_FRAC = 0.2
"""Each group holds at least a fifth of the steps: a few slow steps (checkpoints, eval) are outliers."""
GAP_RATIO = 1.5
"""The slower group's fastest step is at least 1.5x the faster group's slowest."""
MIN_STEPS = 10


def pace_note(step_ns: np.ndarray, step: np.ndarray) -> str:
    """A sentence when the steps (one rank's, in order: times in ns and step numbers) fall in two groups
    of different pace; '' when one median describes them."""
    t = np.asarray(step_ns, dtype=np.float64)
    n = len(t)
    if n < MIN_STEPS or not (t > 0).all():
        return ""
    order = np.argsort(t, kind="stable")
    s = t[order]
    lo = max(int(np.ceil(MIN_GROUP_FRAC * n)), 1)
    ratios = s[lo : n - lo + 1] / s[lo - 1 : n - lo]
    if not len(ratios):
        return ""
    k = lo + int(np.argmax(ratios))  # fast group: s[:k], slow group: s[k:]
    gap = float(ratios.max())
    fast, slow = s[:k], s[k:]
    tight = all(np.percentile(g, 90) / max(np.percentile(g, 10), 1.0) < gap for g in (fast, slow))
    if gap < GAP_RATIO or not tight:
        return ""
    is_slow = np.zeros(n, dtype=bool)
    is_slow[order[k:]] = True
    parts = [f"{int(m.sum())} steps at {np.median(t[m]) / 1e6:.2f} ms{_where(step, m)}" for m in (is_slow, ~is_slow)]
    return (
        f"The steps run at two paces: {parts[0]}, and {parts[1]}. The median over all ({np.median(t) / 1e6:.2f} "
        "ms) describes neither, and the findings' savings are averaged over both: the step chart and the "
        "per-step table show each part."
    )


def _where(step: np.ndarray, mask: np.ndarray) -> str:
    """' (steps A-B)' when the masked steps are one run of consecutive positions, else ''."""
    idx = np.flatnonzero(mask)
    if len(idx) and idx[-1] - idx[0] + 1 == len(idx):
        return f" (steps {int(step[idx[0]])}-{int(step[idx[-1]])})"
    return ""
