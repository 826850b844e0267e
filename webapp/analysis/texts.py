"""What to do about a host sync, by its cause, in PyTorch terms (the sync-in-loop rule's fix text)."""

from __future__ import annotations

SYNC_ADVICE = (
    "Keep values on the GPU and read them every N steps; move checks out of the hot loop. "
    "torch.cuda.set_sync_debug_mode('warn') reports every sync with its stack."
)
"""What to do about any sync, after the advice for its cause."""

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
    return " ".join([*seen, SYNC_ADVICE])
