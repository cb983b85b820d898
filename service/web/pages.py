"""HTML pages of the dashboard. Thin: parse the URL, call queries, build view models, render a template."""

from __future__ import annotations

import shlex
from datetime import date, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from perfdash.axes import run_command, stored_axes
from perfdash.metric_registry import shown_metrics
from service.api.deps import ConfigFilterDep, SessionDep
from service.models import Configuration, Run, Series
from service.queries import findings, history, noise, order, runs
from service.queries.annotations import list_annotations
from service.queries.compare import compare_runs
from service.queries.filters import RunFilter
from service.queries.summary import latest_runs_with_base
from service.web import noise as noise_views
from service.web import views
from service.web.generated_code import model_code

router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)

RUNS_PER_PAGE = 100
TRENDS_DEFAULT_DAYS = 90
MODEL_DEFAULT_DAYS = 365
MODEL_TABLE_ROWS = 120  # nights listed under a model's charts (the charts carry the whole range)
DAILY_UP_TO_DAYS = 200  # "auto" granularity of Trends: one point a night up to this range, then one a week


def _templates(request: Request) -> Jinja2Templates:
    return request.app.state.web_templates


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
    return _templates(request).TemplateResponse(request, name, context, status_code=status_code)


def _empty(request: Request, active: str) -> Response:
    return render(request, "pages/empty.html", active=active, title="No data yet")


def _not_found(request: Request, what: str) -> Response:
    return render(request, "pages/error.html", status_code=404, active="", title="Not found", message=what)


def _blank(value: str | None) -> str | None:
    return value or None


def _date_range(since: date | None, until: date | None, days: int, latest: date | None) -> tuple[date, date]:
    # Ranges default to the last `days` nights that have data (not today: a stopped machine still shows history).
    end = until or latest or date.today()
    # ?to=0001-01-01 has no `days` nights before it: start at the calendar's first day rather than overflow
    start = end - timedelta(days=days) if end.toordinal() > days else date.min
    return since or start, end


FilterParam = Annotated[str | None, Query()]


def repro_command(config: Configuration, name: str) -> str:
    """The `perfdash run` command that measures one model of a series again, with the series' settings.

    The runner derives the variant from --compile-mode/--dynamic-shapes and sets its worker environment itself
    (freezing, threads, malloc), so only flags appear here; --batch-size only when the configuration overrode it
    (an override is a different configuration).
    """
    return run_command(stored_axes(config), name)


# --------------------------------------------------------------------------------------------------------------------


@router.get("/")
def home(request: Request, session: SessionDep, config_filter: ConfigFilterDep) -> Response:
    latest = latest_runs_with_base(session, config_filter)
    if not latest:
        return _empty(request, "home")
    groups = views.home_groups(latest)
    return render(request, "pages/home.html", active="home", title="Summary", groups=groups,
                  too_noisy=noise_views.too_noisy([run for run, _ in latest], noise.latest_figures(
                      session, config_filter, cache=request.app.state.noise_cache)))


@router.get("/suite/{run_id}")
def suite(request: Request, session: SessionDep, run_id: int, base: int | None = None) -> Response:
    run = runs.run_row(session, run_id)
    if run is None:
        return _not_found(request, f"There is no run {run_id}.")
    base_run = _base_run(session, run, base)
    if isinstance(base_run, str):
        return _not_found(request, base_run)
    comparison = compare_runs(session, base_run.id, run.id) if base_run else None
    results = ([m.new for m in comparison.models if m.new is not None] if comparison
               else runs.result_rows(session, run.id))
    rows = views.model_rows(results, comparison, run.summary.warnings if run.summary else [])
    shown = _findings_of_run(session, run.id)
    figures = noise.run_figures(session, run, cache=request.app.state.noise_cache)
    return render(request, "pages/suite.html", active="home", title=f"{run.configuration.suite} {run.night}",
                  run=run, findings=shown, base_run=base_run, rows=rows, noise=noise_views.lead_noise(figures),
                  finding_noise=noise.finding_noise(session, shown),
                  origin=views.model_origin(run.configuration.suite, run.suite_versions),
                  summary=views.suite_summary(run.summary),
                  base_summary=views.suite_summary(base_run.summary) if base_run else None,
                  label=views.config_label(run.configuration), group=views.group_title(run.configuration))


