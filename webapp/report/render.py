"""Render a report context (webapp.report.build) into one self-contained HTML document.

Jinja with autoescaping and the same ``tojson`` as the server (``<``, ``>``, ``&`` and ``'`` written as
``\\u003c`` etc.), so names from traces stay text; the script is the bundle of webapp/static/report.js.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from webapp.formatting import FILTERS
from webapp.report.assets import bundle, plotly_packed, stylesheet

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(FILTERS)
    env.policies["json.dumps_kwargs"] = {"sort_keys": False}
    return env


def render(template: str, context: dict[str, Any]) -> str:
    """``report/<template>`` rendered with ``context`` plus the inlined stylesheet, script and Plotly."""
    from collector import __version__

    return (
        _env()
        .get_template(f"report/{template}")
        .render(
            **context,
            version=__version__,
            generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            css=stylesheet(),
            script=bundle("report.js"),
            plotly=plotly_packed(),
        )
    )
