"""Classify dispatcher ops once per overload: skipped (no GPU work), kernel, copy, memset or sync op.

Pure Python over op names, so the rules are testable without torch.
"""

from __future__ import annotations

import enum

from collector.syncs import MASKABLE_INDEX_OPS, SYNC_OP_CAUSES


class OpClass(enum.IntEnum):
    SKIP = 0  # views and metadata: no GPU interval
    KERNEL = 1
    COPY = 2  # copy_ / _to_copy: direction decided per call
    MEMSET = 3
    SYNC = 4  # always waits (item, nonzero, ...)
    MASKABLE = 5  # waits when indexed with a boolean mask


NO_LAUNCH_OPS = frozenset(
    {
        "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty", "aten::new_empty_strided",
        "aten::resize_", "aten::set_", "aten::record_stream", "aten::detach", "aten::alias", "aten::lift_fresh",
        "aten::_reshape_alias", "aten::as_strided", "aten::view", "aten::_unsafe_view", "aten::is_pinned",
        "aten::_has_compatible_shallow_copy_type", "aten::size", "aten::stride", "aten::sym_size",
        "aten::sym_stride", "aten::sym_numel", "aten::sym_storage_offset", "aten::is_same_size",
        "aten::_nested_tensor_size", "aten::result_type", "aten::can_cast", "aten::promote_types",
        "aten::_to_cpu", "aten::is_coalesced", "aten::_version", "aten::data", "aten::requires_grad_",
        "aten::retain_grad", "aten::_fw_primal", "aten::_make_dual", "aten::_unpack_dual",
    }
)
COPY_OPS = frozenset({"aten::copy_", "aten::_to_copy", "aten::copy", "aten::_copy_from"})
MEMSET_OPS = frozenset({"aten::zero_", "aten::fill_", "aten::zeros", "aten::zeros_like", "aten::new_zeros"})


def classify_op(name: str, is_view: bool = False) -> OpClass:
    """The class of an op given its schema name (``aten::mm``) and whether it is a view."""
    if is_view or name in NO_LAUNCH_OPS or name.startswith(("profiler::", "prim::")):
        return OpClass.SKIP
    if name in COPY_OPS:
        return OpClass.COPY
    if name in SYNC_OP_CAUSES:
        return OpClass.SYNC
    if name in MASKABLE_INDEX_OPS:
        return OpClass.MASKABLE
    if name in MEMSET_OPS:
        return OpClass.MEMSET
    return OpClass.KERNEL
