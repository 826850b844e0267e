"""torch.profiler's collective metadata folded into the event table: bytes and process group (internal).

NCCL kernels (and ``record_param_comms`` ops) carry ``In msg nelems``, ``Out msg nelems``, ``dtype``,
``Process Group Name`` and ``Process Group Description`` in their args. The reader collects them in the
FOLDED columns, only for files that have them, and :func:`fold_collectives` turns them into ``arg_bytes`` and
``arg_group``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

FOLDED = ("in_nelems", "out_nelems", "dtype", "pg_name", "pg_desc")
"""SPEC columns folded into ``arg_bytes`` and ``arg_group`` by :func:`fold_collectives`."""

DTYPE_BYTES = {
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Int": 4, "Long": 8, "Short": 2, "Char": 1, "Byte": 1,
    "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "Float8_e4m3fn": 1, "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1, "UInt16": 2, "UInt32": 4, "UInt64": 8,
}  # fmt: skip
"""Bytes per element of the ``dtype`` names torch.profiler writes in collective metadata."""


def group_label(name: str, desc: str) -> str:
    """A process group as shown and matched across ranks: its description and name (``default_pg (pg 0)``)."""
    if not name:
        return desc
    return f"{desc} (pg {name})" if desc and desc != "undefined" else f"pg {name}"


def fold_collectives(out: dict[str, Any], folded: dict[str, Any]) -> None:
    """torch.profiler's collective metadata into the event table: ``arg_bytes`` of an event without one is
    the larger of its input and output message (elements x element size of ``dtype``; 0 for an unknown
    dtype); ``arg_group`` is :func:`group_label` of its process group name and description."""
    size = np.array([DTYPE_BYTES.get(str(c), 0) for c in folded["dtype"].categories], dtype=np.int64)
    per_element = size[folded["dtype"].codes]
    message = np.maximum(folded["in_nelems"], folded["out_nelems"]) * per_element
    has = (folded["in_nelems"] >= 0) | (folded["out_nelems"] >= 0)
    out["arg_bytes"] = np.where(has & (out["arg_bytes"] < 0), np.maximum(message, 0), out["arg_bytes"])
    name, desc = folded["pg_name"], folded["pg_desc"]
    pairs = pd.DataFrame({"n": name.codes, "d": desc.codes}).drop_duplicates()
    if len(pairs) == 1 and pairs.iloc[0].tolist() == [0, 0]:
        return
    key = name.codes.astype(np.int64) * len(desc.categories) + desc.codes
    labels = {
        int(n) * len(desc.categories) + int(d): group_label(str(name.categories[n]), str(desc.categories[d]))
        for n, d in pairs.itertuples(index=False)
    }
    uniq = np.array(sorted(labels), dtype=np.int64)
    cats = pd.Index(list(dict.fromkeys([""] + [labels[k] for k in uniq.tolist()])), dtype=object)
    code_of = np.array([cats.get_loc(labels[k]) for k in uniq.tolist()], dtype=np.int32)
    out["arg_group"] = pd.Categorical.from_codes(code_of[np.searchsorted(uniq, key)], categories=cats)
