"""Annotations: notes on a configuration, a series or a night (e.g. "expected: new suite pin")."""

from __future__ import annotations

from datetime import date, datetime

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlalchemy.orm import Session

from service.models import Annotation, Configuration, Series
from service.queries.filters import IsoDate, night_range

STORABLE_TEXT = "^[^\\x00]*$"  # and no lone surrogate, which a JSON schema pattern cannot say usably


class AnnotationIn(BaseModel):
    # the document says what the validator below checks: at least one target that is not null
    model_config = ConfigDict(extra="forbid", json_schema_extra={"anyOf": [
        {"required": [name], "properties": {name: {"not": {"type": "null"}}}}
        for name in ("configuration_id", "series_id", "night")]})

    # no NUL byte or lone surrogate (the validator below; said in the document too)
    text: str = Field(min_length=1, max_length=10_000, json_schema_extra={"pattern": STORABLE_TEXT})
    author: str | None = Field(None, max_length=200, json_schema_extra={"pattern": STORABLE_TEXT})
    configuration_id: int | None = None
    series_id: int | None = None
    night: IsoDate | None = None

    @model_validator(mode="after")
    def _targets_something(self) -> AnnotationIn:
        if self.configuration_id is None and self.series_id is None and self.night is None:
            raise ValueError("an annotation needs a configuration_id, a series_id or a night")
        return self

    @model_validator(mode="after")
    def _storable_text(self) -> AnnotationIn:
        from perfdash.contract import find_unstorable_text

        where = find_unstorable_text({"text": self.text, "author": self.author})
        if where is not None:
            raise ValueError(f"NUL byte or lone surrogate in {where}")
        return self


class AnnotationOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    text: str
    author: str | None
    configuration_id: int | None
    series_id: int | None
    night: date | None
    created_at: datetime


def add_annotation(session: Session, note: AnnotationIn) -> AnnotationOut:
    """Adds (flushes, does not commit); LookupError if the configuration or series does not exist."""
    if note.configuration_id is not None and session.get(Configuration, note.configuration_id) is None:
        raise LookupError(f"no configuration {note.configuration_id}")
    if note.series_id is not None and session.get(Series, note.series_id) is None:
        raise LookupError(f"no series {note.series_id}")
    row = Annotation(**note.model_dump())
    session.add(row)
    session.flush()
    session.refresh(row)
    return AnnotationOut.model_validate(row)


def list_annotations(session: Session, *, configuration_id: int | None = None, series_id: int | None = None,
                     since: date | None = None, until: date | None = None, with_night_notes: bool = False,
                     oldest_first: bool = False, limit: int = 500) -> list[AnnotationOut]:
    """Notes on the configuration or on the series (either matches; any note when neither is given), on nights in
    the range. ``with_night_notes`` (the model page): also the notes on whole nights (neither configuration nor
    series), and notes on no night at all whatever the range."""
    a = Annotation
    scope = [a.configuration_id == configuration_id] if configuration_id is not None else []
    scope += [a.series_id == series_id] if series_id is not None else []
    if with_night_notes:
        scope.append(sa.and_(a.configuration_id.is_(None), a.series_id.is_(None)))
    order = (a.night.asc().nulls_first(), a.id) if oldest_first else (a.night.desc().nulls_last(), a.id.desc())
    query = (sa.select(a).where(sa.or_(*scope) if scope else sa.true(),
                                *night_range(a.night, since, until, undated=with_night_notes))
             .order_by(*order).limit(limit))
    return [AnnotationOut.model_validate(row) for row in session.scalars(query)]
