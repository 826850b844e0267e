"""The runs list counts a run's findings as its run page lists them, whatever their severity."""

from __future__ import annotations

import re
from pathlib import Path

from collector.load import load_trace
from webapp.analysis import analyze
from webapp.ingest import add_trace

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _row(html: str, run_id: str) -> str:
    start = html.index(f'<tr data-id="{run_id}">')
    return html[start : html.index("</tr>", start)]


def test_the_runs_list_counts_the_findings_the_run_page_lists(client, store) -> None:
    """d2h's run page lists one critical finding and two of severity info: the runs list says 3, not 1."""
    trace = load_trace(str(SAMPLES / "d2h.json.gz"))
    result = analyze(trace)
    severities = sorted(f.severity for f in result.findings)
    assert "info" in severities and len(severities) > severities.count("info") + severities.count("warning")
    info = add_trace(store, trace, "d2h")

    page = client.get(f"/runs/{info.id}").get_data(as_text=True)
    listed = page.count("data-finding=")
    assert listed == len(result.findings) == 3
    row = _row(client.get("/").get_data(as_text=True), info.id)
    cells = re.findall(r'<td class="num" data-v="([^"]*)">(.*?)</td>', row)
    value, shown = cells[-1]  # the Findings column, the last number of the row
    assert int(value) == listed and re.sub(r"<[^>]+>", "", shown) == str(listed)

    api = next(r for r in client.get("/api/runs").get_json()["runs"] if r["id"] == info.id)
    assert api["summary"]["findings"] == listed
    assert api["summary"]["minor_findings"] == len(result.minor_findings)


def test_minor_findings_are_counted_apart_from_the_listed_ones(client, store) -> None:
    """Minor findings are folded on the run page, not in its list: the summary counts them on their own."""
    from collector.synthetic import synthetic_trace

    trace = synthetic_trace(4000, pattern="launch-bound", steps=4)
    result = analyze(trace)
    assert result.minor_findings
    summary = result.summary()
    assert (summary["findings"], summary["minor_findings"]) == (len(result.findings), len(result.minor_findings))
    info = add_trace(store, trace, "launch-bound")
    page = client.get(f"/runs/{info.id}").get_data(as_text=True)
    assert page.count("data-finding=") == summary["findings"]
    assert f"{summary['minor_findings']} minor finding" in page
