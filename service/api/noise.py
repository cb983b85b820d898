"""/api/v1/noise: each series' between-run noise and minimum detectable effect in the latest run of every matching
configuration; ``cannot_catch=true`` lists only the series too noisy to catch a 5 % change (the summary's flag)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from service.api.deps import ConfigFilterDep, SessionDep, json_response
from service.queries.noise import SeriesNoiseOut, latest_noise

router = APIRouter(prefix="/api/v1/noise", tags=["history"])


@router.get("", response_model=list[SeriesNoiseOut],
            summary="Series noise and detectable change in each configuration's latest run")
def noise_list(request: Request, session: SessionDep, filters: ConfigFilterDep,
               cannot_catch: Annotated[bool, Query(description="only the series too noisy to catch their target "
                                                               "(5 %, compile time 10 %), with those metrics")] = False,
               ) -> Response:
    return json_response(latest_noise(session, filters, cannot_catch=cannot_catch,
                                      cache=request.app.state.noise_cache))
