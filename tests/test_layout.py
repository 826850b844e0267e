"""The collector's layout rules, read from the source (AST, function-level imports included).

* ``collector.model``, ``collector.syncrules`` and ``collector.errors`` are the vocabulary: they import no other
  collector module but each other.
* A sub-package (``traceformat``, ``importers``, ``recording``) imports only the vocabulary, ``traceformat`` and
  itself; ``recording`` may also import ``importers`` (CUPTI recording reads its capture with the Kineto
  importer), never the other way round.
* Nothing in ``collector`` imports ``webapp``, flask or plotly; torch only inside ``recording`` and the demos.
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
SUBPACKAGES = ("traceformat", "importers", "recording")


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
    assert {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()} >= set(SUBPACKAGES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_import_rules(path: Path) -> None:
    name = _module_name(path)
    deps = _collector_imports(path) - {name}
    if name in VOCABULARY:
        assert deps <= VOCABULARY, f"{name} is vocabulary but imports {sorted(deps - VOCABULARY)}"
    for sub in SUBPACKAGES:
        prefix = f"collector.{sub}"
        if name == prefix or name.startswith(prefix + "."):
            extra = ("collector.importers",) if sub == "recording" else ()
            allowed = VOCABULARY | {"collector.traceformat", *extra}
            ok_prefixes = ("collector.traceformat.", prefix, *(e + "." for e in extra))
            bad = {d for d in deps if d not in allowed and not d.startswith(ok_prefixes)}
            assert not bad, f"{name} may import only the vocabulary, traceformat and {prefix}: {sorted(bad)}"
    third_party = {n.split(".")[0] for n in _imports(path)}
    assert not third_party & {"webapp", "flask", "plotly"}, f"{name} imports the web side"
    in_recording = name.startswith("collector.recording") or name.startswith("collector.demos")
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
