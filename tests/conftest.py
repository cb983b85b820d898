"""Fixtures shared by every test package."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server for the whole session: PERFDASH_TEST_DATABASE_URL if set, else a temporary one."""
    url = os.environ.get("PERFDASH_TEST_DATABASE_URL")
    if url:
        yield url
        return
    from perfdash.pgcluster import temporary_postgres

    with temporary_postgres() as started:
        yield started
