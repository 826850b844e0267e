"""Interval frames joined in one pass (collector.importers.frames.appended_by_start) against the steps it
stands for: concatenated keeping categorical codes, sorted and renumbered by start, conformed."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.testing import assert_frame_equal

from collector.importers.frames import appended_by_start, concat_keeping_codes, renumber_by_start
from collector.model import INTERVAL_KIND_DTYPE, KIND_CODE, conform_intervals


def _frame() -> pd.DataFrame:
    """Two launches on a CPU lane (ids 10 and 11, out of start order with a kernel) and the kernels they
    launched on a stream lane, one named op with a source."""
    return conform_intervals(
        pd.DataFrame(
            {
                "id": [10, 11, 12, 13],
                "lane": [0, 0, 1, 1],
                "lane_kind": ["cpu_thread", "cpu_thread", "compute_stream", "compute_stream"],
                "stream": [77, 77, 7, 7],
                "kind": ["launch", "launch", "kernel", "kernel"],
                "name": ["cudaLaunchKernel", "cudaLaunchKernel", "gemm", "relu"],
                "start_ns": [100, 300, 250, 400],
                "end_ns": [120, 320, 350, 450],
                "launch_id": [-1, -1, 10, 11],
                "source": ["", "", "t.py:3", ""],
                "step": [0, 0, 0, 1],
            }
        )
    )


def test_appending_rows_gives_what_concat_renumber_and_conform_give() -> None:
    frame = _frame()
    names = ["fwd", "t.py:<module>:3;f", "fwd"]
    starts, ends, lanes = [90, 300, 500], [460, 310, 600], [0, 2, 0]
    kinds = np.array([KIND_CODE["annotation"], KIND_CODE["sample"], KIND_CODE["annotation"]], dtype=np.int8)
    rows = {
        "lane": np.array(lanes, dtype=np.int32),
        "lane_kind": "cpu_thread",
        "stream": np.array([77, -77, 77], dtype=np.int64),
        "kind": pd.Categorical.from_codes(kinds, dtype=INTERVAL_KIND_DTYPE),
        "name": names,
        "start_ns": starts,
        "end_ns": ends,
    }
    got = appended_by_start(frame, rows, 3)
    add = conform_intervals(
        pd.DataFrame({**rows, "id": [20, 21, 22], "name": pd.Categorical(names), "kind": rows["kind"]})
    )[frame.columns]
    want = conform_intervals(renumber_by_start(concat_keeping_codes(frame, add)))
    as_values = {c: want[c].astype(str) for c in ("name", "source", "cause", "group", "lane_label")}
    assert_frame_equal(got.assign(**{c: got[c].astype(str) for c in as_values}), want.assign(**as_values))
    # the kernels keep their launches under the new ids, the new rows launch nothing
    kernels = got[got["kind"] == "kernel"]
    launched = got.set_index("id").loc[kernels["launch_id"], "start_ns"].tolist()
    assert launched == [100, 300] and list(got["id"]) == list(range(7))
    assert list(got["start_ns"]) == sorted(got["start_ns"])
