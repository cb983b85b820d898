"""The Jinja2 environment of the pages: autoescaping on for everything, the formatting filters, the nav list, the metric
registry, the display status and the change vocabulary (perfdash.verdicts)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlencode

import jinja2
from starlette.templating import Jinja2Templates

from perfdash import verdicts
from perfdash.contract import display_status
from perfdash.metric_registry import DASHBOARD_METRICS, SUMMARY_METRICS
from service.web import format as fmt
from service.web.nav import NAV
from service.web.views import model_table

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"
STATIC_DIR = Path(__file__).resolve().parents[1] / "static"


def api_url(path: str, params: Mapping[str, object] | Iterable[tuple[str, object]] = (),
            drop: Iterable[str] = ()) -> str:
    """``path`` with the non-empty ``params`` (a page's own query: its filters are the API's) but those in ``drop``
    as its query: the JSON a page's table links (partials/data_links.html)."""
    items = params.multi_items() if hasattr(params, "multi_items") else (
        params.items() if isinstance(params, Mapping) else params)
    dropped = set(drop)
    kept = [(k, str(v)) for k, v in items if k not in dropped and v is not None and str(v) != ""]
    return f"{path}?{urlencode(kept)}" if kept else path


def build_templates(directory: Path = TEMPLATES_DIR) -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory),
        # Every stored string (model names, hosts, commands, annotations) is untrusted: escape all of it, always.
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(times=fmt.times, number=fmt.number, percent=fmt.percent, short_commit=fmt.short_commit,
                       web_url=fmt.web_url, sigmas=fmt.sigmas_text)
    # The metric registry, the status rule and the change vocabulary, so that templates name no metric, threshold,
    # status or verdict by hand.
    env.globals.update(nav=NAV, dashboard_metrics=DASHBOARD_METRICS, summary_metrics=SUMMARY_METRICS,
                       display_status=display_status, model_table=model_table, verdicts=verdicts, api_url=api_url)
    return Jinja2Templates(env=env)
