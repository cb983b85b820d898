"""Bisection requests: making a request (a candidate's confirm request, a bisection) and recording its result (the
shapes are perfdash.bisection's; no FastAPI here). Reads of findings and bisections are in service.queries; what a
result sets off is service.alerts.workflow's."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.orm import Session

from perfdash.axes import AXIS
from perfdash.bisection import (
    REQUEST_AXES,
    BisectionFields,
    BisectionIn,
    BisectionPurpose,
    BisectionResult,
)
from perfdash.metric_registry import BISECT_METRICS, NOISE_METRICS, better_of, min_effect_of
from perfdash.verdicts import FindingKind
from service.models import BisectionRequest, Configuration, Finding, Run, Series
from service.queries.noise import finding_noise, series_figures

# ---------------------------------------------------------------------------------------------------------------------
# Bisection requests (the contract's models live in perfdash.bisection; the bisect tool imports the same ones)


class BisectionError(ValueError):
    """A request that cannot be made (422)."""


class UnknownConfiguration(BisectionError, LookupError):
    """The configuration a request names has no stored run (the API answers 404, as for a finding that is not
    there; callers that catch BisectionError still do)."""


def _direction(metric: str) -> str:
    return better_of(metric).value


# A confirm request's threshold, as a share of the metric's minimum effect. The change point already showed the change
# is not significantly smaller than the minimum effect; the A/B (perfdash/ab.py) asks whether the torch builds differ
# by significantly more than half the threshold: 1.5 % for a 5 % minimum effect, so a real 5 % step stands 3.5
# points above the line and an unchanged pair of builds 1.5 below it. The share was chosen with the earlier rule
# (median change >= threshold); bench/detection.py --alerts measures what it gives with the measured A/B noise
# (bench/README.md, issue 27).
CONFIRM_THRESHOLD_SHARE = 0.6


def _threshold(metric: str, purpose: str = "bisect") -> float:
    share = CONFIRM_THRESHOLD_SHARE if purpose == "confirm" else 1.0
    return round(100.0 * min_effect_of(metric) * share, 6)


def request_bisection(session: Session, body: BisectionIn,
                      purpose: BisectionPurpose = "bisect") -> tuple[BisectionRequest, bool]:
    """(request, created). One request per finding and purpose: asking again returns the existing one. Flushes.

    ``confirm``: the candidate's A/B re-measurement (service.alerts.confirmation), not a search."""
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
        if finding.kind == FindingKind.NOISE:
            raise BisectionError(f"finding {finding.id} is a change of spread, not of level: nothing to bisect")
        if not finding.good_commit or not finding.bad_commit:
            raise BisectionError(f"finding {finding.id} has no commit range (runs without a torch git commit)")
        row = BisectionRequest(
            status="pending", purpose=purpose, finding_id=finding.id, configuration_id=finding.configuration_id,
            model=finding.series.name, batch_size=finding.series.batch_size, metric=finding.metric,
            direction=body.direction.value if body.direction else _direction(finding.metric),
            good_commit=finding.good_commit, bad_commit=finding.bad_commit,
            threshold_pct=body.threshold_pct if body.threshold_pct is not None else _threshold(finding.metric,
                                                                                               purpose))
        noise = _finding_series_noise(session, finding)
    else:
        fields = BisectionFields.model_validate(body.model_dump(exclude={"finding_id"}))
        data = fields.model_dump(mode="json", exclude=set(REQUEST_AXES))  # the direction as its string
        data["direction"] = data["direction"] or _direction(fields.metric)
        if data["threshold_pct"] is None:
            data["threshold_pct"] = _threshold(fields.metric)
        row = BisectionRequest(status="pending", purpose=purpose, configuration_id=_configuration_of(session, fields),
                               **data)
        noise = _series_noise(session, row)
    if noise is not None:
        row.series_noise_cv, row.series_noise_runs = noise
    session.add(row)
    session.flush()
    session.refresh(row)
    return row, True


# The series' own between-run noise a request carries to the bisect tool (issue 39 item 2): the A/Bs pool it into
# their scale (perfdash.ab.NoisePrior) instead of starting from nothing. The figures are service.queries.noise's, the
# ones the pages show; frozen into the request when it is made, so a retried or resumed bisection sees the same.

def _finding_series_noise(session: Session, finding: Finding) -> tuple[float, int] | None:
    """(robust CV, runs) of the finding's metric over its series' runs before the change; None without an estimate."""
    found = finding_noise(session, [finding]).get(finding.id)
    if found is None or found.noise.robust_cv is None:
        return None
    return found.noise.robust_cv, found.noise.runs


def _series_noise(session: Session, row: BisectionRequest) -> tuple[float, int] | None:
    """(robust CV, runs) of the metric of the series a request without a finding names, as of now; None without an
    estimate, or when its model has several batch sizes and the request names none (whose noise would it be?)."""
    if row.metric not in {m.name for m in NOISE_METRICS}:
        return None
    query = sa.select(Series.id).where(Series.configuration_id == row.configuration_id, Series.name == row.model)
    if row.batch_size is not None:
        query = query.where(Series.batch_size == row.batch_size)
    ids = session.scalars(query.limit(2)).all()
    figures = series_figures(session, ids[0], row.configuration_id) if len(ids) == 1 else None
    estimate = figures.estimates.get(row.metric) if figures is not None else None
    return None if estimate is None else (estimate.robust_cv, estimate.runs)


def _configuration_of(session: Session, fields: BisectionFields) -> int:
    """The stored configuration a request without a finding names (its REQUEST_AXES); of several (one per machine),
    the one that ran last."""
    query = sa.select(Configuration.id).join(Run, Run.configuration_id == Configuration.id)
    for name in REQUEST_AXES:
        column, value = getattr(Configuration, AXIS[name].stored_column), getattr(fields, name)
        query = query.where(column.is_(None) if value is None else column == value)
    found = session.scalar(query.group_by(Configuration.id).order_by(sa.func.max(Run.id).desc()).limit(1))
    if found is None:
        described = ", ".join(f"{name}={getattr(fields, name)!r}" for name in REQUEST_AXES)
        raise UnknownConfiguration(f"no stored run has this configuration ({described}): a bisection measures a series "
                                   "the dashboard holds")
    return found


def record_result(session: Session, bisection_id: int, result: BisectionResult) -> BisectionRequest:
    """The request marked done with ``result``; its row stays locked until the caller commits, so the same result
    posted twice at once (an agent's retry reaching another replica) is recorded and acted on one after the other."""
    session.execute(sa.select(BisectionRequest.id).where(BisectionRequest.id == bisection_id).with_for_update())
    row = session.get(BisectionRequest, bisection_id, populate_existing=True)
    if row is None:
        raise LookupError(f"no bisection {bisection_id}")
    row.result = result.model_dump(mode="json")
    row.status = "done"
    row.updated_at = datetime.now(UTC)
    session.flush()
    return row