def _base_run(session: SessionDep, run: Run, base_id: int | None) -> Run | str | None:
    """The base of a comparison: the given run (same configuration only) or the previous run."""
    if base_id is None:
        return order.previous_run(session, run)
    base = runs.run_row(session, base_id)
    if base is None:
        return f"There is no run {base_id}."
    if base.configuration_id != run.configuration_id:
        return (f"Runs {base.id} and {run.id} belong to different configurations; "
                "only runs of one configuration compare.")
    return base


@router.get("/model/{series_id}")
def model(request: Request, session: SessionDep, series_id: int,
          since: Annotated[date | None, Query(alias="from")] = None,
          until: Annotated[date | None, Query(alias="to")] = None, code_a: int | None = None,
          code_b: int | None = None, diff: bool = False) -> Response:
    series: Series | None = history.get_series(session, series_id)
    if series is None:
        return _not_found(request, f"There is no series {series_id}.")
    config = series.configuration
    latest = order.latest_night(session)
    since, until = _date_range(since, until, MODEL_DEFAULT_DAYS, latest)
    found = history.model_history(session, series_id, since, until)
    points = found.points if found is not None else []
    notes = [{"night": a.night.isoformat() if a.night else "", "text": a.text, "author": a.author or ""}
             for a in list_annotations(session, configuration_id=config.id, series_id=series_id, since=since,
                                       until=until, with_night_notes=True, oldest_first=True, limit=10_000)]
    shown = findings.finding_rows(session, series_id=series_id, since=since, until=until, oldest_first=True)
    chart = views.model_chart_data(points, notes, [views.finding_mark(f) for f in shown])
    chart["codeChanged"], code = model_code(session, series.name, points, code_a, code_b, diff)
    last = points[-1] if points else None
    # the latest point that carries perfdash's activation peak (PyTorch's own files have none)
    activation = next((p for p in reversed(points) if p.eager_activation_peak_mem is not None), None)
    metrics = shown_metrics(chart["series"])
    return render(request, "pages/model.html", active="home", title=series.name, series=series, config=config,
                  label=views.config_label(config), group=views.group_title(config), points=points, last=last,
                  activation=activation, metrics=metrics, rows=views.point_rows(points, metrics, MODEL_TABLE_ROWS),
                  chart=chart, since=since, until=until, notes=notes, table_limit=MODEL_TABLE_ROWS, findings=shown,
                  repro=repro_command(config, series.name), views=views, code=code,
                  code_marks=dict(zip((p.run_id for p in points), chart["codeChanged"], strict=True)),
                  env=" ".join(f"{k}={shlex.quote(str(v))}" for k, v in sorted(config.env.items())),
                  noise=noise_views.noise_rows(found.noise if found is not None else []),
                  finding_noise=noise.finding_noise(session, shown))


@router.get("/trends")
def trends(request: Request, session: SessionDep, config_filter: ConfigFilterDep,
           since: Annotated[date | None, Query(alias="from")] = None,
           until: Annotated[date | None, Query(alias="to")] = None,
           granularity: Annotated[str, Query(pattern="^(auto|day|week|month)$")] = "auto") -> Response:
    if not runs.has_runs(session):
        return _empty(request, "trends")
    if not request.query_params:
        # Every configuration at once is a tangle of lines: start where the Summary starts, as a permalink.
        first = views.first_group_filter(runs.configurations(session))
        if first is not None:
            return RedirectResponse(f"/trends?{urlencode(first)}", status_code=303)
    since, until = _date_range(since, until, TRENDS_DEFAULT_DAYS, order.latest_night(session))
    step = granularity if granularity != "auto" else ("day" if (until - since).days <= DAILY_UP_TO_DAYS else "week")
    points = history.summary_history(session, config_filter, since, until, step)
    configs = {c.id: c for c in runs.configurations(session)}
    return render(request, "pages/trends.html", active="trends", title="Trends",
                  chart=views.trend_chart_data(points, configs), rows=views.trend_rows(points, configs),
                  choices=runs.distinct_values(session), selected=config_filter, since=since, until=until, views=views,
                  granularity=granularity, step=step)


