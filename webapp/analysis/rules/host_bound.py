"""host-bound: the host needs longer to issue a step than the GPU needs to run it.

The fixes that fit are replayed: CUDA graphs (``torch.compile(mode="reduce-overhead")``), which cut the
host time between launches to one graph launch, and DataLoader workers, which take the data loading the
host's sampled stacks show off the step path (and hand their batches over in shared memory, whose pages a
pageable upload then faults in). A faster host bounds every host-side fix. The finding's cost
is the best replayed fix; the detail lists each one.
"""

from __future__ import annotations

import math

import numpy as np

from collector.model import IntervalKind
from webapp.analysis import hoststacks
from webapp.analysis.causal import fixes
from webapp.analysis.causal.graph import Graph
from webapp.analysis.context import RunData
from webapp.analysis.rules.base import LIST_FRAC, Change, Detection, RuleContext, ms
from webapp.analysis.rules.copyfacts import copies

LOADER_SLOWDOWN = 1.75
"""How many times longer a DataLoader worker takes to load a batch than the recorded process did: a worker runs
torch ops on one thread (this process may have used many), shares the host's cores and memory bandwidth with
the other workers, and hands its batch over through shared memory. Measured on image augmentation (ResNet-18
batches of 64, 16-CPU host): 1.74x with 8 workers and 1.84x with 15 against the process on 16 threads, whose
own loading took 1.12x longer on one thread; on another such host, 1.62x with 8 and 1.45x with 15, each worker
at the one-thread pace (1.63x the process's). The replay delivers batches at this pace."""
LOADER_SLOWDOWN_MOST = 2.85
"""The slowest worker pace seen, in the same terms: with 15 workers on two other 16-CPU hosts, the fixed loop's
step was what workers 2.44x and 2.83x slower than the recorded process would deliver (or its own host work ran
slower beside them; the hosts' cores and all-core clock, which a trace does not hold). The detail says what
the fix would save at this pace too."""
LOADER_HEADROOM = 2.0
"""The DataLoader fix advises enough workers to keep up with the rest of the step even if each loads a batch
this many times slower than this process did: a margin over :data:`LOADER_SLOWDOWN`."""
SHM_FAULT_NS_PER_4KIB = 340
"""Extra time a pageable upload takes per 4 KiB of a batch that a DataLoader worker handed over in shared
memory, where the recording's probe did not measure it (``bandwidth_probe["shm_fault_ns_per_4kib"]``): the
process's first read of each page faults it in while the driver stages the copy. Measured on ResNet-18 batches
of 36.8 MiB on an H100 host: 6.9-7.3 ms per copy of a worker's batch against 3.9-4.0 ms of one the process
built itself, 0.34 us per page."""
MIN_LOADER_WORKERS = 2
LOADER_WORKERS_UNKNOWN_CPUS = 8
"""The most workers advised when the trace does not say how many CPUs the host has."""
BOUND_FRAC = 0.05
"""A loop is host-bound only if a host with no time of its own would save at least 5% of the step."""
OWN_WORK_FRAC = 0.1
"""Where the best replayed fix saves less than this share of what a host with no time of its own would, the
host's time is its own work, not launches or loading the fixes take away: the fix says so first."""
MAX_RANKS_SAID = 4
"""Ranks the detail names with their host and GPU time per step (the most host-bound first)."""


