"""The Training page: a model's training throughput (samples/s) eager and compiled by torch version, the bar chart
of the publication (one bar per release and mode), and its DDP scaling experiments (throughput and scaling factor
against the number of devices, with the ideal line). Data: :func:`service.queries.training.training_view`, the same
the JSON API serves; the URL is the permalink."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from service.api.deps import ConfigFilterDep, SessionDep
from service.queries.runs import distinct_values
from service.queries.training import NIGHTLY_DAYS, ScalingExperiment, ThroughputByVersion, training_view
from service.web.releases import filter_params, label

router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)

def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None


def bar_chart(key: str, item: ThroughputByVersion) -> dict[str, Any]:
    return {"id": key, "versions": [b.torch_version for b in item.bars],
            "releases": [b.release for b in item.bars],
            "eager": [_round(b.eager_throughput) for b in item.bars],
            "compiled": [_round(b.compiled_throughput) for b in item.bars]}


def scaling_chart(key: str, item: ScalingExperiment) -> dict[str, Any]:
    points = item.points
    return {"id": key, "world_sizes": [p.world_size for p in points],
            "eager": [_round(p.eager_throughput) for p in points],
            "compiled": [_round(p.compiled_throughput) for p in points],
            "eager_ideal": [_round(p.eager_ideal) for p in points],
            "compiled_ideal": [_round(p.compiled_ideal) for p in points],
            "eager_scaling": [_round(p.eager_scaling) for p in points],
            "compiled_scaling": [_round(p.compiled_scaling) for p in points]}


@router.get("/training")
def training(request: Request, session: SessionDep, filters: ConfigFilterDep,
             model: Annotated[str | None, Query(max_length=200)] = None, nightlies: bool = False,
             nightly_days: Annotated[int, Query(ge=0, le=100_000)] = NIGHTLY_DAYS,
             scaling_version: Annotated[str | None, Query(max_length=64)] = None) -> Response:
    view = training_view(session, model or None, filters, nightlies=nightlies, nightly_days=nightly_days,
                         scaling_version=scaling_version or None)
    params = {"model": view.model or "", **filter_params(filters)}
    if nightlies:
        params["nightlies"] = "true"
        if nightly_days != NIGHTLY_DAYS:
            params["nightly_days"] = str(nightly_days)
    if scaling_version:
        params["scaling_version"] = scaling_version
    charts = {"bars": [bar_chart(f"tp-{t.configuration.id}", t) for t in view.throughput],
              "scaling": [scaling_chart(f"sc-{s.configuration.id}", s) for s in view.scaling]}
    context: dict[str, Any] = {
        "active": "training", "title": "Training", "view": view, "choices": distinct_values(session),
        "selected": filters,
        "nightlies": nightlies, "nightly_days": nightly_days, "charts": charts, "label": label,
        "permalink": "/training?" + urlencode(params),
        "api_link": "/api/v1/training?" + urlencode(params),
        "every_nightly_link": "/training?" + urlencode({**params, "nightlies": "true", "nightly_days": "0"})}
    return request.app.state.web_templates.TemplateResponse(request, "pages/training.html", context)