@router.get("/compare")
def compare(request: Request, session: SessionDep, base: int | None = None, new: int | None = None,
            config: int | None = None, base_commit: FilterParam = None, new_commit: FilterParam = None) -> Response:
    if not runs.has_runs(session):
        return _empty(request, "compare")
    configs = runs.configurations(session)
    context: dict[str, Any] = {"configs": configs, "config_id": config, "base_commit": base_commit or "",
                               "new_commit": new_commit or "", "views": views, "error": None}
    new_run: Run | None = None
    base_run: Run | None = None
    if new is not None:
        new_run = runs.run_row(session, new)
        if new_run is None:
            context["error"] = f"There is no run {new}."
    elif config is not None:
        if new_commit:
            new_run = runs.run_by_commit(session, config, new_commit)
            if new_run is None:
                context["error"] = f"No run of configuration {config} at commit {new_commit}."
        else:
            latest = runs.run_choices(session, config, limit=1)
            new_run = runs.run_row(session, latest[0].id) if latest else None
    if new_run is not None:
        context["config_id"] = new_run.configuration_id
        if base is not None or not base_commit:
            found = _base_run(session, new_run, base)
            if isinstance(found, str):
                context["error"] = found
            else:
                base_run = found
        else:
            base_run = runs.run_by_commit(session, new_run.configuration_id, base_commit)
            if base_run is None:
                context["error"] = f"No run of this configuration at commit {base_commit}."
    if new_run is not None and base_run is None and context["error"] is None:
        context["error"] = f"Run {new_run.id} ({new_run.night}) is the first of its configuration: nothing to compare."
    if new_run is not None and base_run is not None:
        comparison = compare_runs(session, base_run.id, new_run.id)
        assert comparison is not None  # both runs exist and share a configuration (checked above)
        results = [m.new for m in comparison.models if m.new is not None]
        rows = views.model_rows(results, comparison, new_run.summary.warnings if new_run.summary else [])
        context.update(rows=rows, sections=views.comparison_sections(rows, comparison))
    choices = runs.run_choices(session, context["config_id"]) if context["config_id"] else []
    # The selects must show the runs compared, also when they are older than the newest few hundred.
    listed = {c.id for c in choices}
    for shown in (base_run, new_run):
        if shown is not None and shown.id not in listed and shown.configuration_id == context["config_id"]:
            choices.append(runs.RunChoice(shown.id, shown.night, shown.torch_git_commit))
    context.update(new_run=new_run, base_run=base_run, choices=choices)
    return render(request, "pages/compare.html", active="compare", title="Compare",
                  status_code=400 if context["error"] else 200, **context)


@router.get("/runs")
def runs_page(request: Request, session: SessionDep, config_filter: ConfigFilterDep, commit: FilterParam = None,
              page: Annotated[int, Query(ge=1)] = 1) -> Response:
    if not runs.has_runs(session):
        return _empty(request, "runs")
    rows = runs.list_run_rows(session, RunFilter(config=config_filter, commit=_blank(commit)),
                              limit=RUNS_PER_PAGE + 1, offset=(page - 1) * RUNS_PER_PAGE)
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "page" and v]

    def pager_query(number: int) -> str:
        return urlencode([*kept, ("page", str(number))])

    return render(request, "pages/runs.html", active="runs", title="Runs", runs=rows[:RUNS_PER_PAGE],
                  has_next=len(rows) > RUNS_PER_PAGE, page=page, choices=runs.distinct_values(session),
                  selected=config_filter, commit=commit or "", pager_query=pager_query, views=views)


def _findings_of_run(session: SessionDep, run_id: int) -> list:
    # grouped by kind, then model, on the suite page
    return sorted(findings.finding_rows(session, run_id=run_id), key=lambda f: (f.kind, f.model is None, f.model or "",
                                                                                f.id))
