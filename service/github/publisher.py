"""Posting to GitHub through the ledger (table github_posts): each thing is posted once, failures are kept for later.

Every post has a ledger row keyed by (kind, key, repository) — ``report`` (one comment per night and scope, edited in
place when the report changes), ``issue`` (one per regression change point), ``culprit`` (one comment per bisection
result). A row is ``pending`` until GitHub accepted it, ``failed`` after an attempt that did not get through (the
error kept, the token never in it), ``refused`` after GitHub answered no (a permission, a wrong issue number: it needs
a person, and `perfdash report --post` says so and exits 1), ``posted`` after. `perfdash report --post` retries
every row not posted first.

Each body carries a hidden marker (an HTML comment). Before every create and after every failed one, the publisher
looks for the marker on GitHub (GitHubClient.ensure_issue / ensure_comment, without filtering by label): if an earlier
attempt did reach GitHub but its answer was lost, the existing comment or issue is adopted instead of posting a
duplicate. Only what the bot's own login wrote is adopted: a marker's value can be predicted, and an issue or comment
by anyone else carrying it is ignored.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.orm import Session

from perfdash.axes import run_command, stored_axes
from perfdash.http_retry import Transient
from perfdash.verdicts import REGRESSION, category
from service.detection.code_change import describe
from service.detection.confirmation import CONFIRMED, NONE
from service.github import safe
from service.github.client import CommentRef, GitHubClient, GitHubError
from service.github.models import GithubPost
from service.models import BisectionRequest, Finding

logger = logging.getLogger(__name__)

ISSUE_LABEL = "perfdash-regression"


def _sha(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


def marker(kind: str, key: str) -> str:
    return f"<!-- perfdash:{kind}:{key} -->"


def _ledger_row(session: Session, kind: str, key: str, repository: str) -> GithubPost | None:
    """The row, locked until the caller commits and read as committed: another process posting the same thing (a
    replica filing the same issue, two `report --post`) has either finished, and its row says so, or waits."""
    return session.scalars(sa.select(GithubPost).where(GithubPost.kind == kind, GithubPost.key == key,
                                                       GithubPost.repository == repository)
                           .with_for_update().execution_options(populate_existing=True)).first()


def _claim_ledger_row(session: Session, **values: object) -> GithubPost:
    """Insert the row unless another process did (waiting for that one's commit), then lock whichever is stored."""
    session.execute(_insert_unless_stored(session, values))
    stored = _ledger_row(session, str(values["kind"]), str(values["key"]), str(values["repository"]))
    assert stored is not None
    return stored


def _insert_unless_stored(session: Session, values: dict[str, object]) -> sa.Executable:
    """INSERT ... ON CONFLICT DO NOTHING for the session's database (Postgres in production, SQLite embedded)."""
    conflict = ["kind", "key", "repository"]
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(GithubPost).values(**values).on_conflict_do_nothing(index_elements=conflict)
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(GithubPost).values(**values).on_conflict_do_nothing(index_elements=conflict)


def publish(session: Session, client: GitHubClient, *, kind: str, key: str, body: str,
            issue_number: int | None = None, title: str | None = None, finding_id: int | None = None) -> GithubPost:
    """Post (or edit, for a changed report) through the ledger; never raises for GitHub failures.

    ``kind`` "issue" creates an issue titled ``title``; other kinds comment on ``issue_number``. Flushes; the caller
    commits.
    """
    tag = marker(kind, key)
    if tag not in body:
        body = f"{tag}\n{body}"
    repository = client.config.repository
    row = _ledger_row(session, kind, key, repository)
    if row is None:
        row = _claim_ledger_row(session, kind=kind, key=key, repository=repository, issue_number=issue_number,
                                title=title, body=body, body_sha256=_sha(body), status="pending", attempts=0,
                                finding_id=finding_id)
    if row.status == "posted":
        if row.posted_sha256 == _sha(body) or kind != "report" or row.comment_id is None:
            return row  # the same report, an issue, or a culprit comment: never posted twice
        row.body, row.body_sha256, row.status = body, _sha(body), "pending"
    else:
        row.body, row.body_sha256, row.title = body, _sha(body), title or row.title
        row.issue_number = row.issue_number or issue_number
    _attempt(client, row, tag)
    session.flush()
    return row


def _attempt(client: GitHubClient, row: GithubPost, tag: str) -> None:
    row.attempts += 1
    try:
        if row.kind == "issue":
            if row.issue_number is None:
                issue = client.ensure_issue(tag, row.title or "perfdash regression", row.body, [ISSUE_LABEL])
                row.issue_number, row.html_url = issue.number, issue.html_url
        else:
            if row.issue_number is None:
                raise GitHubError("no issue to comment on")
            comment = _comment(client, row, tag)
            row.comment_id, row.html_url = comment.id, comment.html_url
    except GitHubError as exc:
        # refused: GitHub said no (a permission, a wrong issue number); failed: it did not answer (an outage)
        row.status, row.last_error = ("failed" if isinstance(exc, Transient) or exc.status is None
                                      else "refused"), str(exc)
        logger.warning("GitHub %s %s not posted (attempt %d, will retry on the next run): %s", row.kind, row.key,
                       row.attempts, exc)
        return
    row.status, row.last_error = "posted", None
    row.posted_sha256, row.posted_at = row.body_sha256, datetime.now(UTC)


def _comment(client: GitHubClient, row: GithubPost, tag: str) -> CommentRef:
    """The row's comment, edited to the row's body, or posted. Only the bot's own comments are found by the marker
    (GitHubClient.find_comment); one the bot may no longer edit (deleted, or GitHub refuses the edit) is left as it
    is and the body is posted as a new comment of the bot's own."""
    assert row.issue_number is not None
    stale = frozenset({row.comment_id}) if row.comment_id is not None else frozenset()
    if row.comment_id is not None:
        try:
            return client.update_comment(row.comment_id, row.body)
        except GitHubError as exc:
            if isinstance(exc, Transient) or exc.status not in (403, 404, 410):
                raise
            logger.warning("GitHub %s %s: comment %s cannot be edited (%s); posting the body as a new comment",
                           row.kind, row.key, row.comment_id, exc)
    comment = client.ensure_comment(row.issue_number, tag, row.body, skip=stale)
    if comment.body != row.body:  # an earlier version of the report, found by its marker
        comment = client.update_comment(comment.id, row.body)
    return comment


def retry_unposted(session: Session, client: GitHubClient) -> list[GithubPost]:
    """Try every pending or failed post of this repository again (oldest first)."""
    # rows another process is posting right now are its to post (skipped, not waited for)
    rows = session.scalars(sa.select(GithubPost).where(GithubPost.status != "posted",
                                                       GithubPost.repository == client.config.repository)
                           .order_by(GithubPost.id).with_for_update(skip_locked=True)
                           .execution_options(populate_existing=True)).all()
    for row in rows:
        if row.kind != "issue" and row.issue_number is None and row.finding_id is not None:
            # A culprit comment whose issue could not be filed at the time: the issue row was retried just before.
            issue = session.scalars(sa.select(GithubPost).where(
                GithubPost.kind == "issue", GithubPost.finding_id == row.finding_id,
                GithubPost.repository == row.repository)).first()
            row.issue_number = issue.issue_number if issue is not None else None
        _attempt(client, row, marker(row.kind, row.key))
        session.flush()
    return list(rows)


# ---------------------------------------------------------------------------------------------------------------------
# What gets posted


def issue_title(finding: Finding) -> str:
    c = finding.configuration
    subject = finding.model or "suite geomean speedup"
    change = "" if finding.change_pct is None else f" {finding.change_pct:+.1f}%"
    return safe.title(f"[perfdash] {c.suite} {subject}: {finding.metric}{change} "
                      f"({c.backend_variant}, {c.dtype}, {c.mode}, {c.device}, {c.thread_config})")


def issue_body(finding: Finding, dashboard_url: str | None) -> str:
    """Every value from data goes through service.github.safe (no mention, link or markup of its own)."""
    c = finding.configuration
    cp = finding.change_point
    ab = finding.confirmation_result or {}
    md = safe.inline
    confirmed = []
    if finding.confirmation == CONFIRMED:
        confirmed = [f"| A/B re-measurement | {md(_ab_text(ab))} |"]
    lines = [
        f"perfdash found a {category(finding.category).label} of **{md(finding.metric)}** on **{md(c.suite)} / "
        f"{md(finding.model or '(suite)')}**.",
        "",
        "| | |",
        "|---|---|",
        f"| configuration | {md(c.backend_variant)}, compile mode {md(c.compile_mode)}, {md(c.dtype)}, {md(c.mode)}, "
        f"{md(c.device)}, {md(c.thread_config)} |",
        f"| machine | {md(c.machine.fingerprint)} |",
        f"| before | {finding.old_value:.4g} |" if finding.old_value is not None else "| before | - |",
        f"| after | {finding.new_value:.4g} |" if finding.new_value is not None else "| after | - |",
        f"| change | {finding.change_pct:+.1f}% |" if finding.change_pct is not None else "| change | - |",
        f"| p-value | {finding.p_value:.1e} |" if finding.p_value is not None else "| p-value | - |",
        f"| nights | {cp.n_before} before, {cp.n_after} after |" if cp else "| nights | - |",
        f"| commit range | {md(finding.good_commit or '?')}..{md(finding.bad_commit or '?')} |",
        *confirmed,
        "",
        md(describe(finding.code_change)) if finding.kind == "performance" else "",
        "",
        "Reproduce:",
        safe.code_block(_repro(finding)),
    ]
    if dashboard_url and finding.series_id:
        lines.append(f"Dashboard: {dashboard_url.rstrip('/')}/model/{finding.series_id}")
    elif dashboard_url:
        lines.append(f"Dashboard: {dashboard_url.rstrip('/')}/suite/{finding.run_id}")
    # "finding 12", not "finding #12": GitHub would link issue 12 of the repository
    lines += ["", f"perfdash finding {finding.id}. A bisection comments the culprit here when it names one."]
    return "\n".join(lines)


def _ab_text(ab: dict) -> str:
    """The confirmation's figures in one cell: medians of good and bad, the change and its p-value."""
    parts = []
    if ab.get("good_median") is not None and ab.get("bad_median") is not None:
        parts.append(f"good {ab['good_median']:.4g} ({len(ab.get('good_samples') or [])} runs), "
                     f"bad {ab['bad_median']:.4g} ({len(ab.get('bad_samples') or [])} runs)")
    if ab.get("change_pct") is not None:
        parts.append(f"{ab['change_pct']:+.1f}% worse")
    if ab.get("p_value") is not None:
        parts.append(f"p={ab['p_value']:.1e}")
    return "; ".join(parts) or str(ab.get("summary") or "reproduced")


def _repro(finding: Finding) -> str:
    return run_command(stored_axes(finding.configuration), finding.model)


def issue_finding_ids(session: Session, run_ids: list[int] | None = None,
                      finding_ids: list[int] | None = None) -> list[int]:
    """Confirmed regressions that deserve an issue: change-point regressions, not acknowledged, one per regression.

    A model's performance regression is filed only once its A/B re-measurement confirmed it
    (service.detection.confirmation); a candidate, a not reproduced one and one that could not be re-measured are
    never filed. Suite findings need no confirmation.

    One slowdown shows as several change points on the same night: a model's speedup and its absolute latency, and
    the suite's geomean. Those are one regression to a reader, so one issue: the speedup's (latency only when the
    speedup did not move), and the suite's geomean only when no model of it changed on that night. Compile time and
    memory are their own regressions.
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
        if f.confirmation not in (NONE, CONFIRMED):
            continue  # a candidate still counts above: its suite's geomean moved with it, and is not filed either
        cp_run = f.change_point.run_id if f.change_point else None
        if f.metric == "abs_latency" and (f.configuration_id, f.series_id, cp_run, "speedup") in nights:
            continue
        if f.series_id is None and (f.configuration_id, cp_run) in model_nights:
            continue
        chosen.append(f.id)
    return chosen


def file_issue(session: Session, client: GitHubClient, finding: Finding, dashboard_url: str | None) -> GithubPost:
    # Keyed by change point: never two issues for one change point, whatever finding or run refers to it.
    return publish(session, client, kind="issue", key=f"changepoint:{finding.change_point_id}",
                   title=issue_title(finding), body=issue_body(finding, dashboard_url), finding_id=finding.id)


def culprit_body(bisection: BisectionRequest, dashboard_url: str | None = None) -> str:
    """The verdict; the commit's subject and author, the summary and the URL are data (service.github.safe)."""
    result = bisection.result or {}
    culprit = result.get("culprit") or {}
    verdict = result.get("verdict", "?")
    md = safe.inline
    # "Bisection 4", not "Bisection #4": GitHub would link issue 4 of the repository
    lines = [f"Bisection {bisection.id} of {md(bisection.metric)} on {md(bisection.configuration.suite)} / "
             f"{md(bisection.model)} ({md(bisection.good_commit[:10])}..{md(bisection.bad_commit[:10])}): "
             f"**{md(verdict)}**."]
    if culprit:
        lines += ["", f"Culprit: {md(culprit.get('sha'))} — {md(culprit.get('subject', ''))}",
                  f"Author: {md(culprit.get('author', '?'))}, {md(culprit.get('date', '?'))}"]
    candidates = result.get("candidates") or []
    if verdict == "culprit_range" and candidates:
        # the commits before the culprit do not build: the verdict is the range, never one of its authors
        lines += ["", f"Range ({len(candidates)} commits; all but the last do not build): "
                      f"{md(candidates[0].get('sha', '?')[:10])}..{md(candidates[-1].get('sha', '?')[:10])}"]
    elif verdict == "not_confirmed":
        lines += ["", "The commit the search pointed at did not reproduce the regression against its parent: "
                      "nobody is named."]
    if result.get("summary"):
        lines += ["", md(result["summary"])]
    steps = result.get("steps") or []
    if steps:
        lines += ["", f"{len(steps)} steps."]
    if result.get("jenkins_build_url"):
        lines += ["", f"Jenkins: {md(result['jenkins_build_url'])}"]
    if dashboard_url:  # every A/B the verdict rests on, for a reader to check
        lines += ["", f"Bisection page: {dashboard_url.rstrip('/')}/bisections/{bisection.id}"]
    return "\n".join(lines)


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
