"""Causal analysis: the run's dependency graph, its replay, and the critical path of every step.

:func:`causal_model` builds the graph (webapp.analysis.causal.graph), replays it unchanged as a self-check
(every step's replayed time against its measured time), takes the recorder's own per-call host cost out
(``notes.recorder_call_ns``, measured when recording started) and replays that, the run as it would have
run unrecorded, which is the base every saving is measured from. The critical path of each step is walked on
the run as recorded (webapp.analysis.causal.critical), so that the path lies on the timeline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from collector.model import IntervalKind
from webapp.analysis import intervals as iv
from webapp.analysis.causal import fixes
from webapp.analysis.causal.critical import PARTS, critical_path
from webapp.analysis.causal.graph import Graph, build_graph
from webapp.analysis.causal.replay import Replayed, replay
from webapp.analysis.causal.stepmap import StepMap, step_times
from webapp.analysis.context import RunData, kind_mask

MAX_NODES = 1_500_000
"""Host calls and GPU ops replayed at most: a larger run is replayed over blocks of consecutive steps spread
through it (SAMPLE_BLOCKS of them), which keeps analysis time flat as runs grow."""
SAMPLE_BLOCKS = 16
SELF_CHECK_FRAC = 0.02
"""The unchanged replay must reproduce each step within 2%; beyond it the page says costs are approximate."""
MIN_LINKED_FRAC = 0.5
"""Below this share of GPU work linked to its launch, the page says the replay moves most GPU work by where it
ran beside the host's calls, not by what launched it."""

__all__ = ["PARTS", "CausalModel", "causal_model"]


@dataclass(frozen=True)
class CausalModel:
    """``graph``: the dependency graph without the recorder's own cost (the base of every saving);
    ``raw_steps``/``base_steps``: replayed step times of the graph as recorded and without the recorder (ns
    per window); ``error``: |raw replay - measured| / measured per window; ``critical``: critical-path ns per
    window and part (PARTS), walked on the run as recorded; ``path``: that path's stretches
    (webapp.analysis.causal.critical.SEGMENT_COLUMNS); ``recorder_call_ns``: the recorder's host cost per
    CUDA call taken out;
    ``replayed``: the windows the graph covers (all but in runs above MAX_NODES; the others' figures are 0)."""

    graph: Graph
    steps: StepMap
    base: Replayed
    raw_steps: np.ndarray
    base_steps: np.ndarray
    error: np.ndarray
    critical: np.ndarray
    recorder_call_ns: float
    notes: tuple[str, ...]
    replayed: np.ndarray
    path: pd.DataFrame


def causal_model(rd: RunData) -> CausalModel:
    """Build, check and replay the run's dependency graph."""
    keep, replayed = _sample(rd)
    raw = build_graph(rd, keep)
    sm = StepMap(raw, on_gpu=rd.step_basis in ("gpu", "annotation", "span"), rd=rd)
    measured = (rd.win.ends - rd.win.starts).astype(np.int64)
    raw_rep = replay(raw)
    raw_steps = step_times(rd, sm, raw_rep)
    error = np.where(replayed, np.abs(raw_steps - measured) / np.maximum(measured, 1), 0.0)
    call_ns = rd.positive_note("recorder_call_ns") or 0.0
    graph = fixes.without_recorder(raw, call_ns)
    base = replay(graph) if call_ns > 0 else raw_rep
    base_steps = step_times(rd, sm, base) if call_ns > 0 else raw_steps
    parts, path = critical_path(rd, raw, raw_rep, sm)
    critical = np.where(replayed[:, None], parts, 0)
    raw_steps = np.where(replayed, raw_steps, measured)
    base_steps = np.where(replayed, base_steps, measured)
    unmeasured = (rd.trace.meta.notes or {}).get("recorder_call_ns") == 0
    notes = (*_notes(raw, error[replayed], call_ns, unmeasured), *_unattributed_note(critical[replayed]))
    if not replayed.all():
        notes = (
            f"The run holds {len(rd.trace.intervals):,} intervals: its dependency graph is replayed over "
            f"{int(replayed.sum())} of {len(replayed)} steps, in blocks spread through the run; "
            "costs, the what-if and the critical path are over those steps.",
            *notes,
        )
    return CausalModel(graph, sm, base, raw_steps, base_steps, error, critical, call_ns, notes, replayed, path)


