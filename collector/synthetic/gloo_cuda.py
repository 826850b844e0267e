"""A DDP job under gloo with CUDA tensors as each rank's CUPTI capture and flight recorder see it, for tests.

Per rank and step: the main thread launches the forward kernels, autograd's thread the backward kernels and,
at the end of backward, one gloo all_reduce per gradient bucket: it copies the bucket to pinned host memory
on a side stream, then enqueues the call (the flight recorder's entry, as torch's gloo backend records it).
gloo's worker thread then waits for that copy (``cudaStreamSynchronize``), reduces on the host until every
rank has arrived, and copies the result back (``cudaMemcpyAsync``, an event record and a stream wait). The
main thread waits for the buckets (no CUDA call) and launches the optimizer's kernels. Rank ``slow_rank``
sleeps ``delay_ns`` at the start of every step. A barrier (no CUDA work) comes first. All ranks share one
host clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from collector.recording.comm import CollectiveCall
from collector.synthetic.cupti import EventRows
from collector.traceformat.events import EventTable

MAIN, AUTOGRAD, WORKER = 5001, 5002, 5003
"""Thread ids: the main thread (Python runs there), autograd's and gloo's worker (C++ threads)."""
COMPUTE, SIDE = 7, 13
"""The compute stream and gloo's (first) side stream; with ``side_streams`` > 1 the others are SIDE + 4, SIDE + 8
... (gloo takes each call's stream from a pool)."""
GROUP = "default_pg (pg 0)"
BUCKET_BYTES = 4 << 20
KERNEL_NS = 200_000
LATENCY_NS = 300_000
"""Host time of one all_reduce once every rank has arrived."""


@dataclass
class Rank:
    """One rank's capture: its event table, flight-recorder calls and step windows (start_ns, end_ns)."""

    table: EventTable
    calls: list[CollectiveCall]
    steps: list[tuple[int, int]]


def ddp_job(
    world: int = 2,
    steps: int = 8,
    buckets: int = 2,
    slow_rank: int = 1,
    delay_ns: int = 20_000_000,
    broadcast_step: int = -1,
    side_streams: int = 1,
) -> list[Rank]:
    """The job of the module docstring, one :class:`Rank` per rank; with ``broadcast_step``, rank 0 also
    broadcasts a CUDA tensor after that step's all_reduces (DDP rebuilding its buckets): its worker waits for
    its copy to the host, the others' do not (they only copy the result back). Each all_reduce copies through
    the next of ``side_streams`` side streams in turn."""

    def side(step: int, bucket: int) -> int:
        return SIDE + 4 * ((step * buckets + bucket) % side_streams)

    rows = [EventRows() for _ in range(world)]
    calls: list[list[CollectiveCall]] = [[] for _ in range(world)]
    marks: list[list[tuple[int, int]]] = [[] for _ in range(world)]
    t = [1_000_000] * world
    for r in range(world):
        calls[r].append(CollectiveCall("gloo:barrier", GROUP, 0, t[r], MAIN, 1))
    t = [x + 500_000 for x in t]
    worker_free = [0] * world
    for step in range(steps):
        enqueued = [[0] * buckets for _ in range(world)]
        copied = [[0] * buckets for _ in range(world)]
        step_start = list(t)
        for r in range(world):
            t[r] += delay_ns if r == slow_rank else 0
            gpu = t[r]
            for _ in range(4):  # forward on the main thread
                c = rows[r].call(MAIN, "cudaLaunchKernel", t[r])
                gpu = rows[r].gpu("kernel", "sm90_gemm_fwd", COMPUTE, max(gpu, t[r] + 5_000), KERNEL_NS, c)
                t[r] += 10_000
            at = t[r]
            for b in range(buckets):  # backward on autograd's thread; a bucket is ready every two kernels
                for _ in range(2):
                    c = rows[r].call(AUTOGRAD, "cudaLaunchKernel", at)
                    gpu = rows[r].gpu("kernel", "sm90_gemm_bwd", COMPUTE, max(gpu, at + 5_000), KERNEL_NS, c)
                    at += 10_000
                rows[r].call(AUTOGRAD, "cudaEventRecord", at + 2_000, 1_000)  # the work made: copies started
                rows[r].call(AUTOGRAD, "cudaStreamWaitEvent", at + 4_000, 1_000)
                c = rows[r].call(AUTOGRAD, "cudaMemcpyAsync", at + 6_000, 8_000)
                down = "Memcpy DtoH (Device -> Pinned)"
                stream = side(step, b)
                copied[r][b] = rows[r].gpu("gpu_memcpy", down, stream, max(gpu, at + 10_000), 90_000, c, BUCKET_BYTES)
                at += 20_000
                enqueued[r][b] = at  # then enqueued: the flight recorder's entry
                calls[r].append(CollectiveCall("gloo:all_reduce", GROUP, BUCKET_BYTES, at, AUTOGRAD, len(calls[r]) + 1))
            t[r] = at
        for b in range(buckets):  # every rank's worker reduces bucket b once all have arrived
            done = max(enqueued[r][b] for r in range(world)) + LATENCY_NS
            for r in range(world):
                begin = max(worker_free[r], enqueued[r][b] + 30_000)
                wait = max(copied[r][b] - begin, 2_000)
                rows[r].call(WORKER, "cudaStreamSynchronize", begin, wait)
                back = max(done, begin + wait + 50_000)
                c = rows[r].call(WORKER, "cudaMemcpyAsync", back, 8_000)
                up = "Memcpy HtoD (Pinned -> Device)"
                rows[r].gpu("gpu_memcpy", up, side(step, b), back + 10_000, 90_000, c, BUCKET_BYTES)
                rows[r].call(WORKER, "cudaEventRecord", back + 9_000, 1_000)
                rows[r].call(WORKER, "cudaStreamWaitEvent", back + 11_000, 1_000)
                worker_free[r] = back + 13_000
        if step == broadcast_step:
            at = max(t)
            for r in range(world):
                calls[r].append(CollectiveCall("gloo:broadcast", GROUP, 4096, at, MAIN, len(calls[r]) + 1))
                begin = max(worker_free[r], at + 30_000)
                if r == 0:
                    rows[r].call(WORKER, "cudaStreamSynchronize", begin, 5_000)
                back = begin + LATENCY_NS
                c = rows[r].call(WORKER, "cudaMemcpyAsync", back, 8_000)
                rows[r].gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", SIDE, back + 10_000, 5_000, c, 4096)
                rows[r].call(WORKER, "cudaEventRecord", back + 9_000, 1_000)
                worker_free[r] = back + 11_000
        for r in range(world):  # the optimizer, once the buckets are back
            t[r] = max(t[r], worker_free[r]) + 5_000
            for _ in range(2):
                c = rows[r].call(MAIN, "cudaLaunchKernel", t[r])
                rows[r].gpu("kernel", "multi_tensor_apply_kernel", COMPUTE, t[r] + 120_000, 50_000, c)
                t[r] += 10_000
            t[r] += 100_000
            marks[r].append((step_start[r], t[r]))
    out = []
    for r in range(world):
        table = rows[r].table()
        table.top["distributedInfo"] = {"rank": r, "world_size": world}
        out.append(Rank(table, calls[r], marks[r]))
    return out
