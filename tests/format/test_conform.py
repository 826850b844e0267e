"""conform_intervals: columns with fixed categories end with the model's codes, whatever order they came in;
conforms: whether a frame is already in that shape."""

from __future__ import annotations

import numpy as np
import pandas as pd

from collector.model import INTERVAL_KIND_DTYPE, MEMORY_KIND_DTYPE, conform_intervals, conforms


def _frame(kind: pd.Categorical, memory: pd.Categorical) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": np.arange(3),
            "lane": np.zeros(3, dtype=np.int32),
            "lane_kind": "cpu_thread",
            "kind": kind,
            "name": ["a", "b", "c"],
            "start_ns": [0, 5, 9],
            "end_ns": [4, 8, 9],
            "memory_kind": memory,
        }
    )


def test_categories_in_another_order_are_recoded_to_the_models() -> None:
    values = ["kernel", "launch", "memset"]
    shuffled = pd.Categorical(values, categories=list(reversed(INTERVAL_KIND_DTYPE.categories)))
    memory = pd.Categorical(["", "pinned", ""], categories=list(reversed(MEMORY_KIND_DTYPE.categories)))
    out = conform_intervals(_frame(shuffled, memory))
    assert out["kind"].dtype == INTERVAL_KIND_DTYPE and out["kind"].tolist() == values
    expected = [INTERVAL_KIND_DTYPE.categories.get_loc(v) for v in values]
    assert out["kind"].cat.codes.tolist() == expected
    assert out["memory_kind"].cat.codes.tolist() == [
        MEMORY_KIND_DTYPE.categories.get_loc(v) for v in ["", "pinned", ""]
    ]


def test_columns_already_in_the_models_categories_keep_their_codes() -> None:
    kind = pd.Categorical(["kernel", "launch", "kernel"], dtype=INTERVAL_KIND_DTYPE)
    memory = pd.Categorical(["", "", "device"], dtype=MEMORY_KIND_DTYPE)
    out = conform_intervals(_frame(kind, memory))
    assert out["kind"].cat.codes.tolist() == list(kind.codes)
    assert out["memory_kind"].tolist() == ["", "", "device"]


def test_a_column_of_no_categories_becomes_missing_values() -> None:
    kind = pd.Categorical(["kernel", "launch", "kernel"], dtype=INTERVAL_KIND_DTYPE)
    memory = pd.Categorical([np.nan, np.nan, np.nan], categories=[])
    out = conform_intervals(_frame(kind, memory))
    assert out["memory_kind"].dtype == MEMORY_KIND_DTYPE and out["memory_kind"].isna().all()


def test_conforms_tells_whether_conforming_can_be_skipped() -> None:
    kind = pd.Categorical(["kernel", "launch", "memset"], dtype=INTERVAL_KIND_DTYPE)
    out = conform_intervals(_frame(kind, pd.Categorical(["", "", ""], dtype=MEMORY_KIND_DTYPE)))
    assert conforms(out)
    assert conforms(out.assign(name=out["name"].cat.rename_categories(["x", "y", "z"])))  # any names
    assert not conforms(out.assign(kind=out["kind"].astype(str)))  # a fixed-category column as strings
    shuffled = pd.Categorical(out["kind"].astype(str), categories=list(reversed(INTERVAL_KIND_DTYPE.categories)))
    assert not conforms(out.assign(kind=shuffled))  # the same kinds under other codes
    assert not conforms(out.assign(step=out["step"].astype(np.int64)))
    assert not conforms(out[list(reversed(out.columns))])
    assert not conforms(out.drop(columns="group"))


def test_the_conformed_frame_shares_nothing_its_writes_can_reach() -> None:
    kind = pd.Categorical(["kernel", "launch", "kernel"], dtype=INTERVAL_KIND_DTYPE)
    source = _frame(kind, pd.Categorical(["", "", ""], dtype=MEMORY_KIND_DTYPE)).set_index(pd.Index([7, 8, 9]))
    out = conform_intervals(source)
    out.loc[out.index[:2], "start_ns"] = 100
    out.loc[out.index[:1], "kind"] = "memset"
    assert source["start_ns"].tolist() == [0, 5, 9] and source["kind"].tolist() == ["kernel", "launch", "kernel"]
    assert out.index.tolist() == [0, 1, 2] and out["start_ns"].tolist() == [100, 100, 9]


def test_missing_and_non_string_columns_take_their_defaults_and_text() -> None:
    frame = _frame(pd.Categorical(["kernel"] * 3, dtype=INTERVAL_KIND_DTYPE), pd.Categorical(["", "", ""]))
    out = conform_intervals(frame.assign(name=[3, 1, 2]))
    assert out["name"].tolist() == ["3", "1", "2"] and list(out["name"].cat.categories) == ["1", "2", "3"]
    assert out["source"].tolist() == [""] * 3 and out["step"].tolist() == [-1] * 3
    assert out["dur_ns"].tolist() == [4, 3, 0] and out["memory_kind"].dtype == MEMORY_KIND_DTYPE
    assert conforms(out)