class HostBound:
    name = "host-bound"
    title = "The host cannot keep the GPU busy"
    fix = (
        "Cut the host's time per step: torch.compile(model, mode='reduce-overhead') or CUDA graphs "
        "(torch.cuda.CUDAGraph) replay the step with one launch; more work per op (larger batches, fused ops) "
        "means fewer launches; DataLoader(num_workers=..., pin_memory=True, persistent_workers=True), with the "
        "workers the detail advises, moves data loading off the step path; log and check every N steps."
    )

    def detect(self, ctx: RuleContext) -> Detection | None:
        rd, g = ctx.rd, ctx.graph
        win = ctx.host_win()
        inside = win >= 0
        n = len(rd.win)
        if not n or not inside.any():
            return None
        host = np.bincount(win[inside], weights=np.maximum(g.h_delta[inside], 0), minlength=n)
        gpu = rd.gpu.measure_in(rd.win.starts, rd.win.ends)
        ranks = _by_rank(rd.win_rank, host, gpu)  # the most host-bound rank first
        if ctx.straggler is not None and len(ranks) > 1:  # its extra host time is the straggler finding's
            ranks = [r for r in ranks if r[0] != ctx.straggler] + [r for r in ranks if r[0] == ctx.straggler]
        top, top_host, top_gpu = ranks[0]
        but = f" besides the straggler, rank {ctx.straggler}" if ctx.straggler is not None and len(ranks) > 1 else ""
        if not top_host > top_gpu:
            return None
        nodes = np.flatnonzero(inside)
        calls = nodes[rd.kind[g.h_row[nodes]] == rd.code(IntervalKind.LAUNCH)]
        # the calls that launched GPU work (cudaFuncGetAttributes, event queries and the like launch none);
        # every CUDA call where the trace links no GPU work to its launch
        launching = calls[np.isin(calls, g.g_launch)] if g.linked_frac > 0 else calls
        what, each_is = ("launches", "launch") if g.linked_frac > 0 else ("CUDA calls", "call")
        per_step = float(np.sum(rd.win_rank[win[launching]] == top)) / max(int(np.sum(rd.win_rank == top)), 1)
        bound = ctx.saving(lambda graph: fixes.faster_host(graph, nodes))
        bound_ns = float(bound.sum()) / ctx.n_win  # per step
        if bound_ns < BOUND_FRAC * ctx.step_ref:
            return None  # the host's time is not what holds the steps back (a GPU-bound loop paces its host)
        savings: list[tuple[str, np.ndarray, Change, np.ndarray | None]] = []
        device = rd.trace.meta.device_name
        if len(calls):
            change = _graphs(calls, win, fixes.graph_bubble_ns(device))
            savings.append(("CUDA graphs / torch.compile(mode='reduce-overhead')", ctx.saving(change), change, None))
        loading = hoststacks.loading_cut(rd, g, nodes)
        loader = None
        slow_ns = faults_ns = 0.0
        if loading is not None and loading.sum() > 0:
            loader, slow_ns, faults_ns = _loader_fix(
                ctx, loading, np.bincount(win[nodes], weights=loading[nodes], minlength=n)
            )
            savings.append(loader)
        each = top_host / max(per_step, 1) / 1e3
        calls_said = f"{per_step:.0f} {what} per step, {each:.1f} us of host time per {each_is}"
        detail = _facts(ranks, but, calls_said if len(launching) else "") + _where(rd, ranks)
        replayed = "; ".join(_saves(label, float(s.sum()) / ctx.n_win) for label, s, _, _ in savings)
        detail += (
            f" Replayed (per step, averaged over the steps): {replayed + '; ' if replayed else ''}a host with no "
            f"time of its own would save {ms(bound_ns)} of the {ms(ctx.step_mean)} a step takes (the bound on "
            "fixes that only make the host faster; "
            f"CUDA graphs also pack the kernels closer: {fixes.graph_pace_note(device)})."
        )
        if loader is not None and float(loader[1].sum()) / ctx.n_win >= LIST_FRAC * ctx.step_ref:
            # what the figure assumes, where worth reading
            detail += " " + _loader_words(loader[0], rd, slow_ns, faults_ns)
        options = (
            *((label, round(float(s.sum()) / ctx.n_win)) for label, s, _, _ in savings),
            ("a host with no time of its own (bound)", round(bound_ns)),
        )
        if not savings:
            return Detection(detail, lambda graph: graph, saving=np.zeros(n, dtype=np.int64), options=options)
        best = max(savings, key=lambda x: float(x[1].mean()))
        fix = _fix(self.fix, best[0], float(best[1].sum()) / ctx.n_win, bound_ns)
        return Detection(detail, best[2], saving=best[1], fix=fix, options=options, floor=best[3])


def _fix(general: str, label: str, best_ns: float, bound_ns: float) -> str:
    """The finding's fix: the best replayed fix (``label``), then the ``general`` advice; or, where that fix
    saves little of what a host with no time of its own would (:data:`OWN_WORK_FRAC`), that the host's own
    work is what to cut (launch-side fixes would not help)."""
    if best_ns >= OWN_WORK_FRAC * bound_ns:
        return f"Best replayed fix: {label}. {general}"
    best = f"the best, {label}, saves {ms(best_ns)}" if best_ns > 0 else f"{label} saves nothing"
    return (
        f"No replayed fix saves much here ({best}, where a host with no time of its own would save "
        f"{ms(bound_ns)}): the host's time per step is its own work, not its launches. Make the frames the "
        "detail names cheaper, or move them off the step path: DataLoader(num_workers=..., "
        "persistent_workers=True) for data loading, work done once instead of every step, logging and checks "
        "every N steps."
    )


