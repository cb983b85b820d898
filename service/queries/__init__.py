"""The service's one read path: the questions it answers, as plain functions of a Session.

Routers (service/api), HTML pages (service/web), detection, confirmation and the report call these; no SQL that reads
lives elsewhere (writes stay with their owners: ingest, detection, bisection requests). Nothing here formats.

- :mod:`~service.queries.filters` — ConfigFilter / RunFilter (the one filter model of every endpoint and page, built
  by service.api.deps), :func:`~service.queries.filters.night_range`
- :mod:`~service.queries.order` — which run comes before which: run_order, previous_run, latest_run_ids,
  latest_night, latest_of_each ("a later run wins" where one run per configuration is shown)
- :mod:`~service.queries.runs` — runs list (API and page), one run, results, configurations, a configuration's
  latest night as a table shows it (Vision, Backends)
- :mod:`~service.queries.summary` — a night's summary with each run's previous run; the home page's latest runs
- :mod:`~service.queries.history` — a model's series, suite summaries over runs (one configuration or Trends), the
  Vision page's latency history
- :mod:`~service.queries.compare` — two runs, two commits
- :mod:`~service.queries.annotations` — list and add notes
- :mod:`~service.queries.findings` — findings and bisection requests as the API and pages read them
- :mod:`~service.queries.detection` — the reads of detection, confirmation and the report (series history cut at a
  run, runs to detect, missing configurations)
"""
