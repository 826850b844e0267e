"""What a report inlines: the page's ES modules bundled into one script, the stylesheet, and Plotly.

The pages load ``webapp/static/*.js`` as ES modules by URL, which a file opened from disk cannot do, so
:func:`bundle` joins a module and everything it imports (relative ``import { a, b } from "./x.js"`` only)
into one script: each module runs once, in dependency order, inside its own function scope, and hands its
exported names (``export function|class|const|let NAME`` and ``export { a, b as c }``) to the modules that
import them. Plotly's bundle (4.6 MiB) is inlined gzip-compressed
and base64-encoded (~1.9 MiB); the report's script unpacks it with the browser's DecompressionStream.
"""

from __future__ import annotations

import base64
import gzip
import re
from functools import lru_cache
from pathlib import Path

STATIC = Path(__file__).resolve().parent.parent / "static"

_IMPORT = re.compile(r'^import\s*\{([^}]*)\}\s*from\s*"\./([\w.-]+\.js)"\s*;?\s*$', re.M)
_EXPORT = re.compile(r"^export\s+((?:async\s+)?function\*?|class|const|let)\s+([A-Za-z_$][\w$]*)", re.M)
_EXPORT_LIST = re.compile(r"^export\s*\{([^}]*)\}\s*;?\s*$", re.M)
_LEFT = re.compile(r"^\s*(import|export)\b.*$", re.M)


class BundleError(ValueError):
    """A module uses an import or export form the bundler does not handle."""


def _module(name: str, static: Path) -> tuple[str, list[str], list[str]]:
    """(wrapped source, dependencies, exported names) of one module."""
    text = (static / name).read_text(encoding="utf-8")
    deps: list[str] = []

    def imp(m: re.Match[str]) -> str:
        names = [n.strip() for n in m.group(1).split(",") if n.strip()]
        deps.append(m.group(2))
        binds = ", ".join(n.replace(" as ", ": ") for n in names)
        return f"const {{ {binds} }} = __ss[{m.group(2)!r}];"

    text = _IMPORT.sub(imp, text)
    exports = [f"{m.group(2)}: {m.group(2)}" for m in _EXPORT.finditer(text)]
    text = _EXPORT.sub(lambda m: f"{m.group(1)} {m.group(2)}", text)

    def listed(m: re.Match[str]) -> str:  # export { a, b as c };
        for item in (n.strip() for n in m.group(1).split(",") if n.strip()):
            local, _, public = item.partition(" as ")
            exports.append(f"{(public or local).strip()}: {local.strip()}")
        return ""

    text = _EXPORT_LIST.sub(listed, text)
    left = _LEFT.search(text)
    if left:
        raise BundleError(f"{name}: cannot bundle this line: {left.group(0).strip()[:80]}")
    body = f"__ss[{name!r}] = (() => {{\n{text}\nreturn {{ {', '.join(exports)} }};\n}})();\n"
    return body, deps, exports


def bundle(entry: str, static: Path = STATIC) -> str:
    """``entry`` and the modules it imports as one script (for an inline ``<script type="module">``);
    ``</`` is written ``<\\/`` so no text in it can close the script element."""
    done: dict[str, str] = {}
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in done:
            return
        if name in visiting:
            raise BundleError(f"{name}: circular import")
        visiting.add(name)
        body, deps, _ = _module(name, static)
        for dep in deps:
            visit(dep)
        done[name] = body
        visiting.discard(name)

    visit(entry)
    out = "const __ss = {};\n" + "".join(done.values())
    return out.replace("</", "<\\/").replace("<!--", "<\\!--")


def stylesheet(static: Path = STATIC) -> str:
    """The app's stylesheet, safe inside a ``<style>`` element."""
    return (static / "style.css").read_text(encoding="utf-8").replace("</", "<\\/")


@lru_cache(maxsize=1)
def plotly_packed() -> str:
    """plotly.min.js from the installed plotly package, gzip-compressed and base64-encoded."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if path.is_file():
        raw = path.read_bytes()
    else:  # pragma: no cover - older plotly layouts
        from plotly.offline import get_plotlyjs

        raw = get_plotlyjs().encode()
    return base64.b64encode(gzip.compress(raw, 9, mtime=0)).decode("ascii")
