"""Set-up and tail: each rank's work before its first step window and after its last one.

These phases are one-time work (the model moved to the GPU, warm-up, first-call library set-up, saving
results). They are measured here and shown apart; no per-step metric, finding or what-if counts them
(findings and metrics only look inside step windows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from collector.model import IntervalKind
from webapp.analysis import intervals as iv
from webapp.analysis.context import RunData, kind_mask
from webapp.analysis.units import size_text

PHASE_COLUMNS: dict[str, str] = {
    "rank": "distributed rank",
    "phase": "'setup' (before the first step) or 'tail' (after the last step)",
    "start_ns": "phase start, ns on the run clock",
    "end_ns": "phase end, ns on the run clock",
    "dur_ns": "end_ns - start_ns, ns",
    "gpu_busy_ns": "union of GPU intervals in the phase, ns",
    "collective_ns": "union of collectives in the phase (gloo's on host threads too), ns",
    "copy_count": "host-to-device and device-to-host copies starting in the phase",
    "copy_bytes": "their bytes",
    "copy_ns": "their summed duration within the phase, ns",
    "sync_wait_ns": "host time waiting in syncs in the phase, ns",
    "top_source": "user file:line behind most of the phase's copy and sync time ('' if unknown)",
}


def _empty() -> pd.DataFrame:
    return pd.DataFrame(
        {c: pd.Series(dtype="object" if c in ("phase", "top_source") else "int64") for c in PHASE_COLUMNS}
    )


def phase_frame(rd: RunData) -> pd.DataFrame:
    """One row per (rank, phase) that lasts, with the columns of :data:`PHASE_COLUMNS` (times int64 ns)."""
    if not len(rd.win) or not len(rd.s):
        return _empty()
    n_rank = int(rd.rank.max()) + 1
    lo = np.full(n_rank, np.iinfo(np.int64).max)
    hi = np.full(n_rank, np.iinfo(np.int64).min)
    np.minimum.at(lo, rd.rank, rd.s)
    np.maximum.at(hi, rd.rank, rd.e)
    first = np.full(n_rank, np.iinfo(np.int64).max)
    last = np.full(n_rank, np.iinfo(np.int64).min)
    np.minimum.at(first, rd.win_rank, rd.win.starts)
    np.maximum.at(last, rd.win_rank, rd.win.ends)
    has = np.flatnonzero((hi >= lo) & (last >= first))
    rank = np.concatenate([has, has])
    a = np.concatenate([lo[has], last[has]])
    b = np.concatenate([first[has], hi[has]])
    phase = np.array(["setup"] * len(has) + ["tail"] * len(has), dtype=object)
    keep = b > a
    rank, a, b, phase = rank[keep], a[keep], b[keep], phase[keep]
    if not len(a):
        return _empty()
    order = np.argsort(a, kind="stable")
    rank, a, b, phase = rank[order], a[order], b[order], phase[order]
    # copies and syncs outside every step window, each given to the phase holding its start
    rows = np.flatnonzero((rd.win_row < 0) & (rd.copy_mask | rd.sync_mask))
    which = np.searchsorted(a, rd.s[rows], side="right") - 1
    inside = (which >= 0) & (rd.s[rows] < b[np.maximum(which, 0)])
    rows, which = rows[inside], which[inside]
    dur = np.minimum(rd.e[rows], b[which]) - rd.s[rows]  # within the phase: a copy may run on into a step
    copies = rd.copy_mask[rows]
    coll = kind_mask(rd.kind, IntervalKind.COLLECTIVE)
    n = len(a)
    count = np.bincount(which[copies], minlength=n)
    cbytes = np.bincount(which[copies], weights=rd.ints("bytes", rows[copies]).astype(np.float64), minlength=n)
    cdur = np.bincount(which[copies], weights=dur[copies].astype(np.float64), minlength=n)
    return pd.DataFrame(
        {
            "rank": rank,
            "phase": phase,
            "start_ns": rd.tb.from_axis(rank, a),
            "end_ns": rd.tb.from_axis(rank, b),
            "dur_ns": b - a,
            "gpu_busy_ns": rd.gpu.measure_in(a, b),
            "collective_ns": iv.union(rd.s[coll], rd.e[coll]).measure_in(a, b),
            "copy_count": count.astype(np.int64),
            "copy_bytes": cbytes.astype(np.int64),
            "copy_ns": cdur.astype(np.int64),
            "sync_wait_ns": rd.sync.measure_in(a, b),
            "top_source": _top_source(rd, rows, which, dur, n),
        }
    )


def _top_source(rd: RunData, rows: np.ndarray, which: np.ndarray, dur: np.ndarray, n: int) -> np.ndarray:
    """Per phase, the source whose copies and syncs (``rows``, in phase ``which``, lasting ``dur`` ns there)
    took longest ('' for none)."""
    out = np.full(n, "", dtype=object)
    if not len(rows):
        return out
    frame = pd.DataFrame({"phase": which, "source": rd.strings("source", rows), "dur": dur})
    frame = frame[frame["source"] != ""]
    if frame.empty:
        return out
    best = frame.groupby(["phase", "source"])["dur"].sum().reset_index().sort_values("dur", ascending=False)
    best = best.drop_duplicates("phase")
    out[best["phase"].to_numpy()] = best["source"].to_numpy()
    return out


def phase_notes(phases: pd.DataFrame, gpu: bool = True) -> tuple[str, ...]:
    """One info line per phase that holds copies or syncs, or lasts: what it cost, once (its length on the
    longest rank; its GPU work, copies and waits summed over the ranks). ``gpu``: the run has GPU work (else the
    device work of a phase is its collectives)."""
    notes = []
    for kind, label in (("setup", "Set-up before the first step"), ("tail", "Tail after the last step")):
        rows = phases[phases["phase"] == kind]
        if rows.empty:
            continue
        longest = int(rows["dur_ns"].max())
        busy = int(rows["gpu_busy_ns" if gpu else "collective_ns"].sum()) / 1e6
        ranks = int(rows["rank"].nunique())
        over = f" on the longest of {ranks} ranks; over all ranks, " if ranks > 1 else ", "
        span = f"{longest / 1e6:.2f} ms{over}"
        parts = [f"{label}: {span}" + (f"GPU busy {busy:.2f} ms" if gpu else f"in collectives {busy:.2f} ms")]
        copies = int(rows["copy_count"].sum())
        if copies:
            size = size_text(int(rows["copy_bytes"].sum()))
            parts.append(
                (f"1 copy of {size}" if copies == 1 else f"{copies} copies, {size} in all,")
                + f" in {int(rows['copy_ns'].sum()) / 1e6:.2f} ms"
            )
        if int(rows["sync_wait_ns"].sum()):
            parts.append(f"host waiting {int(rows['sync_wait_ns'].sum()) / 1e6:.2f} ms")
        sources = [s for s in rows["top_source"] if s]
        where = f" (mostly at {sources[0]})" if sources else ""
        notes.append("; ".join(parts) + where + ". One-time work: not counted per step, not in the what-if.")
    return tuple(notes)
