"""`streamscope report`, `compare --report/--markdown`, the Markdown summary and progress on a terminal."""

from __future__ import annotations

import html
import io
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from report_runs import EVIL

from collector.load import load_trace
from webapp import PACKAGE_ROOT
from webapp.analysis.compare import compare_analyses
from webapp.cli import main
from webapp.progress import CLEAR, Progress
from webapp.report import PreparedRun, markdown_summary, verdict_of
from webapp.report.summary import Verdict, md

SAMPLE = PACKAGE_ROOT / "sample_traces"
NAIVE, OVERLAP = str(SAMPLE / "naive.json.gz"), str(SAMPLE / "overlap.json.gz")


def test_report_writes_one_file_per_run_and_per_pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    assert main(["report", NAIVE, "--out", str(out)]) == 0
    assert out.stat().st_size > 1_000_000
    wrote = capsys.readouterr().out.strip()
    assert re.fullmatch(rf"wrote {re.escape(str(out))} \((\d+(\.\d+)?) MiB\)", wrote), wrote
    assert float(wrote.rsplit("(", 1)[1].split()[0]) == pytest.approx(out.stat().st_size / 2**20, rel=0.01)
    assert main(["report", NAIVE, OVERLAP, "-o", str(tmp_path / "c.html")]) == 0
    assert '"mode": "compare"' in (tmp_path / "c.html").read_text()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["report", "missing.json"], "missing.json: no such file"),
        (["report", NAIVE, "--out", "/no/such/dir/r.html"], "no such folder"),
        (["report", NAIVE, "--budget-mb", "0"], "--budget-mb"),
        (["compare", NAIVE, OVERLAP, "--report", "/no/such/dir/d.html"], "no such folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_compare_writes_the_report_whatever_the_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    diff = tmp_path / "diff.html"
    # overlap -> naive is much slower: the gate fails, and the report is still written
    assert main(["compare", OVERLAP, NAIVE, "--fail-if-slower", "5%", "--report", str(diff), "--markdown"]) == 1
    text = capsys.readouterr().out
    verdict = re.search(r"FAIL: B's median step takes (\d+\.\d)% more time than A's \((\d+\.\d\d)x slower\)", text)
    assert verdict, text
    more, ratio = float(verdict[1]), float(verdict[2])
    assert ratio == pytest.approx(1 + more / 100, abs=0.006)
    assert diff.is_file() and verdict[0] in html.unescape(diff.read_text())
    assert text.startswith("### Streamscope: naive (B) vs overlap (A)")
    assert f"❌ **{verdict[0]}; the bound is 5.0% more**" in text and "| Median step |" in text and str(diff) in text
    new = next(line for line in text.splitlines() if line.startswith("**New in B:**"))
    assert "`pageable-copy`" in new and "`no-copy-overlap`" in new
    assert main(["compare", NAIVE, OVERLAP, "--fail-if-slower", "5%", "--report", str(diff)]) == 0
    assert "report: " in capsys.readouterr().out


def test_markdown_summary_escapes_names(prepared_samples: dict[str, PreparedRun]) -> None:
    a, b = prepared_samples["naive"], prepared_samples["overlap"]
    result = compare_analyses(a.analysis, b.analysis)
    text = markdown_summary(result, "base|line", EVIL, verdict_of(result, None))
    assert "<img" not in text and "&lt;/script&gt;&lt;img" in text and "base\\|line" in text
    verdict = re.search(r"ℹ️ \*\*B's median step takes (\d+\.\d)% less time than A's \((\d+\.\d\d)x faster\)\*\*", text)
    assert verdict, text
    assert float(verdict[2]) == pytest.approx(1 / (1 - float(verdict[1]) / 100), abs=0.006)
    fixed = next(line for line in text.splitlines() if line.startswith("**Findings fixed in B:**"))
    assert "`pageable-copy`" in fixed and "`no-copy-overlap`" in fixed
    rows = [line for line in text.splitlines() if line.startswith("| ") and "Metric" not in line]
    assert len(rows) >= 8 and all(line.count(" | ") == 3 for line in rows)
    assert md("a\nb `c`") == "a b \\`c\\`"


@pytest.mark.parametrize(
    "change, bound, text",
    [
        (-0.527, None, "B's median step takes 52.7% less time than A's (2.11x faster)"),
        (1.114, None, "B's median step takes 111.4% more time than A's (2.11x slower)"),
        (0.0, None, "B's median step takes as long as A's"),
        (float("nan"), None, "no median step time to compare"),
        (0.08, 0.05, "FAIL: B's median step takes 8.0% more time than A's (1.08x slower); the bound is 5.0% more"),
        (-0.2, 0.05, "OK: B's median step takes 20.0% less time than A's (1.25x faster); the bound is 5.0% more"),
    ],
)
def test_the_verdict_says_more_or_less_time_and_the_ratio(change: float, bound: float | None, text: str) -> None:
    assert Verdict(change, bound).text == text


def test_a_fraction_changes_by_points_everywhere(prepared_samples: dict[str, PreparedRun], tmp_path: Path) -> None:
    """GPU busy 87.3% -> 98.7% is +11.4 pts, not +13.1% (its change relative to A), in the Markdown summary,
    the CLI's verdict and the offline comparison report."""
    a, b = prepared_samples["naive"], prepared_samples["overlap"]
    result = compare_analyses(a.analysis, b.analysis)
    metrics = {m["metric"]: m for m in result.to_dict()["metrics"]}
    text = markdown_summary(result, "naive", "overlap", verdict_of(result, None))
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[3] for line in text.splitlines() if line.startswith("| ")}
    for key, label in (("gpu_busy_frac", "GPU busy"), ("copy_compute_overlap_frac", "Copy/compute overlap")):
        m = metrics[key]
        assert rows[label].startswith(f"{100 * m['delta']:+.1f} pts"), (label, rows[label])
    assert abs(metrics["gpu_busy_frac"]["rel_change"] - metrics["gpu_busy_frac"]["delta"]) > 0.001
    assert rows["Median step"].startswith(f"{100 * metrics['step_time_median_ns']['rel_change']:+.1f}%")

    report = tmp_path / "diff.html"
    assert main(["report", NAIVE, OVERLAP, "--out", str(report)]) == 0
    page = report.read_text()
    busy = re.search(r'title="gpu_busy_frac">GPU busy</td>.*?<td class="num[^"]*">([^<]*)</td></tr>', page, re.S)
    assert busy and busy[1] == f"{100 * metrics['gpu_busy_frac']['delta']:+.1f} pts"


