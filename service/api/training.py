"""/api/v1/training: a model's training throughput by torch version and its DDP scaling experiments."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from service.api.deps import ConfigFilterDep, SessionDep, json_response
from service.queries.training import NIGHTLY_DAYS, TrainingView, training_view

router = APIRouter(prefix="/api/v1/training", tags=["training"])


@router.get("", response_model=TrainingView,
            summary="Samples/s eager and compiled per torch version (last run of each), and scaling over world sizes")
def training(session: SessionDep, filters: ConfigFilterDep,
             model: Annotated[str | None, Query(max_length=200, description="default: the first model")] = None,
             nightlies: Annotated[bool, Query(description="nightlies too, not only releases")] = False,
             nightly_days: Annotated[int, Query(ge=0, le=100_000, description=(
                 "with nightlies: those whose last run is in this many days up to the newest run; 0: every one"))]
             = NIGHTLY_DAYS,
             scaling_version: Annotated[str | None, Query(max_length=64)] = None) -> Response:
    return json_response(training_view(session, model or None, filters, nightlies=nightlies, nightly_days=nightly_days,
                                       scaling_version=scaling_version or None))
