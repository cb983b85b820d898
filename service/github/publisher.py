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

An adapter: it posts what it is handed and decides nothing. Which findings get an issue, what an issue or a culprit
comment says and when they are posted is service.alerts'.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.orm import Session

from perfdash.http_retry import Transient
from service.github.client import CommentRef, GitHubClient, GitHubError
from service.github.models import GithubPost

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
