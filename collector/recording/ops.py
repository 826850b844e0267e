"""Classify dispatcher ops once per overload (skipped, kernel, copy, memset or sync op), and read the
facts of one copy call (direction, bytes, host memory kind, non_blocking, whether the host waits).

The classification is pure Python over op names, testable without torch.
"""

from __future__ import annotations

import enum
from typing import Any

from collector import syncrules
from collector.model import IntervalKind, MemoryKind
from collector.syncrules import MASKABLE_INDEX_OPS, SYNC_OP_CAUSES

_K = IntervalKind


class OpClass(enum.IntEnum):
    SKIP = 0  # views and metadata: no GPU interval
    KERNEL = 1
    COPY = 2  # copy_ / _to_copy: direction decided per call
    MEMSET = 3
    SYNC = 4  # always waits (item, nonzero, ...)
    MASKABLE = 5  # waits when indexed with a boolean mask


NO_LAUNCH_OPS = frozenset(
    {
        "aten::empty",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::new_empty",
        "aten::new_empty_strided",
        "aten::resize_",
        "aten::set_",
        "aten::record_stream",
        "aten::detach",
        "aten::alias",
        "aten::lift_fresh",
        "aten::_reshape_alias",
        "aten::as_strided",
        "aten::view",
        "aten::_unsafe_view",
        "aten::is_pinned",
        "aten::_has_compatible_shallow_copy_type",
        "aten::size",
        "aten::stride",
        "aten::sym_size",
        "aten::sym_stride",
        "aten::sym_numel",
        "aten::sym_storage_offset",
        "aten::is_same_size",
        "aten::_nested_tensor_size",
        "aten::result_type",
        "aten::can_cast",
        "aten::promote_types",
        "aten::_to_cpu",
        "aten::is_coalesced",
        "aten::_version",
        "aten::data",
        "aten::requires_grad_",
        "aten::retain_grad",
        "aten::_fw_primal",
        "aten::_make_dual",
        "aten::_unpack_dual",
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


def has_bool_index(args: Any) -> bool:
    """Whether an index/index_put_ call uses a boolean (or uint8) mask among its indices."""
    import torch

    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ())


def copy_facts(name: str, args: Any, kwargs: dict[str, Any], tensor: Any) -> tuple[Any, int, str, bool, bool]:
    """``(kind, bytes, memory_kind, non_blocking, blocks)`` of a copy op call (kind KERNEL for a cast)."""
    src: Any
    dst: Any
    if name == "aten::_to_copy":
        src = args[0]
        device = kwargs.get("device")
        dst_cuda = bool(src.is_cuda if device is None else device.type == "cuda")
        dtype = kwargs.get("dtype")
        same_dtype = dtype is None or dtype == src.dtype
        nb = bool(kwargs.get("non_blocking", False))
        dst_pinned = bool(kwargs.get("pin_memory") or False)
        dst = None
    else:
        if name == "aten::_copy_from":
            src, dst = args[0], args[1]
        else:
            dst, src = args[0], args[1]
        if not isinstance(src, tensor) or not isinstance(dst, tensor):
            return _K.KERNEL, 0, "", False, False
        nb = bool(args[2] if len(args) > 2 else kwargs.get("non_blocking", False))
        dst_cuda = bool(dst.is_cuda)
        same_dtype = dst.dtype == src.dtype
        dst_pinned = False
    src_cuda = bool(src.is_cuda)
    kind = syncrules.copy_kind(src_cuda, dst_cuda)
    nbytes = src.numel() * src.element_size()
    if kind is _K.MEMCPY_D2D:
        return (kind if same_dtype else _K.KERNEL), nbytes, MemoryKind.DEVICE.value, nb, False
    pinned = bool(src.is_pinned()) if kind is _K.MEMCPY_H2D else dst_pinned if dst is None else bool(dst.is_pinned())
    mem = MemoryKind.PINNED.value if pinned else MemoryKind.PAGEABLE.value
    return kind, nbytes, mem, nb, syncrules.copy_blocks(kind, bool(pinned), nb)
