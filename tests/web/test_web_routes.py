"""Every page and API route through the Flask test client, including the errors."""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path

from web_helpers import EVIL, evil_trace

from collector.synthetic import synthetic_trace
from webapp import create_app
from webapp.ingest import add_trace


def trace_bytes(tmp_path: Path, n: int = 500, gz: bool = True) -> bytes:
    from collector.traceformat.write import write_trace

    path = tmp_path / ("t.json.gz" if gz else "t.json")
    write_trace(synthetic_trace(n, pattern="naive", steps=3), str(path))
    return path.read_bytes()


def test_runs_list_shows_runs(client, two_runs) -> None:
    html = client.get("/").get_data(as_text=True)
    assert "naive run" in html and "overlap run" in html
    assert 'data-id="' + two_runs[0].id + '"' in html


def test_empty_runs_list_says_what_to_do(client) -> None:
    html = client.get("/").get_data(as_text=True)
    assert "No runs yet" in html and "/upload" in html


def test_names_are_escaped_everywhere(client, store) -> None:
    info = add_trace(store, evil_trace(), EVIL)
    for url in ("/", f"/runs/{info.id}", f"/compare?a={info.id}&b={info.id}"):
        html = client.get(url).get_data(as_text=True)
        assert "<img src=x" not in html, url
        assert "</script><img" not in html, url
    body = client.get("/api/runs").get_json()
    assert body["runs"][0]["name"] == EVIL


def test_upload_raw_body_stores_a_run(client, tmp_path) -> None:
    data = trace_bytes(tmp_path)
    resp = client.post("/api/runs?name=my%20trace.json.gz", data=data, content_type="application/octet-stream")
    assert resp.status_code == 201, resp.get_json()
    run = resp.get_json()["run"]
    assert run["name"] == "my trace" and run["intervals"] > 0
    assert client.get(resp.get_json()["url"]).status_code == 200


def test_upload_multipart_plain_json(client, tmp_path) -> None:
    data = trace_bytes(tmp_path, gz=False)
    resp = client.post("/api/runs", data={"file": (io.BytesIO(data), "plain.json")}, content_type="multipart/form-data")
    assert resp.status_code == 201
    assert resp.get_json()["run"]["name"] == "plain"


def test_multipart_file_part_is_ingested_where_it_was_written(client, store, tmp_path, monkeypatch) -> None:
    """The part is written straight into uploads/ and read there: the copying path is never taken."""
    import webapp.api

    def no_copy(*_args, **_kwargs):
        raise AssertionError("the multipart part was copied")

    monkeypatch.setattr(webapp.api, "spool_stream", no_copy)
    for name in ("part.json", "part.json.gz"):
        data = trace_bytes(tmp_path, gz=name.endswith(".gz"))
        form = {"file": (io.BytesIO(data), name), "other": (io.BytesIO(b"x" * 1000), "x.json")}
        resp = client.post("/api/runs", data=form, content_type="multipart/form-data")
        assert resp.status_code == 201, resp.get_json()
        assert resp.get_json()["run"]["name"] == "part"
    assert list(store.uploads_dir.iterdir()) == []  # every part removed when its request ended


def test_an_upload_is_known_by_its_bytes_whatever_its_name(client, store, tmp_path) -> None:
    for name, gz in (("trace.txt", True), ("export", False)):
        resp = client.post(f"/api/runs?name={name}", data=trace_bytes(tmp_path, gz=gz))
        assert resp.status_code == 201, resp.get_json()
        assert resp.get_json()["run"]["name"] == name
    form = {"file": (io.BytesIO(trace_bytes(tmp_path)), "capture.bin")}
    resp = client.post("/api/runs", data=form, content_type="multipart/form-data")
    assert resp.status_code == 201 and resp.get_json()["run"]["name"] == "capture.bin"
    assert len(store.list_runs()) == 3 and not list(store.uploads_dir.iterdir())


def test_bad_uploads_store_nothing(client, store) -> None:
    cases = {
        "broken.json": b'{"traceEvents": [',
        "bomb.json.gz": gzip.compress(b"not json at all"),
        "notes.txt": b"hello",
        "empty.json": b"",
    }
    for name, body in cases.items():
        resp = client.post(f"/api/runs?name={name}", data=body)
        assert resp.status_code == 400, name
        err = resp.get_json()["error"]
        assert "\n" not in err and "Traceback" not in err and err, name
        assert err.startswith(name) and str(store.root) not in err, err
    assert store.list_runs() == []
    assert not list(store.uploads_dir.iterdir()) and not list(store.runs_dir.iterdir())
    resp = client.post("/api/runs", data=b"{}")
    assert resp.status_code == 400 and "file name" in resp.get_json()["error"]


