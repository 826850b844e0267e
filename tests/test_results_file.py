"""benchmarks/results_file.py: a benchmark's section of RESULTS.md replaced whole, nothing else touched."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from results_file import replaced_section, write_section  # noqa: E402

TEXT = """# Benchmark results

## whatif_truth
The sample traces were checked (`## what_if`) and ## what_if in prose.

## what_if_loops
kept

## what_if
old line 1
old line 2

## overhead
kept too
"""


def test_only_the_named_heading_line_is_replaced() -> None:
    out = replaced_section(TEXT, "what_if", "new line")
    assert out == TEXT.replace("## what_if\nold line 1\nold line 2\n", "## what_if\nnew line\n")
    assert "(`## what_if`) and ## what_if in prose" in out
    assert "## what_if_loops\nkept\n" in out


def test_the_last_section_is_replaced_to_the_end_of_the_file() -> None:
    out = replaced_section(TEXT, "overhead", "\nfresh\n\n")
    assert out.endswith("## what_if\nold line 1\nold line 2\n\n## overhead\n\nfresh\n")


def test_a_missing_section_is_appended_after_one_blank_line(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    path.write_text(TEXT + "\n\n")
    write_section("stop_phases", "| a |", path)
    assert path.read_text() == TEXT + "\n## stop_phases\n| a |\n"
    write_section("stop_phases", "| b |", path)
    assert path.read_text() == TEXT + "\n## stop_phases\n| b |\n"


def test_a_new_file_starts_with_the_title(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    write_section("web_scale", "\nx", path)
    assert path.read_text() == "# Benchmark results\n\n## web_scale\n\nx\n"
