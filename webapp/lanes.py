"""Lanes as the timeline lays them out: each stored lane (``index``, ``rank``, ``kind``, ``ident``, ``label``)
with two facts of display.

* ``queue``: the lane gets a queue track (ops launched and not yet started, the host's lead). Only CUDA
  streams that run the user's work have one: not a communication lane whose collectives a host thread ran
  (gloo: ``gloo comm (thread N)``, as collector.recording.commjoin and collector.importers.threads label
  them), nor a grouped lane.
* ``group``: lanes the page folds into one row until it is opened ('' for none). A host-run backend stages
  CUDA tensors through a pool of side streams, one lane each (``stream N (gloo copies)``, as
  collector.recording.commjoin labels them): ``gloo copies``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from collector.model import Lane, LaneKind
from webapp.runfile import lane_dict

COPY_STREAM = re.compile(r"^stream \d+ \((?P<backend>[\w-]+) copies\)$")
"""The label of a side stream whose every copy a collective made."""
HOST_COMM = re.compile(r" comm \(thread \d+\)$")
"""The end of the label of a communication lane that is a host thread."""


def lane_views(lanes: Sequence[Lane]) -> list[dict[str, Any]]:
    """One dict per lane, in order: :func:`webapp.runfile.lane_dict`'s fields, ``index``, ``queue``, ``group``."""
    out = []
    for i, ln in enumerate(lanes):
        copies = COPY_STREAM.match(ln.label) if ln.kind is LaneKind.TRANSFER_STREAM else None
        group = f"{copies['backend']} copies" if copies else ""
        host_run = ln.kind is LaneKind.COMM_STREAM and HOST_COMM.search(ln.label) is not None
        queue = ln.kind.is_gpu and not host_run and not group
        out.append({"index": i, **lane_dict(ln), "queue": queue, "group": group})
    return out
