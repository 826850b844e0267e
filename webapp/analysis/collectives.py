"""The run's collectives, each matched over the ranks of its group: the table behind the Collectives tab.

A collective instance is the same call on every rank of its process group (collector.ranks.align
.matched_collectives). Across ranks, webapp.analysis.ranks reads from this table who arrives last and what the
others wait. A run of one rank has the table too: each collective's name, group, bytes and duration.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from collector.ranks.align import matched_collectives
from webapp.analysis.context import RunData
from webapp.analysis.records import frame_records

MAX_TABLE_ROWS = 2000
"""The collectives table keeps the first this many collectives of a run."""

ONE_RANK_COLUMNS = ("seq", "name", "group", "bytes", "dur_ns")
"""The table's columns for a run of one rank: nothing waits for another rank, so no skew, wait or last rank."""


def collective_frame(rd: RunData) -> pd.DataFrame:
    """One row per (matched collective, rank): the MATCHED_COLUMNS of collector.ranks.align plus ``wait_ns``
    (latest start over ranks - start, ns), ``last`` (this rank arrived last; one per collective) and
    ``win`` (the rank's step window holding the start, -1 outside)."""
    m = matched_collectives(rd.trace.intervals)
    latest = m.groupby("seq")["start_ns"].transform("max").to_numpy(np.int64)
    m["wait_ns"] = latest - m["start_ns"].to_numpy(np.int64)
    last_row = m.groupby("seq")["start_ns"].idxmax()
    m["last"] = False
    m.loc[last_row.to_numpy(), "last"] = True
    m["win"] = rd.win_row[m["row"].to_numpy(np.int64)] if len(m) else np.zeros(0, dtype=np.int64)
    m["bytes"] = rd.trace.intervals["bytes"].to_numpy(np.int64)[m["row"].to_numpy(np.int64)]
    return m


def collective_summary(cf: pd.DataFrame) -> pd.DataFrame:
    """One row per collective: ``seq``, ``name``, ``group`` (process group, '' if unknown), ``bytes`` (its
    largest message over ranks), ``ranks``, ``comm_latency_ns`` (min duration over ranks),
    ``start_skew_ns``/``end_skew_ns`` (max - min over ranks), ``max_wait_ns``, ``last_rank``."""
    g = cf.groupby("seq", sort=True)
    out = g.agg(
        name=("name", "first"),
        group=("group", "first"),
        bytes=("bytes", "max"),
        ranks=("rank", "size"),
        comm_latency_ns=("dur_ns", "min"),
        start_min=("start_ns", "min"),
        start_max=("start_ns", "max"),
        end_min=("end_ns", "min"),
        end_max=("end_ns", "max"),
        max_wait_ns=("wait_ns", "max"),
    )
    out["start_skew_ns"] = out.pop("start_max") - out.pop("start_min")
    out["end_skew_ns"] = out.pop("end_max") - out.pop("end_min")
    out["last_rank"] = cf[cf["last"]].set_index("seq")["rank"].reindex(out.index)
    cols = ["name", "group", "bytes", "ranks", "comm_latency_ns", "start_skew_ns", "end_skew_ns", "max_wait_ns"]
    cols.append("last_rank")
    return out.reset_index()[["seq", *cols]]


def one_rank_section(rd: RunData) -> dict[str, Any]:
    """The ``ranks`` section of a run of one rank (RunAnalysis.ranks): ``collectives``, one record per
    collective with ONE_RANK_COLUMNS (``dur_ns``: its duration, ns), and ``collective_count``; empty for a
    run without collectives."""
    summary = collective_summary(collective_frame(rd)).rename(columns={"comm_latency_ns": "dur_ns"})
    if summary.empty:
        return {}
    table = summary[list(ONE_RANK_COLUMNS)].head(MAX_TABLE_ROWS)
    return {"collectives": frame_records(table), "collective_count": len(summary)}
