"""The service's Prometheus metrics, served at ``GET /metrics`` (docs/operations.md lists them and what to alert on).

Each app has its own registry (``app.state.metrics``, made by create_app; never prometheus_client's global one: tests
make many apps, and a module-level registry would be state shared between them). Counters and histograms are this
process's: with several replicas, or ``perfdash serve --workers N``, each process counts what it served, and a
scrape of one process says nothing of the others (Prometheus scrapes each and sums). The backlog gauges (candidates
waiting for their A/B, open bisections, failed GitHub posts) are read from the database at each scrape, through the
request's session like any read of the API, so every process reports the same figures (take their max, not their
sum), and they hold no state between scrapes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlalchemy as sa
from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from starlette.routing import Match
from starlette.types import Scope

from service.api.deps import SessionDep

if TYPE_CHECKING:
    from service.ingest.upload import IngestReport
    from service.queries.backlog import Backlog

logger = logging.getLogger(__name__)

# The upload's path: its answers are the ingests (service.api.runs.runs_create, the one way runs arrive over HTTP).
INGEST_ROUTE = ("POST", "/api/v1/runs")
UNMATCHED = "unmatched"  # the route label of a request no route took (a 404): never the raw path (unbounded labels)
# Detection of an upload's runs: ~0.3 s of CPU a run, a night's 276 runs within the nightly's 60 s (issue 31).
DETECTION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)


@dataclass(frozen=True, slots=True)
class ServiceMetrics:
    """One app's registry and the metrics the service updates as it serves."""

    registry: CollectorRegistry
    requests: Counter
    request_seconds: Histogram
    ingests: Counter
    results_stored: Counter
    detection_seconds: Histogram

    @classmethod
    def create(cls) -> ServiceMetrics:
        registry = CollectorRegistry()
        ProcessCollector(registry=registry)  # CPU seconds, resident memory, open files of this process
        return cls(
            registry=registry,
            requests=Counter("perfdash_http_requests", "HTTP requests answered, by route template and status",
                             ("method", "route", "status"), registry=registry),
            request_seconds=Histogram("perfdash_http_request_duration_seconds",
                                      "Time from a request's arrival to the end of its response, by route template",
                                      ("method", "route"), registry=registry),
            ingests=Counter("perfdash_ingests", "Uploads to POST /api/v1/runs: accepted (stored or already stored), "
                            "refused (4xx: token, size, malformed, conflict) or failed (5xx: the agent spools it)",
                            ("outcome",), registry=registry),
            results_stored=Counter("perfdash_results_stored", "Per-model results of newly stored runs",
                                   registry=registry),
            detection_seconds=Histogram("perfdash_detection_duration_seconds",
                                        "Wall time of the post-ingest hooks (detection) of one upload's new runs",
                                        registry=registry, buckets=DETECTION_BUCKETS),
        )

    def observe_request(self, scope: Scope, status: int, seconds: float, own_route: str | None) -> None:
        """One answered request (service.request_log.RequestLog): counted and timed by method, route template and
        status; an answer of the upload's path counted as an ingest. ``own_route``: :func:`app_route` of the scope as
        it arrived."""
        method, route = scope["method"], route_template(scope, own_route)
        self.requests.labels(method, route, str(status)).inc()
        self.request_seconds.labels(method, route).observe(seconds)
        # by the path, not the route: an upload refused before routing (413, too large) is an ingest too
        if (method, scope["path"]) == INGEST_ROUTE:
            self.ingests.labels("accepted" if status < 400 else "refused" if status < 500 else "failed").inc()

    def observe_ingest(self, report: IngestReport) -> None:
        """What an upload stored and how long its detection took (service.api.runs)."""
        self.results_stored.inc(sum(r.models for r in report.runs if r.created))
        if report.hook_runs:
            self.detection_seconds.observe(report.hooks_s)


def backlog_families(backlog: Backlog | None) -> list[Metric]:
    """The gauges of the database's backlog (service.queries.backlog) at this scrape; ``backlog`` None: the database
    did not answer (``perfdash_database_up`` 0, and none of the others: an absent series, not a stale figure)."""
    up = GaugeMetricFamily("perfdash_database_up", "Whether the database answered this scrape's queries")
    up.add_metric([], 0 if backlog is None else 1)
    if backlog is None:
        return [up]
    confirmations = GaugeMetricFamily("perfdash_confirmations_pending", "Regression candidates waiting for their A/B "
                                      "re-measurement (findings whose confirmation is pending)")
    confirmations.add_metric([], backlog.confirmations_pending)
    bisections = GaugeMetricFamily("perfdash_bisections_open", "Bisection and confirm requests the bisect job has "
                                   "not finished", labels=("purpose", "status"))
    for (purpose, status), count in sorted(backlog.bisections_open.items()):
        bisections.add_metric([purpose, status], count)
    oldest = GaugeMetricFamily("perfdash_bisections_oldest_open_age_seconds",
                               "Age of the oldest bisection or confirm request not done (0: none open)")
    oldest.add_metric([], backlog.oldest_open_bisection_s)
    posts = GaugeMetricFamily("perfdash_github_posts_failed", "GitHub posts whose last attempt failed: an outage "
                              "(retried by the next `perfdash report --post` or detection) or GitHub's refusal",
                              labels=("kind",))
    for kind, count in sorted(backlog.github_posts_failed.items()):
        posts.add_metric([kind], count)
    return [up, confirmations, bisections, oldest, posts]


@dataclass(frozen=True, slots=True)
class Scrape(Collector):
    """What one scrape exposes: the app's registry, then the backlog read for it."""

    registry: CollectorRegistry
    backlog: Backlog | None

    def collect(self) -> Iterable[Metric]:
        yield from self.registry.collect()
        yield from backlog_families(self.backlog)


def app_route(scope: Scope) -> str | None:
    """The path of the app's own route (/docs, /openapi.json) or mount (/static) that ``scope`` goes to, before it is
    routed (a mount changes the scope's paths on the way in). The API's and the pages' routes, included from routers,
    are not among them: the router records which one served a request (:func:`route_template`)."""
    for route in getattr(scope.get("app"), "routes", ()):
        path = getattr(route, "path", None)
        if isinstance(path, str) and route.matches(scope)[0] == Match.FULL:
            return path
    return None


def route_template(scope: Scope, app_route: str | None = None) -> str:
    """The path template of the route that served ``scope`` (``/api/v1/runs/{run_id}``), else ``app_route``, else
    :data:`UNMATCHED` (a 404, or a request a middleware answered before routing): never the raw path (unbounded label
    values)."""
    served = getattr(scope.get("route"), "path", None)
    return served if isinstance(served, str) else app_route or UNMATCHED


router = APIRouter(include_in_schema=False)


@router.get("/metrics")
def metrics_endpoint(request: Request, session: SessionDep) -> Response:
    """Prometheus' text format. Sync: the backlog's queries run in the thread pool. A database that does not answer
    still gets the process's counters out (the time of an outage is when they matter)."""
    from service.queries.backlog import read_backlog

    try:
        backlog: Backlog | None = read_backlog(session)
    except sa.exc.SQLAlchemyError as exc:
        logger.warning("metrics: the database did not answer: %s", type(exc).__name__)
        backlog = None
    return Response(generate_latest(Scrape(request.app.state.metrics.registry, backlog)),
                    media_type=CONTENT_TYPE_LATEST)
