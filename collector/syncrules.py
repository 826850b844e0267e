"""Sync rules shared by recording, importers and analysis: which ops make the host wait, and why.

Pure (testable without a GPU): the op and method cause tables, :func:`copy_kind`, :func:`copy_blocks`,
:func:`implicit_sync_cause`.
"""

from __future__ import annotations

from collector.model import IntervalKind

SYNC_OP_CAUSES: dict[str, str] = {
    "aten::_local_scalar_dense": "item",
    "aten::is_nonzero": "bool",
    "aten::equal": "item",
    "aten::nonzero": "nonzero",
    "aten::argwhere": "nonzero",
    "aten::masked_select": "masked_index",
    "aten::_unique": "unique",
    "aten::_unique2": "unique",
    "aten::unique_dim": "unique",
    "aten::unique_consecutive": "unique",
}
"""Ops that always make the host wait for the GPU (a value or an output size must come back)."""

MASKABLE_INDEX_OPS = frozenset({"aten::index", "aten::index_put_", "aten::_index_put_impl_"})
"""Ops that wait when indexed with a boolean mask (the mask is turned into indices on the host)."""

METHOD_CAUSES: dict[str, str] = {
    "item": "item",
    "__bool__": "bool",
    "tolist": "tolist",
    "numpy": "numpy",
    "cpu": "cpu",
    "__repr__": "print",
    "__format__": "print",
}
"""Tensor methods whose blocking op is reported with this cause (the outermost one wins)."""

WHOLE_CALL_CAUSE = "print"
"""The cause whose method calls are timed whole as one wait (ops inside are not separate waits)."""


def copy_kind(src_is_cuda: bool, dst_is_cuda: bool) -> IntervalKind:
    """The interval kind of a copy between host (False) and device (True) memory."""
    if src_is_cuda and dst_is_cuda:
        return IntervalKind.MEMCPY_D2D
    return IntervalKind.MEMCPY_D2H if src_is_cuda else IntervalKind.MEMCPY_H2D


def copy_blocks(kind: IntervalKind, host_pinned: bool, non_blocking: bool) -> bool:
    """Whether the host waits for a copy: any host copy unless it is pinned *and* non_blocking."""
    if kind is IntervalKind.MEMCPY_D2D:
        return False
    return not (host_pinned and non_blocking)


def implicit_sync_cause(op: str, has_bool_index: bool = False) -> str:
    """Cause of the host wait an op implies by itself (``""`` if it does not wait)."""
    cause = SYNC_OP_CAUSES.get(op, "")
    if not cause and has_bool_index and op in MASKABLE_INDEX_OPS:
        cause = "masked_index"
    return cause
