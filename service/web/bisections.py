"""A bisection's page: the request, its verdict, and every A/B the decision saw (perfdash.ab records: the samples of
both sides, the order they were measured in, each round's pairs, change and p-values, the cap), so a reader can check
the verdict. Data: the stored result (perfdash.bisection.BisectionResult), the same the JSON API serves."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from perfdash.ab import AbRecord
from service.api.deps import SessionDep
from service.models import BisectionRequest
from service.queries.findings import bisection_out

router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)

def records(result: Any) -> list[tuple[str, AbRecord]]:
    """Every A/B of a result, labelled, in the order they ran."""
    if result is None:
        return []
    out: list[tuple[str, AbRecord]] = []
    if result.confirmation is not None:
        out.append(("confirmation", result.confirmation))
    out += [(f"step {n}", s.ab) for n, s in enumerate(result.steps, start=1) if s.ab is not None]
    if result.verification is not None:
        out.append(("verification", result.verification))
    return out


@router.get("/bisections/{bisection_id}")
def bisection_page(request: Request, session: SessionDep, bisection_id: int) -> Response:
    row = session.get(BisectionRequest, bisection_id)
    if row is None:
        raise HTTPException(404, f"no bisection {bisection_id}")
    bisection = bisection_out(row)
    context: dict[str, Any] = {
        "active": "", "title": f"Bisection {bisection_id}", "b": bisection, "result": bisection.result,
        "records": records(bisection.result),
        "api_link": f"/api/v1/bisections/{bisection_id}",
    }
    return request.app.state.web_templates.TemplateResponse(request, "pages/bisection.html", context)
