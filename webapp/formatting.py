"""Jinja filters: durations, percentages, byte counts, for display only (data stays in ns / bytes).

Sizes are in binary units (1 KiB = 1024 B, MiB, GiB, TiB) and bandwidth in decimal GB/s (1e9 B/s), here and in
the pages' scripts (common.js ``SS.bytes``); numbers have 3 significant digits, trailing zeros dropped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from webapp.analysis import catalog
from webapp.analysis.units import duration_text, size_text

if TYPE_CHECKING:
    from flask import Flask


def fmt_ns(value: Any) -> str:
    """Nanoseconds as a short human duration ("12.3 ms"); "—" when missing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return duration_text(float(value))


def fmt_pct(value: Any) -> str:
    """A 0..1 fraction as a percentage; "—" when missing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{100 * float(value):.1f}%"


def fmt_bytes(value: Any) -> str:
    """A size in binary units ("64 MiB", "6.25 GiB", "2 GiB" for 2 * 1024**3), as the analysis writes them
    (webapp.analysis.units); "—" when missing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return size_text(float(value))


def fmt_change(row: Mapping[str, Any]) -> str:
    """The change a compare table shows for one row of ``webapp.figures.compare_rows``: a fraction metric's
    in percentage points, B − A ("+11.4 pts"; a relative change of a percentage reads as a different number);
    any other metric's relative to A ("-52.7%"), or B − A where A is zero."""
    if catalog.unit_of(str(row.get("metric", ""))) is catalog.Unit.FRAC:
        return str(row["delta"])
    return str(row["change"] if row["change"] != "—" else row["delta"])


def total_labels(rows: Iterable[Mapping[str, Any]], per_step_columns: Iterable[str]) -> list[dict[str, Any]]:
    """Metric rows (each with ``key`` or ``metric``, and ``label``) with the run totals named as such: a run
    metric that is also a per-step column and counts time, events or bytes is that column summed over the
    steps, so "Step time" there reads "Step time, total over the steps" (a per-step table keeps the label)."""
    summed = (catalog.Unit.NS, catalog.Unit.COUNT, catalog.Unit.BYTES)
    columns = set(per_step_columns)
    out = []
    for row in rows:
        key = str(row.get("key", row.get("metric", "")))
        total = key in columns and catalog.unit_of(key) in summed
        out.append({**row, "label": f"{row['label']}, total over the steps"} if total else dict(row))
    return out


def fmt_num(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}"
    return f"{int(value):,}"


def what_if_note(what_if: Mapping[str, Any], rows: Iterable[Mapping[str, Any]]) -> str:
    """Why the what-if's lines do not add up to its headline, '' when they do
    (webapp.analysis.report.what_if_sum_note; loaded here on first use: it needs the analysis)."""
    from webapp.analysis.report import what_if_sum_note

    return what_if_sum_note(what_if, list(rows))


FILTERS: dict[str, Callable[..., Any]] = {
    "ns": fmt_ns,
    "pct": fmt_pct,
    "bytes": fmt_bytes,
    "num": fmt_num,
    "change": fmt_change,
    "what_if_note": what_if_note,
}
"""The template filters of every page and report, by name."""


def register(app: Flask) -> None:
    for name, fn in FILTERS.items():
        app.add_template_filter(fn, name)
