"""A stored analysis made by another version of Streamscope is computed again when the run is next read, and
the runs list's summary with it; one made by this version is served as stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collector.load import load_trace
from webapp.analysis.version import analysis_version
from webapp.ingest import add_trace
from webapp.store import Store

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _age(store: Store, run_id: str) -> dict:
    """Make the stored analysis look like an older version's: another version, no findings, a stale summary."""
    path = store.analysis_path(run_id)
    fresh = json.loads(path.read_text())
    old = {**fresh, "analysis_version": "an-older-one", "findings": [], "summary": {**fresh["summary"], "findings": 99}}
    store.replace_analysis(run_id, old)
    return fresh


@pytest.mark.parametrize("name", ["naive.json.gz", "overlap.json.gz"])
def test_an_older_versions_analysis_is_computed_again_on_its_next_read(client, store: Store, name: str) -> None:
    info = add_trace(store, load_trace(SAMPLES / name), name)
    fresh = _age(store, info.id)
    assert fresh["analysis_version"] == analysis_version()
    assert store.get(info.id).summary["findings"] == 99
    got = client.get(f"/api/runs/{info.id}/analysis").get_json()
    assert got["analysis_version"] == analysis_version()
    # the stored run (its intervals sorted by lane) analyses as the trace did at ingest
    assert [f["rule"] for f in got["findings"]] == [f["rule"] for f in fresh["findings"]]
    assert got["metrics"] == pytest.approx(fresh["metrics"], nan_ok=True)
    assert store.get(info.id).summary == fresh["summary"]  # the runs list reads the new summary
    assert json.loads(store.analysis_path(info.id).read_text())["analysis_version"] == analysis_version()


def test_this_versions_analysis_is_served_as_stored(client, store: Store, two_runs) -> None:
    run = two_runs[0]
    path = store.analysis_path(run.id)
    marked = {**json.loads(path.read_text()), "notes": ["as stored"]}
    path.write_text(json.dumps(marked))
    assert client.get(f"/api/runs/{run.id}/analysis").get_json()["notes"] == ["as stored"]
    assert client.get(f"/runs/{run.id}").status_code == 200


def test_the_version_is_a_digest_of_the_analysis_code() -> None:
    version = analysis_version()
    assert len(version) == 16 and int(version, 16) >= 0


def test_the_server_brings_small_runs_up_to_date_at_start_and_leaves_large_ones_to_their_first_read(
    app, store: Store, two_runs
) -> None:
    from webapp import create_app
    from webapp.pipeline import refresh_stale_analyses

    smaller, bigger = sorted(two_runs, key=lambda r: r.intervals)
    assert smaller.intervals < bigger.intervals
    for run in two_runs:
        _age(store, run.id)
    refresh_stale_analyses(store, max_intervals=smaller.intervals).join(timeout=60)
    assert store.analysis(smaller.id)["analysis_version"] == analysis_version()
    assert store.get(smaller.id).summary["findings"] != 99
    assert store.analysis(bigger.id)["analysis_version"] == "an-older-one"
    assert store.get(bigger.id).summary["findings"] == 99
    # as `streamscope serve` starts it: every run of the default size limit
    served = create_app({**app.config, "IMPORT_SAMPLES": False, "REFRESH_ANALYSES": True})
    served.extensions["streamscope.refresh"].join(timeout=60)
    assert all(store.analysis(r.id)["analysis_version"] == analysis_version() for r in two_runs)
    assert all(store.get(r.id).summary["findings"] != 99 for r in two_runs)


def test_a_stored_run_that_cannot_be_read_keeps_its_older_analysis_and_says_so(client, store: Store, two_runs) -> None:
    run = two_runs[0]
    _age(store, run.id)
    store.run_path(run.id).write_bytes(b"not parquet")
    got = client.get(f"/api/runs/{run.id}/analysis").get_json()
    assert got["analysis_version"] == "an-older-one"
    assert got["notes"][-1].startswith("This analysis was made by an older version of Streamscope; the run could not")
