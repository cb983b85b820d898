"""Dependencies shared by routers and pages: a request's database session and settings (SessionDep, SettingsDep), and
the one filter model every endpoint and page reads from its query string (ConfigFilter, RunFilter). Who may write is
service/api/auth.py."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any, Literal

from fastapi import Depends, Query, Request, Response
from pydantic import BaseModel
from sqlalchemy.orm import Session

from service.queries.filters import ConfigFilter, IsoDate, RunFilter
from service.settings import Settings


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    """One session per request; routers commit explicitly, anything uncommitted is rolled back on close."""
    with request.app.state.session_factory() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


def json_response(content: BaseModel | Sequence[BaseModel], status_code: int = 200) -> Response:
    """Serialise a query result once. Returning the model would make FastAPI dump it, re-validate the dump against
    ``response_model`` and dump it again — most of the time of a 3-year history. ``response_model`` stays on the
    route for the OpenAPI document."""
    if not isinstance(content, BaseModel):
        body = b"[" + b",".join(item.model_dump_json().encode() for item in content) + b"]"
    else:
        body = content.model_dump_json().encode()
    return Response(content=body, status_code=status_code, media_type="application/json")




def _config_filter_dependency() -> Callable[..., ConfigFilter]:
    """A dependency with one optional query parameter per ConfigFilter field, built from the dataclass so a field
    added there is a parameter of every endpoint and page at once, of the field's type (an integer, a boolean, a
    string). Empty values (a form's "any" option) mean no filter; a value that is not of the field's type is a
    422."""
    hints = typing.get_type_hints(ConfigFilter)
    fields = [f.name for f in dataclasses.fields(ConfigFilter)]

    def build(**values: Any) -> ConfigFilter:
        return ConfigFilter(**{name: None if values.get(name) == "" else values.get(name)
                               for name in fields})

    def annotation(name: str) -> object:
        kind = next(t for t in typing.get_args(hints[name]) if t is not type(None))
        return kind | None if kind is str else kind | Literal[""] | None

    descriptions = {"backend": "backend with variant, e.g. inductor_no_cudagraphs", "machine": "machine fingerprint"}
    # the ignore: FastAPI reads a dependency's parameters from __signature__, which typeshed's functions lack
    build.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation(name),
                          default=Query(None, description=descriptions.get(name)))
        for name in fields])
    return build


config_filter = _config_filter_dependency()
ConfigFilterDep = Annotated[ConfigFilter, Depends(config_filter)]


def run_filter(
    config: ConfigFilterDep,
    since: Annotated[IsoDate | None, Query(description="first night (UTC date a run started), inclusive")] = None,
    until: Annotated[IsoDate | None, Query(description="last night, inclusive")] = None,
    commit: Annotated[str | None, Query(description="torch git commit or a prefix of it")] = None,
    source: Annotated[str | None, Query(description="perfdash or pytorch")] = None,
) -> RunFilter:
    return RunFilter(config=config, since=since, until=until, commit=commit or None, source=source or None)


RunFilterDep = Annotated[RunFilter, Depends(run_filter)]