def _loader_fix(
    ctx: RuleContext, loading_cut: np.ndarray, loading_ns: np.ndarray
) -> tuple[tuple[str, np.ndarray, Change, np.ndarray], float, float]:
    """The DataLoader fix: ((label, saving per window, change, floor per window), saving per step at
    :data:`LOADER_SLOWDOWN_MOST`, the time per step its batches' pageable uploads spend faulting in shared
    memory, ns). The workers take the loading (``loading_cut`` per host node; ``loading_ns`` per window) off the
    step path, and their batches' pageable uploads fault in pages of shared memory (:func:`shm_fault_ns`);
    enough of them are advised to keep up at :data:`LOADER_HEADROOM` times this process's loading time (a power
    of two, within the host's CPUs less one for this process), and the steps are replayed at the pace that many
    workers deliver batches when each loads :data:`LOADER_SLOWDOWN` times slower than this process did
    (``floor``)."""
    uploads = copies(ctx, IntervalKind.MEMCPY_H2D, memory="pageable", big=False)
    faults = _first_reads_ns(ctx, uploads)
    change = _from_workers(loading_cut, uploads, ctx.graph.g_dur[uploads], faults)
    unpaced = ctx.saving(change)
    rest = np.maximum(ctx.base_steps - unpaced, 1)
    covered = ctx.covered
    need = LOADER_HEADROOM * float(np.median(loading_ns[covered] / rest[covered])) if covered.any() else 1.0
    workers = _workers(need, _host_cpus(ctx.rd))

    def paced(slowdown: float) -> tuple[np.ndarray, np.ndarray]:
        floor = (loading_ns * slowdown / workers).astype(np.int64)
        return np.minimum(unpaced, np.maximum(ctx.base_steps - floor, 0)), floor

    saved, floor = paced(LOADER_SLOWDOWN)
    slow = float(paced(LOADER_SLOWDOWN_MOST)[0].sum()) / ctx.n_win
    return (f"DataLoader(num_workers={workers})", saved, change, floor), slow, float(faults.sum()) / ctx.n_win


def _workers(need: float, cpus: int | None) -> int:
    """Workers for ``need`` (workers that would just keep up): the next power of two, at least
    :data:`MIN_LOADER_WORKERS`, at most the host's CPUs less one (``cpus``; None: not known)."""
    most = max(cpus - 1, 1) if cpus else LOADER_WORKERS_UNKNOWN_CPUS
    wanted = max(MIN_LOADER_WORKERS, 1 << max(math.ceil(need) - 1, 0).bit_length())
    return min(wanted, most)


def _host_cpus(rd: RunData) -> int | None:
    """The CPUs the recorded process could run on (``notes.host_cpus``), None where the trace does not say."""
    cpus = rd.positive_note("host_cpus")
    return int(cpus) if cpus else None


def _loader_words(label: str, rd: RunData, slow_ns: float, faults_ns: float) -> str:
    """What the DataLoader figure assumes, for the detail (``slow_ns``: its saving per step at
    :data:`LOADER_SLOWDOWN_MOST`; ``faults_ns``: the time per step its batches' pageable uploads spend faulting
    in shared memory)."""
    cpus = _host_cpus(rd)
    on = f"the host's {cpus} CPUs" if cpus else "the host's CPUs, how many the trace does not say"
    threads = int(rd.positive_note("torch_threads") or 1)
    ran = f", this process ran them on {threads}" if threads > 1 else ""
    words = (
        f"{label} is advised: enough workers to keep up with the rest of the step even if each loads a batch "
        f"{LOADER_HEADROOM:.0f}x slower than this process did (a worker runs torch ops on one thread{ran}, and "
        f"the workers share {on}). The saving is replayed at the pace that many workers deliver batches when "
        f"each loads {LOADER_SLOWDOWN:.2f}x slower than this process did (as measured for image augmentation); "
        f"slower workers save less ({ms(slow_ns)} per step at {LOADER_SLOWDOWN_MOST:.2f}x, the slowest pace "
        "seen on another host)"
    )
    if threads > 1:  # the estimate's own limit: how much the loading gained from the threads is not in the trace
        words += (
            f", as do workers whose loading gained more from this process's {threads} threads, which the trace "
            "cannot tell: the saving is an estimate"
        )
    words += "."
    if faults_ns > 0:
        per_page, probed = shm_fault_ns(rd)
        how = "as probed on this host" if probed else "as measured on another host"
        words += (
            f" The workers hand their batches over in shared memory, whose pages the pageable uploads fault in as "
            f"they read them: {ms(faults_ns)} more per step ({per_page / 1e3:.2f} us per 4 KiB, {how}), counted in "
            "the saving; pin_memory=True moves that read to the DataLoader's pinning thread, off the step path."
        )
    return words


