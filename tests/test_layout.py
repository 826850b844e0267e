"""The collector's layout rules, read from the source (AST, function-level imports included).

* ``collector.model``, ``collector.syncrules`` and ``collector.errors`` are the vocabulary: they import no other
  collector module but each other.
* The tree shows the pipeline, record -> traceformat -> importers -> ranks: each sub-package imports only the
  vocabulary, itself and what :data:`LAYERS` lists for it (``recording`` may import ``importers``, as CUPTI
  recording reads its capture with the Kineto importer, never the other way round; ``ranks`` loads rank files
  through ``collector.load``; ``synthetic``, the test and benchmark data, is built on the recorder's and the
  file format's own types). ``cli`` is the top: it may import any of them, and only ``collector.__main__``
  imports it. Beside the sub-packages, only the vocabulary, ``load`` and ``steps`` are loose modules.
* Nothing in ``collector`` imports ``webapp``, flask or plotly; torch only inside ``recording`` and ``demos``.
* The subcommands (``webapp.commands``) never import ``webapp.cli``, which loads them: their error type lives in
  the leaf ``webapp.commands.errors``.
* Formats: ``collector.importers.registry`` is the one list of the formats we read; ``collector.load`` reaches
  the importers only through it, and no code tells a trace by its name's suffix (``endswith(".json")`` and
  the like) except where it names an output file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "collector"
VOCABULARY = {"collector.model", "collector.syncrules", "collector.errors"}
LAYERS: dict[str, set[str]] = {
    "traceformat": set(),
    "importers": {"traceformat"},
    "recording": {"traceformat", "importers"},
    "ranks": {"traceformat", "importers", "load"},
    "demos": set(),
    "synthetic": {"traceformat", "recording"},
}
"""What each sub-package may import besides the vocabulary and itself (``cli``, the top, is not listed: it may
import any of them)."""
SUBPACKAGES = (*LAYERS, "cli")
LOOSE = {"__init__", "__main__", "model", "syncrules", "errors", "load", "steps"}
"""The top-level modules: the vocabulary, the package's entry points, and loading any trace (with its steps)."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


FILES = sorted(ROOT.rglob("*.py"))


def _collector_imports(path: Path) -> set[str]:
    """Collector modules (not names inside them) that ``path`` imports."""
    modules = {_module_name(p) for p in FILES}
    return {name for name in _imports(path) if name in modules} - {"collector"}


def test_the_layout_is_what_the_rules_are_written_for() -> None:
    found = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert found == set(SUBPACKAGES), "a new sub-package needs its rule in LAYERS"
    assert {p.stem for p in ROOT.glob("*.py")} == LOOSE, "a new module belongs in a sub-package (or in LOOSE)"


def _inside(name: str, part: str) -> bool:
    return name == f"collector.{part}" or name.startswith(f"collector.{part}.")


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_import_rules(path: Path) -> None:
    name = _module_name(path)
    deps = _collector_imports(path) - {name}
    if name in VOCABULARY:
        assert deps <= VOCABULARY, f"{name} is vocabulary but imports {sorted(deps - VOCABULARY)}"
    for sub, may in LAYERS.items():
        if _inside(name, sub):
            bad = {d for d in deps - VOCABULARY if not any(_inside(d, part) for part in {sub, *may})}
            assert not bad, f"{name} may import only the vocabulary, {sub} and {sorted(may)}: {sorted(bad)}"
    if name != "collector.__main__" and not _inside(name, "cli"):
        assert not {d for d in deps if _inside(d, "cli")}, f"{name} imports the command line"
    third_party = {n.split(".")[0] for n in _imports(path)}
    assert not third_party & {"webapp", "flask", "plotly"}, f"{name} imports the web side"
    in_recording = _inside(name, "recording") or _inside(name, "demos")
    assert in_recording or "torch" not in third_party, f"{name} imports torch outside recording"


@pytest.mark.parametrize("path", sorted((ROOT.parent / "webapp" / "commands").glob("*.py")), ids=lambda p: p.name)
def test_subcommands_do_not_import_the_cli_back(path: Path) -> None:
    assert "webapp.cli" not in _imports(path), f"{path.name} imports webapp.cli"


def test_load_reaches_the_importers_through_the_registry() -> None:
    deps = _collector_imports(ROOT / "load.py")
    assert "collector.importers.registry" in deps
    assert not {d for d in deps if d.startswith("collector.importers.") and d != "collector.importers.registry"}


TRACE_SUFFIX = re.compile(r"\.(json|gz|zip)$", re.IGNORECASE)
OUTPUT_NAMES = {"collector/cli/runner.py", "collector/traceformat/write.py"}
"""Where a suffix names an output file the user asked for (``--out``; gzip written for ``.gz``)."""


def test_no_trace_is_told_by_its_name() -> None:
    found = []
    for path in sorted([*ROOT.rglob("*.py"), *(ROOT.parent / "webapp").rglob("*.py")]):
        where = str(path.relative_to(ROOT.parent))
        for node in ast.walk(ast.parse(path.read_text(), where)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "endswith":
                texts = [c.value for a in node.args for c in ast.walk(a) if isinstance(c, ast.Constant)]
                if any(isinstance(t, str) and TRACE_SUFFIX.search(t) for t in texts) and where not in OUTPUT_NAMES:
                    found.append(f"{where}:{node.lineno}")
    assert found == [], f"recognise files by their bytes (collector.importers.registry), not their names: {found}"


JS_NAME_TEST = re.compile(r"/[^/\n]*\\\.(json|gz|zip)[^/\n]*/[a-z]*\.test\(", re.IGNORECASE)


def test_no_page_tells_a_trace_by_its_name() -> None:
    """The browser sends what the user picked; the server recognises it by its bytes."""
    static = ROOT.parent / "webapp" / "static"
    found = [
        f"{p.name}:{m.group(0)}" for p in sorted(static.glob("*.js")) for m in JS_NAME_TEST.finditer(p.read_text())
    ]
    assert found == [], found