def _sample(rd: RunData) -> tuple[np.ndarray | None, np.ndarray]:
    """Rows to build the graph from (None: all) and the windows whose figures it gives. Above MAX_NODES the
    graph covers SAMPLE_BLOCKS blocks of consecutive windows; each block's first window only warms it up."""
    n = len(rd.win)
    everything = np.ones(n, dtype=bool)
    nodes = int((rd.gpu_mask | rd.sync_mask | kind_mask(rd.kind, IntervalKind.LAUNCH)).sum())
    if nodes <= MAX_NODES or n < 3:
        return None, everything
    budget = max(2, n * MAX_NODES // nodes)  # windows the graph may cover
    blocks = max(1, min(SAMPLE_BLOCKS, budget // 2))
    per_block = max(2, budget // blocks)
    if per_block * blocks >= n:
        return None, everything
    starts = np.unique(np.linspace(0, n - per_block, blocks).astype(np.int64))
    chosen = np.zeros(n, dtype=bool)
    for a in starts:
        chosen[a : a + per_block] = True
    replayed = chosen.copy()
    replayed[starts] = False  # warm-up
    return _rows_in(rd, chosen), replayed


def _rows_in(rd: RunData, chosen: np.ndarray) -> np.ndarray:
    """Mask of the rows in a ``chosen`` window (GPU work by the window of the call that launched it), found
    iv.CHUNK_ROWS rows at a time: a run-long temporary per step would be fresh memory, which the kernel faults
    in at a cost larger than the work (several seconds at 10M rows on a virtual machine)."""
    launch_id = np.asarray(rd.trace.intervals["launch_id"])
    keep = np.zeros(len(rd.kind), dtype=bool)
    for a in range(0, len(keep), iv.CHUNK_ROWS):
        rows = np.arange(a, min(a + iv.CHUNK_ROWS, len(keep)))
        lid = rd.rows_of_ids(launch_id[rows])
        win = rd.step_win(np.where(lid >= 0, lid, rows))
        keep[rows] = (win >= 0) & chosen[np.maximum(win, 0)]
    return keep


UNATTRIBUTED_NOTE_FRAC = 0.2
"""Above this share of the steps' critical path with no cause in the trace, the analysis says so."""


def _unattributed_note(critical: np.ndarray) -> tuple[str, ...]:
    total = int(critical.sum())
    other = int(critical[:, PARTS.index("other")].sum())
    if total <= 0 or other <= UNATTRIBUTED_NOTE_FRAC * total:
        return ()
    return (
        f"{other / total:.0%} of the steps' critical path has no cause in the trace: the GPU sat idle with work "
        "queued, or the step began before anything recorded. What it waited for is not in the trace (another "
        "process or rank, a stream wait or host work the trace lacks), so no fix here can claim that time.",
    )


def _notes(g: Graph, error: np.ndarray, call_ns: float, unmeasured: bool = False) -> tuple[str, ...]:
    """The replay's words: its self-check, what the graph lacks, and the recorder's own cost taken out (or,
    ``unmeasured``, a recording whose start timed no such cost)."""
    out = []
    if len(error):
        worst, mid = float(error.max()), float(np.median(error))
        if worst <= SELF_CHECK_FRAC:
            out.append(
                f"Replay self-check: the dependency graph reproduces every step's time within {worst:.1%} "
                f"(median {mid:.2%}); each finding's cost is the step time its fix saves in the replay."
            )
        else:
            bad = int((error > SELF_CHECK_FRAC).sum())
            out.append(
                f"Replay self-check: {bad} of {len(error)} steps replay more than {SELF_CHECK_FRAC:.0%} off their "
                f"measured time (worst {worst:.1%}, median {mid:.2%}): the trace lacks some of what the steps "
                "waited for, so costs are estimates."
            )
    if g.n_gpu and g.linked_frac < MIN_LINKED_FRAC:
        out.append(
            f"Only {g.linked_frac:.0%} of the GPU work is linked to the host call that launched it (the trace "
            "has no correlation ids or flows for the rest): the replay moves that work with the host call it "
            "ran after, keeping its measured distance from it, so the costs of host-side fixes are estimates."
        )
    if g.n_gpu and not g.h_sync.any():
        out.append("The trace records no host waits (syncs): their cost cannot be replayed.")
    if call_ns > 0:
        out.append(
            f"The recorder's own host cost per CUDA call ({call_ns / 1e3:.1f} us, timed on a tiny op when "
            "recording started) is taken out of every call: step times and savings are for the run unrecorded, "
            "as far as that covers. What recording costs beyond it (its Python hooks and stack sampling, calls "
            "dearer to record than the tiny op) stays in: on host-bound framework loops (Lightning's, a Hugging "
            "Face Trainer's) the steps have still read 5-30% slower than the same loops unrecorded, so there "
            "step times read high."
        )
    elif unmeasured:
        out.append(
            "The recorder's own host cost could not be measured when recording started (its timing of a tiny op "
            "read no cost, twice): step times and savings include it, so a host-bound loop reads slower than "
            "it runs unrecorded. Recording again measures it anew."
        )
    return tuple(out)
