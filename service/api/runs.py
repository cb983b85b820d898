"""/api/v1/runs: list and filter runs, one run with its results, and ingest (POST, bearer token)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, cast

import sqlalchemy as sa
from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from pydantic import BaseModel, Field, ValidationError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from perfdash.contract import MAX_NAME_LENGTH
from perfdash.manifest import parse_date_time
from service.api.auth import AUTH_RESPONSES, AdminScope, IngestScope, audit_detail
from service.api.contract import NO_NUL
from service.api.deps import RunFilterDep, SessionDep, json_response
from service.ingest.bundle import RunBundle
from service.ingest.files import IngestDefaults, bundles_from_files, check_file_names
from service.ingest.payload import RunPayload, bundle_from_payload
from service.ingest.upload import ingest
from service.models import ChangePointRow, Finding, Result, Run
from service.queries.filters import MAX_OFFSET
from service.queries.pytorch_csv import CsvKind, run_csv
from service.queries.runs import get_run, list_runs
from service.queries.schemas import RunDetail, RunOut
from service.release_verdicts import refresh_configurations

router = APIRouter(prefix="/api/v1/runs", tags=["runs"])

MAX_FILES = 64


class IngestedRunOut(BaseModel):
    run_id: int
    run_key: str
    created: bool
    suite: str
    backend: str
    models: int


class IngestResponse(BaseModel):
    runs: list[IngestedRunOut]
    hook_errors: list[str]
    notices: list[str] = Field(default_factory=list,
                               description="skipped companion files and repeated model rows (the last row is kept)")


@router.get("", response_model=list[RunOut], summary="List runs, newest first",
            responses={404: {"description": "no run with the id given as after"}})
def runs_list(
    session: SessionDep,
    filters: RunFilterDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    after: Annotated[int | None, Query(ge=1, le=2**31 - 1,
                                       description="a run id: the runs after it, newest first (the next page: the "
                                                   "last id of this one; as fast at any depth, unlike offset)")] = None,
) -> Response:
    after_run = None
    if after is not None and (after_run := session.get(Run, after)) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no run {after}")
    return json_response(list_runs(session, filters, limit=limit, offset=offset, after=after_run))


@router.get("/{run_id}", response_model=RunDetail, summary="One run with its per-model results")
def runs_get(session: SessionDep, run_id: int, samples: bool = False) -> Response:
    run = get_run(session, run_id, with_samples=samples)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no run {run_id}")
    return json_response(run)


@router.get("/{run_id}/csv/{kind}", response_class=Response,
            summary="One run as PyTorch's result file (its harness' columns and file name)",
            responses={200: {"content": {"text/csv": {"schema": {"type": "string"}}},
                             "description": "the file, named in Content-Disposition"}})
def runs_csv(session: SessionDep, run_id: int, kind: CsvKind) -> Response:
    found = run_csv(session, run_id, kind)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no run {run_id}")
    name, text = found
    return Response(text, media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'inline; filename="{name}"'})


@router.delete("/{run_id}", status_code=status.HTTP_204_NO_CONTENT, dependencies=[AdminScope],
               summary="Delete a run (e.g. a bad night): its results, summary and findings go with it (scope admin)",
               responses={**AUTH_RESPONSES, 404: {"description": "no such run"}})
def runs_delete(request: Request, session: SessionDep, run_id: int) -> Response:
    # The database cascades to results, summary, change points and findings (foreign keys ON DELETE CASCADE).
    run = session.get(Run, run_id)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no run {run_id}")
    configuration_id = run.configuration_id
    audit_detail(request, _what_is_deleted(session, run))
    deleted = cast(sa.CursorResult, session.execute(sa.delete(Run).where(Run.id == run_id))).rowcount
    if not deleted:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no run {run_id}")
    # its kept Releases pairs went with it; the configuration's new latest run (or release's last) gets its own
    refresh_configurations(session, {configuration_id})
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _what_is_deleted(session: Session, run: Run) -> str:
    """The deletion's audit detail: enough to know what was lost (the run's identity and what went with it)."""
    c = run.configuration
    counts = {name: session.scalar(sa.select(sa.func.count()).select_from(table).where(table.run_id == run.id))
              for name, table in (("results", Result), ("findings", Finding), ("change points", ChangePointRow))}
    return (f"deleted run {run.id}: configuration {c.id} ({c.suite} {c.backend_variant} {c.compile_mode} {c.dtype} "
            f"{c.mode} {c.device} {c.thread_config}, machine {c.machine.fingerprint}), night {run.night}, started "
            f"{run.started_at.isoformat() if run.started_at else '-'}, torch {run.torch_version or '-'} commit "
            f"{run.torch_git_commit or '-'}, key {run.run_key[:16]}; "
            + ", ".join(f"{n} {name}" for name, n in counts.items()))


_INGEST_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            # RunPayload and the models it uses are added to components by service.app (FastAPI does not see them:
            # the body is parsed by hand to accept two content types).
            "application/json": {"schema": {"$ref": "#/components/schemas/RunPayload"}},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["files"],
                    # a part of another name is refused (422 naming it): a misspelt "timestamp" would otherwise
                    # date the run on arrival without a word
                    "additionalProperties": False,
                    "properties": {
                        "files": {"type": "array", "minItems": 1, "maxItems": MAX_FILES,
                                  "items": {"type": "string", "format": "binary"},
                                  "description": "PyTorch-named CSVs, optional *_manifest.json and *_samples.jsonl, "
                                                 "each file name once. What a schema cannot say: a file's name and "
                                                 "content must follow the result contract (perfdash.contract); "
                                                 "other files are skipped with a notice, and an upload left "
                                                 "without a result file, or with a malformed one, is refused "
                                                 "(422, naming the file, line and column)"},
                        "machine": {"type": "string", "maxLength": MAX_NAME_LENGTH, "pattern": NO_NUL,
                                    "description": "without a manifest: the machine's name"},
                        "commit": {"type": "string", "maxLength": 64, "pattern": NO_NUL,
                                   "description": "without a manifest: torch git commit"},
                        "timestamp": {"type": "string", "format": "date-time",
                                      "description": "without a manifest: when the run started (default: none; "
                                                     "the run is then keyed by its content and dated made_at); a "
                                                     "time without an offset, as older clients sent it, is UTC"},
                        "made_at": {"type": "string", "format": "date-time",
                                    "description": "when the upload was made (perfdash ingest sends it and keeps it "
                                                   "in the spool): dates a run without a start, never keys it "
                                                   "(default: on arrival)"},
                        "torch_version": {"type": "string", "maxLength": 64, "pattern": NO_NUL},
                        "host": {"type": "string", "maxLength": MAX_NAME_LENGTH, "pattern": NO_NUL},
                    },
                }
            },
        },
    }
}


def openapi_components() -> dict[str, dict]:
    """The JSON schemas the hand-written request body above refers to."""
    schema = RunPayload.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    return {**defs, "RunPayload": schema}


# The multipart body's parts (the schema above lists the same names and refuses others).
FORM_PARTS = frozenset({"files", "machine", "commit", "timestamp", "made_at", "torch_version", "host"})


async def _bundles_from_multipart(request: Request) -> list[RunBundle]:
    form = await request.form(max_files=MAX_FILES, max_fields=16)
    unknown = sorted(set(form.keys()) - FORM_PARTS)
    if unknown:
        known = ", ".join(sorted(FORM_PARTS))
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                            f"unknown part {unknown[0][:64]!r} in the upload; the parts are {known}")
    uploads: list[tuple[str, UploadFile]] = []
    for part in form.getlist("files"):
        if not isinstance(part, UploadFile) or not part.filename:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "'files' must be file parts with file names")
        uploads.append((part.filename, part))
    # of two files of one name the last would silently win: which one did the sender mean? (nothing is stored)
    check_file_names(name for name, _part in uploads)
    files = {name: await part.read() for name, part in uploads}

    def moment(name: str) -> datetime | None:
        value = form.get(name)
        try:
            return parse_date_time(value, naive_is_utc=True) if isinstance(value, str) and value else None
        except ValueError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"{name}: {exc}") from None

    def text(name: str) -> str | None:
        value = form.get(name)
        return value if isinstance(value, str) and value else None

    defaults = IngestDefaults(machine=text("machine"), commit=text("commit"), timestamp=moment("timestamp"),
                              torch_version=text("torch_version"), host=text("host"), made_at=moment("made_at"))
    return bundles_from_files(files, defaults)


@router.post("", response_model=IngestResponse, openapi_extra=_INGEST_BODY, dependencies=[IngestScope],
             summary="Ingest runs: the runner's manifest + results as JSON, or the CSV files (multipart; scope ingest)",
             responses={201: {"description": "stored"}, 200: {"description": "already stored, nothing changed"},
                        **AUTH_RESPONSES,
                        409: {"description": "same configuration, commit and start, other content"},
                        415: {"description": "neither application/json nor multipart/form-data"},
                        413: {"description": "upload too large"},
                        422: {"description": "malformed input; names the file, line and column"}})
async def runs_create(request: Request, response: Response, session: SessionDep) -> IngestResponse:
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        bundles = await _bundles_from_multipart(request)
    elif content_type.startswith("application/json"):
        try:
            payload = RunPayload.model_validate_json(await request.body())
        except ValidationError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT,
                                [{k: e[k] for k in ("loc", "msg", "type")} for e in exc.errors()]) from None
        bundles = [bundle_from_payload(payload)]
    else:
        raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, "send application/json or multipart/form-data")
    hooks = request.app.state.post_ingest_hooks
    report = await run_in_threadpool(ingest, session, bundles, hooks)
    request.app.state.metrics.observe_ingest(report)
    audit_detail(request, "; ".join(f"run {r.run_id} {'stored' if r.created else 'already stored'} "
                                    f"({r.suite} {r.backend}, {r.models} models)" for r in report.runs))
    await run_in_threadpool(session.commit)
    response.status_code = status.HTTP_201_CREATED if any(r.created for r in report.runs) else status.HTTP_200_OK
    return IngestResponse(runs=[IngestedRunOut(run_id=r.run_id, run_key=r.run_key, created=r.created, suite=r.suite,
                                               backend=r.backend, models=r.models) for r in report.runs],
                          hook_errors=list(report.hook_errors), notices=list(report.notices))

