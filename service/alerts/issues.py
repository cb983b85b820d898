"""GitHub issues of findings: which findings deserve one, filing them (one per change point), and the culprit
comment on a regression's issue. What they say is service.alerts.texts'; service.github posts what it is handed."""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.orm import Session

from perfdash.metric_registry import leader_of
from perfdash.verdicts import REGRESSION, ConfirmationState
from service.alerts.texts import culprit_body, issue_body, issue_title
from service.github.client import GitHubClient
from service.github.models import GithubPost
from service.github.publisher import publish
from service.models import BisectionRequest, Finding


def issue_finding_ids(session: Session, run_ids: list[int] | None = None,
                      finding_ids: list[int] | None = None) -> list[int]:
    """Confirmed regressions that deserve an issue: change-point regressions, not acknowledged, one per regression.

    A model's performance regression is filed only once its A/B re-measurement confirmed it
    (service.alerts.confirmation); a candidate, a not reproduced one and one that could not be re-measured are
    never filed (perfdash.verdicts.ConfirmationState.files_issue). Suite findings need no confirmation.

    One slowdown shows as several change points on the same night: a model's speedup and its absolute latency, and
    the suite's geomean. Those are one regression to a reader, so one issue: the speedup's (latency, which follows
    the speedup in the metric registry, only when the speedup did not move), and the suite's geomean only when no
    model of it changed on that night. Compile time and memory are their own regressions.
    """
    query = (sa.select(Finding).join(Finding.change_point)
             .where(Finding.category == REGRESSION.name, Finding.acknowledged_at.is_(None)).order_by(Finding.id))
    if run_ids is not None:
        query = query.where(Finding.run_id.in_(run_ids))
    if finding_ids is not None:
        query = query.where(Finding.id.in_(finding_ids))
    findings = list(session.scalars(query).unique())
    nights = {(f.configuration_id, f.series_id, f.change_point.run_id, f.metric) for f in findings if f.change_point}
    model_nights = {(c, r) for c, s, r, _m in nights if s is not None}
    chosen = []
    for f in findings:
        if not ConfirmationState(f.confirmation).files_issue:
            continue  # a candidate still counts above: its suite's geomean moved with it, and is not filed either
        cp_run = f.change_point.run_id if f.change_point else None
        leader = leader_of(f.metric)
        if leader is not None and (f.configuration_id, f.series_id, cp_run, leader) in nights:
            continue
        if f.series_id is None and (f.configuration_id, cp_run) in model_nights:
            continue
        chosen.append(f.id)
    return chosen


def file_issue(session: Session, client: GitHubClient, finding: Finding, dashboard_url: str | None) -> GithubPost:
    # Keyed by change point: never two issues for one change point, whatever finding or run refers to it.
    return publish(session, client, kind="issue", key=f"changepoint:{finding.change_point_id}",
                   title=issue_title(finding), body=issue_body(finding, dashboard_url), finding_id=finding.id)


def file_issues(session: Session, client: GitHubClient, finding_ids: Iterable[int],
                dashboard_url: str | None) -> list[GithubPost]:
    """File the issue of each finding, in order, each committed once posted (or kept in the ledger for a retry: what
    does not get through is retried by the next `perfdash report --post`). Returns the ledger rows."""
    rows = []
    for finding_id in finding_ids:
        finding = session.get(Finding, finding_id)
        assert finding is not None
        rows.append(file_issue(session, client, finding, dashboard_url))
        session.commit()
    return rows


def comment_culprit(session: Session, client: GitHubClient, bisection: BisectionRequest,
                    dashboard_url: str | None) -> GithubPost | None:
    """Comment the bisection's verdict on the regression's issue (filing the issue first if it was never filed)."""
    if bisection.finding_id is None:
        return None
    finding = session.get(Finding, bisection.finding_id)
    if finding is None or finding.change_point_id is None:
        return None
    issue = file_issue(session, client, finding, dashboard_url)
    return publish(session, client, kind="culprit", key=f"bisection:{bisection.id}",
                   body=culprit_body(bisection, dashboard_url), issue_number=issue.issue_number, finding_id=finding.id)
