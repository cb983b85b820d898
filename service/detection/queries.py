"""Bisection requests: their API shapes, and making a request and recording its result (no FastAPI here). Reads of
findings and bisections are in service.queries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy.orm import Session

from service.detection.changepoint import HIGHER_IS_BETTER, MIN_EFFECT
from service.detection.models import BisectionRequest, Finding

BISECT_METRICS = ("speedup", "abs_latency", "compilation_latency", "compression_ratio", "accuracy")


# ---------------------------------------------------------------------------------------------------------------------
# Bisection requests (the agreed contract: see the bisect engineer's client)


class Culprit(BaseModel):
    sha: str
    subject: str = ""
    author: str = ""
    date: str = ""


class BisectStep(BaseModel):
    sha: str
    samples: list[float] = Field(default_factory=list)
    decision: str


class BisectionResult(BaseModel):
    # "confirmed": the answer of a confirm request (good and bad measured side by side, the regression reproduced)
    verdict: Literal["culprit_found", "confirmed", "not_reproduced", "inconclusive", "error"]
    culprit: Culprit | None = None
    steps: list[BisectStep] = Field(default_factory=list)
    good_samples: list[float] = Field(default_factory=list)
    bad_samples: list[float] = Field(default_factory=list)
    summary: str = ""
    jenkins_build_url: str | None = None
    change_pct: float | None = None  # the A/B change of good to bad (% worse), when the tool reports it
    p_value: float | None = None


def _thread_count(value: object) -> object:
    """Threads as a count, or a name as the bisect pipeline sends it: ``single`` is 1; ``all``/``socket``/
    ``all-cores``/empty mean all cores (None)."""
    if isinstance(value, str):
        name = value.strip().lower()
        if name in ("", "all", "socket", "all-cores"):
            return None
        if name in ("single", "single-thread"):
            return 1
        return int(name) if name.isdigit() else value
    return value


class BisectionFields(BaseModel):
    """A request made without a finding: every field of the configuration explicitly."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    model: str
    backend: str
    variant: str = ""
    compile_mode: str = "default"
    dtype: str = "float32"
    mode: str = "inference"
    device: str = "cpu"
    threads: int | None = None
    batch_size: int | None = None
    metric: Literal["speedup", "abs_latency", "compilation_latency", "compression_ratio", "accuracy"]
    direction: Literal["higher", "lower"] | None = None
    good_commit: str = Field(min_length=4, max_length=64)
    bad_commit: str = Field(min_length=4, max_length=64)
    threshold_pct: float | None = Field(None, ge=0)

    _threads = field_validator("threads", mode="before")(_thread_count)


class BisectionIn(BaseModel):
    """``{"finding_id": int}`` or the explicit fields."""

    model_config = ConfigDict(extra="forbid")

    finding_id: int | None = None
    suite: str | None = None
    model: str | None = None
    backend: str | None = None
    variant: str = ""
    compile_mode: str = "default"
    dtype: str = "float32"
    mode: str = "inference"
    device: str = "cpu"
    threads: int | None = None
    batch_size: int | None = None
    metric: str | None = None
    direction: Literal["higher", "lower"] | None = None
    good_commit: str | None = None
    bad_commit: str | None = None
    threshold_pct: float | None = Field(None, ge=0)

    _threads = field_validator("threads", mode="before")(_thread_count)


class BisectionOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    status: Literal["pending", "running", "done"]
    purpose: Literal["bisect", "confirm"]
    finding_id: int | None
    suite: str
    model: str
    backend: str
    variant: str
    compile_mode: str
    dtype: str
    mode: str
    device: str
    threads: int | None
    batch_size: int | None
    metric: str
    direction: Literal["higher", "lower"]
    good_commit: str
    bad_commit: str
    threshold_pct: float
    created_at: datetime
    result: BisectionResult | None


class BisectionError(ValueError):
    """A request that cannot be made (422)."""


def _direction(metric: str) -> str:
    return "higher" if HIGHER_IS_BETTER.get(metric, True) else "lower"


# A confirm request's threshold, as a share of the metric's minimum effect. The change point already showed the change
# is not significantly smaller than the minimum effect; the A/B asks whether the torch builds differ by about that
# much. At the full minimum effect a real step of exactly that size would fail half its A/Bs (its measured median
# change falls below 5 % as often as above); at 0.6 noise still cannot pass (within-run CV 0.76 %: a 3 % change
# is a 7-sigma event for ten runs a side) and bench/detection.py --alerts issues 5 % steps.
CONFIRM_THRESHOLD_SHARE = 0.6


def _threshold(metric: str, purpose: str = "bisect") -> float:
    share = CONFIRM_THRESHOLD_SHARE if purpose == "confirm" else 1.0
    return round(100.0 * MIN_EFFECT.get(metric, 0.0) * share, 6)


def request_bisection(session: Session, body: BisectionIn,
                      purpose: Literal["bisect", "confirm"] = "bisect") -> tuple[BisectionRequest, bool]:
    """(request, created). One request per finding and purpose: asking again returns the existing one. Flushes.

    ``confirm``: the candidate's A/B re-measurement (service.detection.confirmation), not a search."""
    if body.finding_id is not None:
        existing = session.scalars(sa.select(BisectionRequest).where(
            BisectionRequest.finding_id == body.finding_id, BisectionRequest.purpose == purpose)).first()
        if existing is not None:
            return existing, False
        finding = session.get(Finding, body.finding_id)
        if finding is None:
            raise LookupError(f"no finding {body.finding_id}")
        if finding.series_id is None or finding.series is None or finding.metric not in BISECT_METRICS:
            raise BisectionError(f"finding {finding.id} is not about one model's metric: nothing to bisect")
        if not finding.good_commit or not finding.bad_commit:
            raise BisectionError(f"finding {finding.id} has no commit range (runs without a torch git commit)")
        c = finding.configuration
        row = BisectionRequest(
            status="pending", purpose=purpose, finding_id=finding.id, suite=c.suite, model=finding.series.name,
            backend=c.backend,
            variant=c.variant, compile_mode=c.compile_mode, dtype=c.dtype, mode=c.mode, device=c.device,
            threads=c.threads, batch_size=finding.series.batch_size, metric=finding.metric,
            direction=body.direction or _direction(finding.metric), good_commit=finding.good_commit,
            bad_commit=finding.bad_commit,
            threshold_pct=body.threshold_pct if body.threshold_pct is not None else _threshold(finding.metric,
                                                                                               purpose))
    else:
        fields = BisectionFields.model_validate(body.model_dump(exclude={"finding_id"}))
        data = fields.model_dump()
        data["direction"] = data["direction"] or _direction(fields.metric)
        if data["threshold_pct"] is None:
            data["threshold_pct"] = _threshold(fields.metric)
        row = BisectionRequest(status="pending", purpose=purpose, **data)
    session.add(row)
    session.flush()
    session.refresh(row)
    return row, True


def record_result(session: Session, bisection_id: int, result: BisectionResult) -> BisectionRequest:
    row = session.get(BisectionRequest, bisection_id)
    if row is None:
        raise LookupError(f"no bisection {bisection_id}")
    row.result = result.model_dump(mode="json")
    row.status = "done"
    row.updated_at = datetime.now(UTC)
    session.flush()
    return row
