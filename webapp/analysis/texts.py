"""Titles and fixes of the findings, in PyTorch terms (kept apart from the rules that measure them)."""

from __future__ import annotations

FIXES: dict[str, tuple[str, str]] = {
    "pageable-copy": (
        "Copies through pageable host memory",
        "Copy from pinned memory: DataLoader(..., pin_memory=True), or tensor.pin_memory() once for a reused "
        "buffer, then .to(device, non_blocking=True). For large device-to-host reads, copy into a preallocated "
        "pinned buffer: buf = torch.empty(shape, pin_memory=True); buf.copy_(x, non_blocking=True).",
    ),
    "blocking-copy": (
        "Copies block the host",
        "Pass non_blocking=True to .to()/.cuda()/copy_() (the source must be pinned for this to be "
        "asynchronous), so the host keeps queueing kernels while the copy runs.",
    ),
    "no-copy-overlap": (
        "Copies do not overlap compute",
        "Prefetch the next batch on a side stream: copy_stream = torch.cuda.Stream(); with "
        "torch.cuda.stream(copy_stream): nxt = batch.to(device, non_blocking=True); before using it, "
        "torch.cuda.current_stream().wait_stream(copy_stream) and nxt.record_stream(torch.cuda.current_stream()). "
        "Needs pinned host memory.",
    ),
    "sync-in-loop": (
        "Host syncs inside the loop",
        "Keep values on the GPU and read them every N steps; move checks out of the hot loop. "
        "torch.cuda.set_sync_debug_mode('warn') reports every sync with its stack.",
    ),
    "launch-bound": (
        "GPU starved by kernel launches",
        "Cut per-op launch overhead: torch.compile(model, mode='reduce-overhead') (CUDA graphs plus fusion), "
        "capture the step with torch.cuda.CUDAGraph, or do more work per op (larger batches, fused ops).",
    ),
    "idle-gaps": (
        "Long GPU idle gaps",
        "See what the host does in these gaps (data loading, logging, checkpointing, Python work): load data "
        "with DataLoader(num_workers>0, pin_memory=True, persistent_workers=True), and move other work off the "
        "step path or run it every N steps.",
    ),
}

_SYNC_FIXES = {
    "item": "`.item()`, float(t), `if t:` or print(t) copy a value to the host and wait for the GPU: "
    "accumulate on the GPU (total += loss.detach()) and read or print it every N steps.",
    "synchronize": "Remove torch.cuda.synchronize() from the loop; time with "
    "torch.cuda.Event(enable_timing=True) and read the events after the loop.",
    "nonzero": "Data-dependent shapes (boolean-mask indexing, nonzero, unique, masked_select) wait for the "
    "GPU: use torch.where or fixed-shape masks.",
    "tolist": "tensor.tolist()/.numpy()/.cpu() copy to the host and wait: keep the data on the GPU, read it "
    "every N steps, or copy into a pinned buffer with non_blocking=True and read it a step later.",
    "cuda_free": "cudaFree waits for the whole device: keep memory in PyTorch's caching allocator (avoid "
    "torch.cuda.empty_cache() in the loop).",
}
_SYNC_ALIASES = {
    "masked_index": "nonzero",
    "masked_select": "nonzero",
    "unique": "nonzero",
    "implicit": "nonzero",
    "cpu": "tolist",
    "numpy": "tolist",
    "print": "item",
    "bool": "item",
    "stream_synchronize": "synchronize",
    "event_synchronize": "synchronize",
}


def sync_fix(causes: tuple[str, ...]) -> str:
    """The fix for syncs with these causes (most costly first), then the general advice."""
    seen: list[str] = []
    for cause in causes:
        key = _SYNC_ALIASES.get(cause, cause)
        if key in _SYNC_FIXES and _SYNC_FIXES[key] not in seen:
            seen.append(_SYNC_FIXES[key])
    return " ".join([*seen, FIXES["sync-in-loop"][1]])
