"""A CUDA graph replay loop as CUPTI records it, for tests: an event table like the recorder's capture.

Set-up: ``warmup`` eager iterations of the graph's kernels (one ``cudaLaunchKernel`` each), a capture (host
calls only: captured work does not run), then ``replays`` iterations of one ``cudaGraphLaunch`` whose kernels
carry its correlation id, and, with ``eager``, that many eager kernels launched after each replay (an
optimizer step outside the graph); with ``copy_in``, a device-to-device copy of the next batch into the
graph's input before each replay. The host waits for the GPU after each iteration when ``sync`` is set
(``loss.item()``), else runs ahead. Times in ns on one clock; kernels 10 us each, back to back.
"""

from __future__ import annotations

from collector.synthetic.cupti import EventRows
from collector.traceformat.events import EventTable

TID, STREAM = 4001, 7
KERNEL_NS = 10_000
GRAPH_KERNELS = ("sm90_xmma_gemm_bf16", "vectorized_elementwise_kernel<add>", "reduce_kernel<sum>")
EAGER_KERNEL = "multi_tensor_apply_kernel<adam>"


def replay_loop(
    replays: int = 40,
    kernels: int = 3,
    warmup: int = 3,
    eager: int = 0,
    sync: bool = True,
    copy_in: bool = False,
    first_launch_ns: int = 8_000,
) -> EventTable:
    """The event table of the loop described in the module docstring (``kernels`` kernels in the graph); the
    first ``cudaGraphLaunch`` call takes ``first_launch_ns`` (the graph's upload: longer than the others')."""
    r = EventRows()
    names = [GRAPH_KERNELS[i % len(GRAPH_KERNELS)] + f"_{i}" for i in range(kernels)]
    t, gpu = 1_000_000, 0
    for _ in range(warmup):  # eager iterations before the capture
        for name in names:
            corr = r.call(TID, "cudaLaunchKernel", t)
            gpu = r.gpu("kernel", name, STREAM, max(gpu, t + 5_000), KERNEL_NS, corr)
            t += 6_000
        t = max(t, gpu) + 20_000
    for call in ("cudaStreamBeginCapture", "cudaStreamEndCapture", "cudaGraphInstantiate"):
        r.call(TID, call, t, 50_000)
        t += 60_000
    for k in range(replays):
        if copy_in:  # the next batch copied into the graph's static input
            corr = r.call(TID, "cudaMemcpyAsync", t)
            gpu = r.gpu("gpu_memcpy", "Memcpy DtoD (Device -> Device)", STREAM, max(gpu, t + 3_000), 2_000, corr, 4096)
            t += 6_000
        launch_ns = first_launch_ns if k == 0 else 8_000
        corr = r.call(TID, "cudaGraphLaunch", t, launch_ns)
        t += launch_ns - 8_000
        gpu = max(gpu, t + 6_000)
        for name in names:
            gpu = r.gpu("kernel", name, STREAM, gpu, KERNEL_NS, corr)
        t += 10_000
        for _ in range(eager):
            corr = r.call(TID, "cudaLaunchKernel", t)
            gpu = r.gpu("kernel", EAGER_KERNEL, STREAM, max(gpu, t + 5_000), KERNEL_NS, corr)
            t += 6_000
        if sync:
            r.call(TID, "cudaStreamSynchronize", t, max(gpu - t, 1_000))
            t = max(t, gpu) + 30_000
        else:
            t += 2_000
    return r.table()
