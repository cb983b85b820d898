"""The GitHub ledger (table ``github_posts``, migration 0002), on service.models' Base: what was posted where, one row
per (kind, key, repository). ``status`` pending/failed rows are retried on the next ``perfdash report --post``, posted
rows are never posted again (service.github.publisher)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from service.models import Base


class GithubPost(Base):
    __tablename__ = "github_posts"
    __table_args__ = (sa.UniqueConstraint("kind", "key", "repository", name="uq_github_posts_identity"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(16))  # report | issue | culprit
    key: Mapped[str] = mapped_column(sa.String(200))  # report:<night>:<scope key> | finding:<id> | bisection:<id>
    repository: Mapped[str] = mapped_column(sa.String(200))
    issue_number: Mapped[int | None]  # where the comment went, or the issue created
    comment_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    html_url: Mapped[str | None] = mapped_column(sa.String(500))
    title: Mapped[str | None] = mapped_column(sa.String(300))
    body: Mapped[str] = mapped_column(sa.Text)  # kept so a failed post is retried with exactly what was meant
    body_sha256: Mapped[str] = mapped_column(sa.String(64))
    posted_sha256: Mapped[str | None] = mapped_column(sa.String(64))  # the body GitHub has
    status: Mapped[str] = mapped_column(sa.String(16))  # pending | posted | failed
    attempts: Mapped[int] = mapped_column(default=0)
    last_error: Mapped[str | None] = mapped_column(sa.Text)
    finding_id: Mapped[int | None] = mapped_column(sa.ForeignKey("findings.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(server_default=sa.func.now())
    posted_at: Mapped[datetime | None]
