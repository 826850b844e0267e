"""Query-string parameters of the API, checked: a bad one is a 400 with one line."""

from __future__ import annotations

from flask import abort, request


def int_arg(name: str, default: int | None = None, lo: int | None = None, hi: int | None = None) -> int:
    """Integer query parameter ``name`` (``default`` when absent; 400 when missing, not a number or outside
    [lo, hi])."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        if default is None:
            abort(400, f"missing parameter {name}")
        return default
    try:
        value = int(float(raw))
    except ValueError:
        abort(400, f"parameter {name} must be a number, not {raw[:40]!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        abort(400, f"parameter {name} must be between {lo} and {hi}")
    return value
