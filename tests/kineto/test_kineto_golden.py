"""The Kineto importer's output, pinned: a digest of every column (dtype, categories, values), the lanes, the
step markers and the metadata (but its import-time stamps) of each recorded torch.profiler trace, taken before
the importer was split into its stages (and again when host threads were labelled by what they are: the only
change then was the lane labels; and when Python calls became ``sample`` stretches: the only change then was
those rows and their lane, with the other rows unchanged; and when a loaded file's workload became its own
name rather than the name the profiler gave its export; and when the sample trace was recorded anew, the importer
unchanged). A change to any value, dtype or row order changes the digest.

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
    ("fixture", False): "30f1787daa773060e49ae44c118eb9974283865fb520647e6d9dea143289df5a",
    ("fixture", True): "45e8995a295c58947fdad56667a9b0742962326b65f577af5e7c3f5c63b845be",
    ("gpu-step", False): "6d5b26ec45249eb45c7d98a1b3f01720b633db493b7886358d86518d334e2fd6",
    ("gpu-step", True): "b85f9e41ac1c6911a95116710e64dc2768c53677cc42107161d10b8be5fbbca8",
    ("gpu-train", False): "4fe674174a613c5ab6e1c80119abbf86f4dcacf6019f73aed98c67ec83860e4b",
    ("gpu-train", True): "918df41abf6a32072e3f4fa824f1f764545bfda7b1a81582008b4147ea597255",
    ("rocm", False): "8af6f9d1779573e1c3e241d5810c2db6358179eb7373e6db623a6da7986cf0ac",
    ("rocm", True): "71d633252b14020f1f73d08ab2137cc961045885e50ad3e75b1e7afb9d322332",
    ("sample-overlap", False): "c47c6c84b27e8a463295d34ff154ebae68bb183411bf174736749b2e81cf596d",
    ("sample-overlap", True): "4829871680f829166156fbc80008775e65f9bdfd3c412358c528a59eb8fa51ba",
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
    "fixture": "835832bbe464a7394e04c47effd57707bac5d16c0634ba623f1e32f02274b157",
    "gpu-step": "cf55db1cd5ca7bf629b2755b8c25f3c9039c425cf55b73488340e9c48564a8e1",
    "gpu-train": "e3db99dbf35f84d259822dadee534ed322b4a0bb30c807143c3e4585ac7f2877",
    "rocm": "1fb6731908d824ff09f73b7df058f3270c3dc4f09c70fd26ca748a4e4a9d295f",
    "sample-overlap": "65500030803b3593d573d3b48ed0668a0ff429923bd4744c3ffafe2c7f08bd2c",
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
