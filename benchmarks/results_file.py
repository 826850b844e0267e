"""benchmarks/RESULTS.md, written by the benchmarks: each one's ``## name`` section holds its latest result.

A section runs from its heading line (exactly ``## name``) to the next line that starts with ``## `` or the end
of the file; a mention of a section in the text (`` `## what_if` ``) or a heading that only starts with the
same name (``## what_if_loops``) is not the section.
"""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
EMPTY = "# Benchmark results\n"


def replaced_section(text: str, name: str, body: str) -> str:
    """``text`` with its ``## name`` section replaced by the heading and ``body``, or with them appended where
    no such section exists; one blank line before the next section."""
    section = f"## {name}\n{body.rstrip(chr(10))}\n"
    lines = text.splitlines(keepends=True)
    heading = f"## {name}"
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    if start is None:
        return text.rstrip("\n") + "\n\n" + section
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    rest = "".join(lines[end:])
    return "".join(lines[:start]) + section + ("\n" + rest if rest else "")


def write_section(name: str, body: str, path: Path = RESULTS) -> None:
    """Replace (or add) the ``## name`` section of ``path`` with ``body`` (the lines under the heading)."""
    text = path.read_text() if path.exists() else EMPTY
    path.write_text(replaced_section(text, name, body))
