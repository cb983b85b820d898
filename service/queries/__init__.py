"""The questions the service answers, as plain functions of a Session returning pydantic models.

Routers (service/api) and HTML pages (service/web) call these; no history or summary maths lives in the web layer.

- :func:`service.queries.runs.list_runs`, :func:`~service.queries.runs.get_run`,
  :func:`~service.queries.runs.list_configurations`
- :func:`service.queries.summary.night_summary` — a night's summary per suite x backend with the previous night's
- :func:`service.queries.history.model_history`, :func:`~service.queries.history.find_series`,
  :func:`~service.queries.history.suite_history`
- :func:`service.queries.compare.compare_runs`, :func:`~service.queries.compare.compare_commits`
- :func:`service.queries.annotations.list_annotations`, :func:`~service.queries.annotations.add_annotation`
"""