def test_compare_text_ends_with_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", NAIVE, OVERLAP, "--fail-if-slower", "5%"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(
        r"OK: B's median step takes \d+\.\d% less time than A's \(\d\.\d\dx faster\); the bound is 5\.0% more", last
    )


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_stages_only_on_a_terminal() -> None:
    now = [0.0]
    tty = FakeTTY()
    p = Progress("report", tty, clock=lambda: now[0], tick_s=None)
    with p.stage("reading run.json.gz (1 GiB)"):
        now[0] = 12.5
    with p.stage("analysing 9,000 intervals"):
        now[0] = 14.0
    p.done("wrote r.html (3.1 MiB)")
    out = tty.getvalue()
    assert out.startswith(CLEAR + "streamscope report: reading run.json.gz (1 GiB)… 0.0 s")
    assert out.endswith(CLEAR + "streamscope report: wrote r.html (3.1 MiB) in 14.0 s\n")
    assert out.count("\n") == 1  # one final line; the stages rewrote one line in place
    assert p.stages == [("reading run.json.gz (1 GiB)", 12.5), ("analysing 9,000 intervals", 1.5)]
    pipe = io.StringIO()
    quiet = Progress("report", pipe, tick_s=0.01)
    with quiet.stage("reading"):
        pass
    quiet.done("done")
    assert pipe.getvalue() == ""


class CountingTTY(FakeTTY):
    """Sets ``drawn`` once three progress lines have been written."""

    def __init__(self) -> None:
        super().__init__()
        self.drawn = threading.Event()

    def write(self, s: str) -> int:
        n = super().write(s)
        if self.getvalue().count("reading") >= 3:
            self.drawn.set()
        return n


def test_progress_ticks_and_clears_before_an_error() -> None:
    tty = CountingTTY()
    p = Progress("analyze", tty, tick_s=0.001)
    with pytest.raises(ValueError), p.stage("reading"):
        assert tty.drawn.wait(10)  # the ticker redraws the line while the stage runs
        raise ValueError("bad file")
    assert tty.getvalue().endswith(CLEAR)


def _run_cli(args: list[str], stderr_tty: bool) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
    cmd = [sys.executable, "-m", "webapp.cli", *args]
    if not stderr_tty:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        return done.returncode, done.stderr
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=120), b"".join(chunks).decode("utf-8", "replace")


def test_cli_progress_on_a_terminal_and_silence_in_a_pipe(tmp_path: Path) -> None:
    out = str(tmp_path / "r.html")
    rc, err = _run_cli(["report", NAIVE, "--out", out], stderr_tty=True)
    assert rc == 0
    assert "streamscope report: reading naive.json.gz" in err
    assert f"analysing {len(load_trace(NAIVE).intervals):,} intervals" in err
    last = err.replace("\r\n", "\n").rsplit(CLEAR, 1)[-1]
    assert last.startswith(f"streamscope report: wrote {out}") and " s\n" in last
    rc, err = _run_cli(["analyze", NAIVE], stderr_tty=False)
    assert rc == 0 and err == ""