def _facts(ranks: list[tuple[int, float, float]], but: str, calls: str) -> str:
    """The host's and the GPU's time per step on the rank judged (the first of ``ranks``; ``but``: the rank
    passed over), its ``calls`` sentence, and the other ranks' times."""
    top, host, gpu = ranks[0]
    who = "The host" if len(ranks) == 1 else f"On rank {top}, the most host-bound of {len(ranks)} ranks{but}, the host"
    facts = (
        f"{who} took {ms(host)} per step (medians) to issue work the GPU ran in {ms(gpu)} ({host / max(gpu, 1):.1f}x)"
    )
    facts += f"; {calls}" if calls else ""
    others = [f"rank {r} {ms(h)} for {ms(gp)}" for r, h, gp in ranks[1:MAX_RANKS_SAID]]
    if others:
        more = len(ranks) - MAX_RANKS_SAID
        facts += "; " + ", ".join(others) + (f" and {more} more ranks" if more > 0 else "")
    return facts + "."


def _where(rd: RunData, ranks: list[tuple[int, float, float]]) -> str:
    """Where the judged rank's host time went (its top frames), or why the trace cannot say."""
    one, top = len(ranks) == 1, ranks[0][0]
    frames = hoststacks.top_frames(rd, rank=None if one else top)
    if frames:
        whose = "the host's time" if one else f"rank {top}'s host time"
        return f" Where {whose} went: {frames}."
    missing = hoststacks.missing_text(rd)
    return f" {missing}" if missing else ""


def _saves(label: str, per_step_ns: float) -> str:
    """``label`` and its replayed saving per step; one that would make the steps slower says so."""
    return f"{label} saves {ms(per_step_ns)}" if per_step_ns >= 0 else f"{label} would add {ms(-per_step_ns)}"


def _by_rank(win_rank: np.ndarray, host: np.ndarray, gpu: np.ndarray) -> list[tuple[int, float, float]]:
    """(rank, median host time per step, median GPU time per step) per rank with steps, ns; the rank whose
    host exceeds its GPU the most first (a median over the windows of all ranks would pick one rank's value or
    another's by their count)."""
    out = []
    for r in np.unique(win_rank).tolist():
        on = win_rank == r
        out.append((int(r), float(np.median(host[on])), float(np.median(gpu[on]))))
    return sorted(out, key=lambda x: x[1] / max(x[2], 1), reverse=True)


def _graphs(calls: np.ndarray, step: np.ndarray, bubble_ns: int) -> Change:
    def change(graph: Graph) -> Graph:
        return fixes.captured(graph, calls, step, bubble_ns)

    return change


def shm_fault_ns(rd: RunData) -> tuple[float, bool]:
    """(ns per 4 KiB that a pageable upload of a worker's batch takes longer, whether the recording's probe
    measured it on this host); :data:`SHM_FAULT_NS_PER_4KIB` where it did not."""
    probed = (rd.trace.meta.bandwidth_probe or {}).get("shm_fault_ns_per_4kib")
    if isinstance(probed, (int, float)) and probed >= 0:
        return float(probed), True
    return float(SHM_FAULT_NS_PER_4KIB), False


def _first_reads_ns(ctx: RuleContext, uploads: np.ndarray) -> np.ndarray:
    """Per upload (graph ops): the time its staging spends faulting in the pages of a batch from shared
    memory, ns; none where the batches already came from workers (the recorded uploads hold those faults)."""
    if hoststacks.loads_in_workers(ctx.rd):
        return np.zeros(len(uploads), dtype=np.int64)
    pages = np.ceil(ctx.graph.g_bytes[uploads] / 4096)
    return (pages * shm_fault_ns(ctx.rd)[0]).astype(np.int64)


def _from_workers(cut_ns: np.ndarray, uploads: np.ndarray, pageable_ns: np.ndarray, slower_ns: np.ndarray) -> Change:
    """Loading moved to DataLoader workers: its host time (``cut_ns`` per host node) is gone, and the pageable
    ``uploads`` of the batches they hand over in shared memory take ``slower_ns`` longer each, those still at
    their pageable time (``pageable_ns``): a copy another fix replayed from pinned memory does not (with
    ``pin_memory=True`` the DataLoader's pinning thread reads the pages, off the step path)."""

    def change(graph: Graph) -> Graph:
        still = graph.g_dur[uploads] >= pageable_ns
        return fixes.lengthen(fixes.cut_host(graph, cut_ns), uploads[still], slower_ns[still])

    return change
