"""The Kineto importer's output, pinned: a digest of every column (dtype, categories, values), the lanes, the
step markers and the metadata (but its import-time stamps) of each recorded torch.profiler trace, taken before
the importer was split into its stages (and again when host threads were labelled by what they are: the only
change then was the lane labels). A change to any value, dtype or row order changes the digest.

Regenerate only for an intended change of output: ``python tests/kineto/test_kineto_golden.py``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collector.importers.kineto import trace_from_kineto
from collector.load import load_trace
from collector.model import Trace
from collector.traceformat.events import read_events

ROOT = Path(__file__).resolve().parents[2]
TRACES = {
    "sample-overlap": ROOT / "sample_traces" / "torch-profiler-overlap.pt.trace.json.gz",
    "gpu-step": ROOT / "tests" / "kineto" / "data" / "gpu_step.pt.trace.json.gz",
    "gpu-train": ROOT / "tests" / "kineto" / "data" / "gpu_train.pt.trace.json.gz",
    "rocm": ROOT / "tests" / "kineto" / "data" / "rocm_mi250_train.pt.trace.json.gz",
    "fixture": ROOT / "tests" / "kineto" / "data" / "gpu_fixture.json",
}
STAMPED = ("created", "host", "streamscope_version")
"""Metadata stamped at import time (RunMeta.new), left out of the digest."""
DIGESTS = {
    ("fixture", False): "fff238115d8e82d5508b69cf9e53e1444deb2b8e74d2e67949d57ef9cc2af3bc",
    ("fixture", True): "28e0b196a8be26186ffa336f0929b02983e3f06f25890c749835802be0e6a843",
    ("gpu-step", False): "df62ee5bbe14a725c4419ef7de33dde36f193c21e772f086b1fad936f50de9a5",
    ("gpu-step", True): "523cad3c7e32868c2f5a1d3d0242beb32cb9ded69e19cacbe269bcb753b9bcc1",
    ("gpu-train", False): "4fe674174a613c5ab6e1c80119abbf86f4dcacf6019f73aed98c67ec83860e4b",
    ("gpu-train", True): "918df41abf6a32072e3f4fa824f1f764545bfda7b1a81582008b4147ea597255",
    ("rocm", False): "8af6f9d1779573e1c3e241d5810c2db6358179eb7373e6db623a6da7986cf0ac",
    ("rocm", True): "71d633252b14020f1f73d08ab2137cc961045885e50ad3e75b1e7afb9d322332",
    ("sample-overlap", False): "bc1bc9ebd5a162aa10040b5b1c673a0a3655649950d9a3c56bef5c2900cd978e",
    ("sample-overlap", True): "6af0481b54f3f3e0b1725f7f5d5ff1dbcf6a497680e3b302e28a1d65b2f3395b",
}


def frame_digest(frame: pd.DataFrame) -> str:
    """sha256 over each column's name, dtype and values (a categorical's categories and codes)."""
    h = hashlib.sha256()
    for name in frame.columns:
        col = frame[name]
        h.update(f"{name}:{col.dtype}".encode())
        if isinstance(col.dtype, pd.CategoricalDtype):
            h.update(json.dumps([str(c) for c in col.cat.categories]).encode())
            h.update(col.cat.codes.to_numpy().astype(np.int64).tobytes())
        elif col.dtype == object:
            h.update(json.dumps([str(v) for v in col]).encode())
        else:
            h.update(np.ascontiguousarray(col.to_numpy()).tobytes())
    return h.hexdigest()


def trace_digest(trace: Trace) -> str:
    h = hashlib.sha256()
    h.update(frame_digest(trace.intervals).encode())
    h.update(frame_digest(trace.markers.reset_index(drop=True)).encode())
    h.update(json.dumps([[ln.rank, ln.kind.value, ln.ident, ln.label] for ln in trace.lanes]).encode())
    meta = {k: v for k, v in trace.meta.to_dict().items() if k not in STAMPED}
    h.update(json.dumps(meta, sort_keys=True, default=str).encode())
    return h.hexdigest()


LOADED = {
    "fixture": "6c4105d838d6753a62c8676c1753f0dbdfedd453cbd788297aca3baaec6a64bf",
    "gpu-step": "66ac11c565f33a55566a77aba55c813941448b365c964cb03992de6c891d99ca",
    "gpu-train": "ca0a89035e4bbee78ab8f72ea5a4c59bf6bb61f3790c26d2cc1af896bfad5d2f",
    "rocm": "35783756529cfbe619597bafd12b7b5c0588ef826f94bdaf33a1e4cf06ca036b",
    "sample-overlap": "ce0c8ca95792e7f98165108566d055ed771ef0640120413e7f201fece19536e8",
}


def imported(name: str, by_start: bool) -> Trace:
    path = TRACES[name]
    return trace_from_kineto(read_events(path), source_name=path.name, by_start=by_start)


@pytest.mark.parametrize(("name", "by_start"), sorted(DIGESTS), ids=lambda v: str(v))
def test_imported_run_is_unchanged(name: str, by_start: bool) -> None:
    assert trace_digest(imported(name, by_start)) == DIGESTS[(name, by_start)]


@pytest.mark.parametrize("name", sorted(LOADED))
def test_loaded_run_is_unchanged(name: str) -> None:
    """The whole load (recognise the file, import it, mark host collectives, find steps) likewise."""
    assert trace_digest(load_trace(TRACES[name])) == LOADED[name]


if __name__ == "__main__":  # pragma: no cover - prints the tables above
    for key in sorted(DIGESTS):
        print(f"    {key!r}: {trace_digest(imported(*key))!r},")
    for name in sorted(TRACES):
        print(f"    {name!r}: {trace_digest(load_trace(TRACES[name]))!r},")
