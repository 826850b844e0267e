"""Pieces of our trace file's event text shared by its two interval formatters (collector.traceformat.write,
Python string formatting; collector.traceformat.write_arrow, pyarrow compute): the Chrome ``cat`` of each
kind, the head of an interval event, and string columns as JSON text computed once per distinct value."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pandas as pd

from collector.model import IntervalKind, MarkerKind

CATEGORIES: dict[str, str] = {
    IntervalKind.KERNEL.value: "kernel",
    IntervalKind.MEMCPY_H2D.value: "gpu_memcpy",
    IntervalKind.MEMCPY_D2H.value: "gpu_memcpy",
    IntervalKind.MEMCPY_D2D.value: "gpu_memcpy",
    IntervalKind.MEMSET.value: "gpu_memset",
    IntervalKind.CPU_OP.value: "cpu_op",
    IntervalKind.LAUNCH.value: "cuda_runtime",
    IntervalKind.SYNC_WAIT.value: "cuda_sync",
    IntervalKind.COLLECTIVE.value: "kernel",
    IntervalKind.ANNOTATION.value: "user_annotation",
    IntervalKind.SAMPLE.value: "python_sample",
    MarkerKind.STEP.value: "step",
    MarkerKind.MARK.value: "mark",
}
"""Chrome ``cat`` of each interval / marker kind (Kineto's names where the meaning is the same).
An annotation on a GPU lane is written as ``gpu_user_annotation``."""


def heads(kinds: list[str]) -> list[str]:
    """The head of an interval event per (lane on the GPU, kind): ``{"ph":"X","cat":"kernel","name":``, host
    kinds first."""
    return [
        '{"ph":"X","cat":"%s","name":' % ("gpu_user_annotation" if g and k == "annotation" else CATEGORIES[k])
        for g in (False, True)
        for k in kinds
    ]


def json_string(value: str) -> str:
    """``value`` as a JSON string literal (UTF-8, not escaped to ASCII)."""
    return json.dumps(value, ensure_ascii=False)


def json_arg(key: str) -> Callable[[str], str]:
    """``,"key":"value"`` for a value, "" for no value (an optional string arg)."""
    return lambda v: f',"{key}":{json_string(v)}' if v else ""


def category_texts(col: pd.Series, text: Callable[[str], str]) -> tuple[np.ndarray, list[str]]:
    """A string column as (each row's code, ``text(value)`` per distinct value): computed once per value;
    a missing value reads as "" (the last text)."""
    cat = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")
    texts = [text(str(c)) for c in cat.cat.categories] + [text("")]
    codes = cat.cat.codes.to_numpy(np.int64)
    return np.where(codes < 0, len(texts) - 1, codes), texts