def test_upload_too_large(tmp_path) -> None:
    app = create_app({"DATA_DIR": str(tmp_path / "d"), "IMPORT_SAMPLES": False, "MAX_CONTENT_LENGTH": 1000})
    resp = app.test_client().post("/api/runs?name=x.json", data=b"x" * 5000)
    assert resp.status_code == 413
    assert "1,000 bytes" in resp.get_json()["error"]
    assert app.extensions["streamscope.store"].list_runs() == []


def test_rename_and_delete(client, two_runs) -> None:
    a, _ = two_runs
    resp = client.patch(f"/api/runs/{a.id}", json={"name": "renamed"})
    assert resp.get_json()["run"]["name"] == "renamed"
    assert client.patch(f"/api/runs/{a.id}", json={"name": "  "}).status_code == 400
    assert client.patch(f"/api/runs/{a.id}", data="nope").status_code == 400
    assert client.delete(f"/api/runs/{a.id}").status_code == 200
    assert client.get(f"/api/runs/{a.id}").status_code == 404


def test_unknown_run_is_a_clear_404(client) -> None:
    resp = client.get("/api/runs/0000000000000000")
    assert resp.status_code == 404 and "no run" in resp.get_json()["error"]
    page = client.get("/runs/../../etc/passwd")
    assert page.status_code == 404
    html = client.get("/runs/ffffffffffffffff").get_data(as_text=True)
    assert "Error 404" in html and "Traceback" not in html
    assert client.get("/compare?a=x&b=y").status_code == 404
    assert client.get("/nowhere").status_code == 404


def test_run_api(client, two_runs) -> None:
    a, _ = two_runs
    body = client.get(f"/api/runs/{a.id}").get_json()
    assert [ln["kind"] for ln in body["lanes"]] == ["cpu_thread", "compute_stream", "transfer_stream"]
    assert body["meta"]["source"] == "synthetic"
    analysis = client.get(f"/api/runs/{a.id}/analysis").get_json()
    assert {"metrics", "findings", "what_if", "per_step", "kernels"} <= analysis.keys()


def test_upload_page_states_the_limit_in_binary_units(tmp_path: Path) -> None:
    for limit, shown in ((2048 * 2**20, "2 GiB"), (100 * 2**20, "100 MiB"), (1536 * 2**20, "1.5 GiB")):
        config = {"DATA_DIR": str(tmp_path), "IMPORT_SAMPLES": False, "TESTING": True, "RECORD_ENABLED": False}
        app = create_app({**config, "MAX_CONTENT_LENGTH": limit})
        html = app.test_client().get("/upload").get_data(as_text=True)
        assert f"up to {shown} each" in html


def test_compare_pick_page(client, two_runs) -> None:
    html = client.get("/compare").get_data(as_text=True)
    assert "naive run" in html and "<select" in html


def test_record_page_without_gpu_says_why(client) -> None:
    html = client.get("/record").get_data(as_text=True)
    assert "not available" in html and "streamscope record" in html and "/upload" in html
    # the package is installed from a checkout, never by name from an index
    assert "pip install -e '.[gpu]'" in html
    assert "streamscope[" not in html
    resp = client.post("/api/record", json={"demo": "naive"})
    assert resp.status_code == 409


def test_record_without_torch_says_how_to_install_it(monkeypatch) -> None:
    import subprocess

    from webapp import record

    def no_torch(*args, **kwargs):
        return subprocess.CompletedProcess(args, 1, "", "ModuleNotFoundError: No module named 'torch'")

    monkeypatch.setattr(record.subprocess, "run", no_torch)
    ok, reason = record.cuda_status.__wrapped__()
    assert not ok
    assert "pip install -e '.[gpu]' in the Streamscope checkout" in reason


def test_plotly_js_is_local_compressed_and_cached(client) -> None:
    from webapp.static_assets import plotly_etag

    url = f"/assets/plotly-{plotly_etag()}.min.js"
    resp = client.get(url, headers={"Accept-Encoding": "gzip"})
    assert resp.status_code == 200 and resp.headers["Content-Encoding"] == "gzip"
    assert "max-age=31536000" in resp.headers["Cache-Control"]
    assert b"plotly" in gzip.decompress(resp.data)[:2000].lower()
    again = client.get(url, headers={"If-None-Match": resp.headers["ETag"]})
    assert again.status_code == 304


