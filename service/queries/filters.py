"""Filters shared by the run, summary and comparison queries."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Annotated, Any

import sqlalchemy as sa
from pydantic import BeforeValidator

from perfdash.axes import FILTER_AXES
from perfdash.contract import split_backend_variant
from service.models import Configuration, Machine, Run


@dataclass(frozen=True, slots=True)
class ConfigFilter:
    """Selects configurations; every field left None matches everything.

    The fields are the filterable axes of perfdash.axes (FILTER_AXES; tests/service/test_filters_axes.py keeps the
    two in step), then the machine and one stored configuration. ``backend`` is the backend with its variant as in
    file names (``inductor``, ``inductor_no_cudagraphs``) and matches exactly. ``machine`` matches a fingerprint
    exactly.
    """

    suite: str | None = None
    backend: str | None = None
    compile_mode: str | None = None
    device: str | None = None
    dtype: str | None = None
    mode: str | None = None
    thread_config: str | None = None
    dynamic_shapes: bool | None = None
    world_size: int | None = None
    distributed_backend: str | None = None
    machine: str | None = None
    configuration_id: int | None = None

    def clauses(self) -> list[sa.ColumnElement[bool]]:
        c = Configuration
        out: list[sa.ColumnElement[bool]] = []
        for axis in FILTER_AXES:
            value = getattr(self, axis.name)
            if value is not None and axis.name != "backend":
                out.append(getattr(c, axis.stored_column) == value)
        if self.configuration_id is not None:
            out.append(c.id == self.configuration_id)
        if self.backend is not None:
            backend, variant = split_backend_variant(self.backend)
            out.append(sa.and_(c.backend == backend, c.variant == variant))
        if self.machine is not None:
            out.append(c.machine_id.in_(sa.select(Machine.id).where(Machine.fingerprint == self.machine)))
        return out


def night_range(column: Any, since: date | None, until: date | None, *,
                undated: bool = False) -> list[sa.ColumnElement[bool]]:
    """Nights from ``since`` to ``until``, both inclusive, either open; ``undated``: rows without a night match too
    (annotations on a configuration rather than a night)."""
    out: list[sa.ColumnElement[bool]] = []
    for bound in ([column >= since] if since is not None else []) + ([column <= until] if until is not None else []):
        out.append(sa.or_(column.is_(None), bound) if undated else bound)
    return out


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Selects runs: a configuration filter plus nights (inclusive), a commit (prefix) and a source."""

    config: ConfigFilter = ConfigFilter()
    since: date | None = None
    until: date | None = None
    commit: str | None = None
    source: str | None = None

    def clauses(self) -> list[sa.ColumnElement[bool]]:
        out = self.config.clauses() + night_range(Run.night, self.since, self.until)
        if self.commit:
            out.append(Run.torch_git_commit.startswith(self.commit, autoescape=True))
        if self.source is not None:
            out.append(Run.source == self.source)
        return out


def _iso_date(value: object) -> object:
    """A date as YYYY-MM-DD only: pydantic also takes a number of seconds since 1970 ("0" was 1970-01-01), which the
    OpenAPI document's ``format: date`` does not allow."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str) and _ISO_DATE.fullmatch(value):
        return date.fromisoformat(value)
    raise ValueError("a date as YYYY-MM-DD")


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
IsoDate = Annotated[date, BeforeValidator(_iso_date)]

# SQL's OFFSET is a 64-bit integer: a larger one is a 422 of the parameter, not of the database
MAX_OFFSET = 2**63 - 1
