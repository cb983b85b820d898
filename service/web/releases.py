"""The Releases page: "what changed since release X" across every configuration, between the last runs of two
torch versions (the same :func:`service.queries.releases.compare_versions` the JSON API serves). The URL is the
permalink: base, new, filters, limit."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from service.api.deps import ConfigFilterDep, SessionDep
from service.queries import torch_versions
from service.queries.filters import ConfigFilter
from service.queries.releases import DEFAULT_LIMIT, LATEST, compare_versions, versions
from service.queries.runs import distinct_values
from service.queries.schemas import ConfigurationOut

router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)

FILTER_FIELDS = ("suite", "backend", "compile_mode", "dtype", "mode", "device", "thread_config", "machine")
NIGHTLIES_LISTED = 20
Version = Annotated[str | None, Query(max_length=64)]


def filter_params(filters: ConfigFilter) -> dict[str, str]:
    """The filters set, as the permalink's query parameters."""
    return {field: value for field in FILTER_FIELDS if (value := getattr(filters, field))}


def default_pair(known: list[str], release: dict[str, bool]) -> tuple[str | None, str]:
    """The newest release against each configuration's latest run; without releases, the second-newest version."""
    releases = [v for v in known if release[v]]
    if releases:
        return releases[0], LATEST
    return (known[1] if len(known) > 1 else None), LATEST


@router.get("/releases")
def releases(request: Request, session: SessionDep, filters: ConfigFilterDep, base: Version = None, new: Version = None,
             limit: Annotated[int, Query(ge=1, le=100_000)] = DEFAULT_LIMIT) -> Response:
    known = versions(session, filters)
    release = {v: torch_versions.is_release(v) for v in known}
    default_base, default_new = default_pair(known, release)
    chosen_base = base if base in known else default_base
    chosen_new = new if new in known or new == LATEST else default_new
    comparison = (compare_versions(session, chosen_base, chosen_new, filters, limit=limit)
                  if chosen_base is not None else None)
    # every release, the newest nightlies and what the URL chose (any older nightly stays reachable by URL)
    nightlies = set([v for v in known if not release[v]][:NIGHTLIES_LISTED])
    listed = [v for v in known if release[v] or v in nightlies or v in (chosen_base, chosen_new)]
    params = {"base": chosen_base or "", "new": chosen_new, **filter_params(filters)}
    if limit != DEFAULT_LIMIT:
        params["limit"] = str(limit)
    context: dict[str, Any] = {
        "active": "releases", "title": "Releases", "versions": listed, "latest": LATEST, "base": chosen_base,
        "new": chosen_new, "choices": distinct_values(session), "selected": filters, "comparison": comparison,
        "limit": limit,
        "labels": {c.configuration.id: label(c.configuration) for c in (comparison.configurations
                                                                        if comparison else [])},
        "permalink": "/releases?" + urlencode(params), "api_link": "/api/v1/releases/compare?" + urlencode(params),
        "release": release}
    return request.app.state.web_templates.TemplateResponse(request, "pages/releases.html", context)


def label(configuration: ConfigurationOut, *, world_size: bool = True) -> str:
    """A configuration in one line (``world_size=False``: without its DDP world size, for an experiment)."""
    parts = [configuration.suite, configuration.backend_variant, configuration.device, configuration.dtype,
             configuration.mode, configuration.thread_config, configuration.machine.fingerprint]
    if not world_size and configuration.distributed_backend:
        parts.append(f"DDP over {configuration.distributed_backend}")
    elif configuration.world_size > 1 or configuration.distributed_backend:
        parts.append(f"{configuration.world_size} x {configuration.distributed_backend}")
    return " · ".join(p for p in parts if p)
