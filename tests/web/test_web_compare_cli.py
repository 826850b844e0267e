"""The web comparison and `streamscope compare` are one implementation: same answer on the sample traces."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from webapp import PACKAGE_ROOT
from webapp.ingest import display_name, ingest_file

SAMPLES = PACKAGE_ROOT / "sample_traces"


def _close(x: object, y: object) -> bool:
    if isinstance(x, float) or isinstance(y, float):
        if x is None or y is None:
            return x is y
        return math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-9)  # type: ignore[arg-type]
    return x == y


@pytest.mark.skipif(not (SAMPLES / "naive.json.gz").is_file(), reason="sample traces not present")
def test_web_compare_matches_cli(client, store) -> None:
    a_path, b_path = SAMPLES / "naive.json.gz", SAMPLES / "overlap.json.gz"
    a = ingest_file(store, a_path, display_name(a_path.name))
    b = ingest_file(store, b_path, display_name(b_path.name))
    web = client.get(f"/api/compare?a={a.id}&b={b.id}").get_json()
    cli = subprocess.run(
        [sys.executable, "-m", "webapp.cli", "compare", str(a_path), str(b_path), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    expected = json.loads(cli.stdout)
    assert web["findings"] == expected["findings"]
    assert expected["findings"]["fixed"], "the overlap sample fixes at least one naive finding"
    assert _close(web["step_time_change"], expected["step_time_change"])
    assert expected["step_time_change"] < 0
    assert [r["metric"] for r in web["metrics"]] == [r["metric"] for r in expected["metrics"]]
    for got, want in zip(web["metrics"], expected["metrics"], strict=True):
        for key in ("a", "b", "delta", "rel_change", "better"):
            assert _close(got[key], want[key]), (got["metric"], key, got[key], want[key])
    assert [(r["kind"], r["name"], r["status"]) for r in web["ops"]] == [
        (r["kind"], r["name"], r["status"]) for r in expected["ops"]
    ]
    assert web["a"]["summary"] == expected["a"]["summary"]