def test_token_is_required_when_set(tmp_path) -> None:
    app = create_app({"DATA_DIR": str(tmp_path / "d"), "IMPORT_SAMPLES": False, "TOKEN": "s3cret"})
    c = app.test_client()
    assert c.get("/").status_code == 401
    assert c.get("/api/runs").get_json()["error"].startswith("this server needs")
    assert c.get("/api/runs", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert c.get("/?token=s3cret").status_code == 200
    assert c.get("/").status_code == 200  # the cookie set by ?token= carries on


def test_timeline_slices_and_bad_parameters(client, two_runs) -> None:
    a, _ = two_runs
    span = a.end_ns - a.start_ns
    body = client.get(f"/api/runs/{a.id}/timeline?start_ns=0&end_ns={span}&width_px=400").get_json()
    assert [ln["lane"] for ln in body["lanes"]] == [0, 1, 2]
    assert body["origin_ns"] == a.start_ns and body["kinds"][0] == "kernel"
    for lane in body["lanes"]:
        assert len(lane["s"]) + len(lane["bs"]) <= 2000
        assert len(lane["s"]) == len(lane["d"]) == len(lane["k"]) == len(lane["n"]) == len(lane["id"])
        assert all(0 <= n < len(body["names"]) for n in lane["n"])
    assert {s["step"] for s in body["steps"]} == set(range(6))
    zoom = client.get(f"/api/runs/{a.id}/timeline?start_ns={span // 2}&end_ns={span // 2 + 200000}&width_px=800")
    assert zoom.status_code == 200 and zoom.get_json()["start_ns"] == span // 2
    one = client.get(f"/api/runs/{a.id}/timeline?rank=0").get_json()
    assert len(one["lanes"]) == 3
    for query, needle in [
        ("start_ns=5&end_ns=5", "greater"),
        ("width_px=0", "width_px"),
        ("width_px=abc", "number"),
        ("start_ns=1e99x", "number"),
    ]:
        resp = client.get(f"/api/runs/{a.id}/timeline?{query}")
        assert resp.status_code == 400 and needle in resp.get_json()["error"], query


def test_overview_matches_a_full_timeline(client, two_runs) -> None:
    a, _ = two_runs
    body = client.get(f"/api/runs/{a.id}/overview").get_json()
    assert body["start_ns"] == 0 and body["end_ns"] == a.end_ns - a.start_ns
    assert body["width_px"] == 1600
    resp = client.get(f"/api/runs/{a.id}/overview", headers={"Accept-Encoding": "gzip"})
    assert resp.headers.get("Content-Encoding") == "gzip"


def test_intervals_by_id(client, two_runs) -> None:
    a, _ = two_runs
    rows = client.get(f"/api/runs/{a.id}/intervals?ids=0,1,999999").get_json()["intervals"]
    assert sorted(r["id"] for r in rows) == [0, 1]
    assert client.get(f"/api/runs/{a.id}/intervals?ids=x").status_code == 400
    many = ",".join(str(i) for i in range(1001))
    assert client.get(f"/api/runs/{a.id}/intervals?ids={many}").status_code == 400


def test_compare_api_and_page(client, two_runs) -> None:
    a, b = two_runs
    body = client.get(f"/api/compare?a={a.id}&b={b.id}").get_json()
    assert {"metrics", "ops", "findings"} <= body.keys()
    metric = {m["metric"]: m for m in body["metrics"]}["step_time_median_ns"]
    assert metric["better"] is True  # overlap is faster than naive
    assert "pageable-copy" in body["findings"]["fixed"]
    html = client.get(f"/compare?a={a.id}&b={b.id}").get_data(as_text=True)
    assert "naive run" in html and "overlap run" in html and "Fixed in B" in html
    # a fraction's change is in percentage points (B - A), in the headline and in "all other metrics"
    rows = dict(re.findall(r'<td class="wrap" title="([^"]+)">.*?<td class="num[^"]*">([^<]*)</td></tr>', html, re.S))
    for m in body["metrics"]:
        if m["metric"].endswith("_frac") and m["delta"] is not None and m["metric"] in rows:
            assert rows[m["metric"]] == f"{100 * m['delta']:+.1f} pts", m
    busy = {m["metric"]: m for m in body["metrics"]}["gpu_busy_frac"]
    assert busy["rel_change"] != busy["delta"] and rows["gpu_busy_frac"].endswith(" pts")
    assert rows["step_time_median_ns"] == f"{100 * metric['rel_change']:+.1f}%"  # a time's change is relative
    assert client.get(f"/api/compare?a={a.id}").status_code == 400
    assert client.get(f"/api/compare?a={a.id}&b=ffffffffffffffff").status_code == 404


def test_run_page_has_timeline_findings_and_tables(client, two_runs) -> None:
    a, _ = two_runs
    html = client.get(f"/runs/{a.id}").get_data(as_text=True)
    for needle in (
        'id="timeline"',
        'id="findings"',
        'id="steps-table"',
        'id="kernels-table"',
        "Median step",
        "/assets/plotly-",
    ):
        assert needle in html
    assert "cdn" not in html.lower()


def test_local_only_refuses_other_host_names(tmp_path) -> None:
    app = create_app({"DATA_DIR": str(tmp_path / "d"), "IMPORT_SAMPLES": False, "LOCAL_ONLY": True})
    c = app.test_client()
    assert c.get("/", headers={"Host": "127.0.0.1:8050"}).status_code == 200
    assert c.get("/", headers={"Host": "localhost:8050"}).status_code == 200
    assert c.get("/", headers={"Host": "[::1]:8050"}).status_code == 200
    resp = c.get("/api/runs", headers={"Host": "evil.example:8050"})
    assert resp.status_code == 403 and "127.0.0.1" in resp.get_json()["error"]


def test_the_run_page_folds_its_minor_findings_as_the_report_does(client, store) -> None:
    from webapp.analysis import analyze

    trace = synthetic_trace(4000, pattern="launch-bound", steps=4)
    minor = [f.rule for f in analyze(trace).minor_findings]
    assert minor  # this run has some
    info = add_trace(store, trace, "launch-bound")
    html = client.get(f"/runs/{info.id}").get_data(as_text=True)
    summary = f"{len(minor)} minor finding{'s' if len(minor) != 1 else ''}"
    assert summary in html
    assert all(f'<li data-rule="{rule}">' in html for rule in minor)


def test_an_imported_trace_is_named_after_the_users_file_not_the_servers_copy(client) -> None:
    """torch.profiler traces name their workload after their file; the server loads its own copy."""
    sample = Path(__file__).resolve().parents[2] / "sample_traces" / "torch-profiler-overlap.pt.trace.json.gz"
    resp = client.post("/api/runs?name=job%2Fhost_7.pt.trace.json.gz", data=sample.read_bytes())
    assert resp.status_code == 201, resp.get_json()
    run_id = resp.get_json()["run"]["id"]
    listed = next(r for r in client.get("/api/runs").get_json()["runs"] if r["id"] == run_id)
    assert listed["workload"] == "host_7.pt.trace.json.gz", listed
    html = client.get(f"/runs/{run_id}").get_data(as_text=True)
    assert "host_7.pt.trace.json.gz" in html and not re.search(r"[0-9a-f]{16}\.json", html)


def test_the_run_page_says_why_the_what_if_lines_do_not_add_up(client, store) -> None:
    from collector.load import load_trace
    from webapp.analysis.report import what_if_rows, what_if_sum_note

    sample = Path(__file__).resolve().parents[2] / "sample_traces" / "naive.json.gz"
    info = add_trace(store, load_trace(str(sample)), "naive")
    analysis = client.get(f"/api/runs/{info.id}/analysis").get_json()
    note = what_if_sum_note(analysis["what_if"], what_if_rows(analysis["what_if"], analysis["findings"]))
    assert "fixes interact" in note  # three fixes saving 17.3 ms alone, 9.7 ms together
    html = client.get(f"/runs/{info.id}").get_data(as_text=True)
    assert f'<p class="muted small" id="whatif-note">{note}</p>' in html


def test_the_run_page_offers_the_same_workload_first_then_runs_of_its_kind(client, store) -> None:
    from dataclasses import replace

    trace = synthetic_trace(500, pattern="naive", steps=3)
    before = add_trace(store, trace, "before the fix")
    other = add_trace(store, synthetic_trace(500, pattern="overlap", steps=3), "another loop")
    imported = add_trace(
        store, replace(trace, meta=replace(trace.meta, source="torch.profiler", workload="p.json")), "profile"
    )
    after = add_trace(store, trace, "after the fix")  # newest first, the list reads: profile, other, before
    html = client.get(f"/runs/{after.id}").get_data(as_text=True)
    select = re.search(r'<select name="b"[^>]*>(.*?)</select>', html, re.S)
    assert select and re.findall(r'<option value="(\w+)"', select[1]) == [before.id, other.id, imported.id]


def test_the_critical_paths_card_says_how_its_per_step_figure_is_made(client, two_runs) -> None:
    html = client.get(f"/runs/{two_runs[0].id}").get_data(as_text=True)
    card = re.search(r'<div class="metric" data-key="cp_host_step_median_ns"([^>]*)>', html)
    assert card and "share of the critical path over all steps" in card[1]
    plain = re.search(r'<div class="metric" data-key="step_time_median_ns"([^>]*)>', html)
    assert plain and "title=" not in plain[1]  # a median step needs no tooltip
