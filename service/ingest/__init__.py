"""Ingest: result files (or the same data as JSON) -> one transaction of machine, configuration, run, results,
summary. The API and `perfdash ingest` both call :func:`service.ingest.upload.ingest`.

One job a module, each name imported from the module that owns it (the package re-exports nothing):

- ``bundle``: a run ready to store (:class:`~service.ingest.bundle.RunBundle`, its content hash) and the rule for a
  run's start time;
- ``files``: uploaded result files -> bundles, through perfdash.contract (``bundles_from_files``, ``IngestDefaults``,
  ``check_file_names``);
- ``payload``: the JSON upload (``RunPayload``, ``ResultPayload``, ``bundle_from_payload``);
- ``keys``: what a run and a configuration are (``run_key``, ``configuration_key``);
- ``store``: the runs into the session's transaction (``store_runs``, ``IngestConflict``, ``IngestedRun``);
- ``hooks``: the post-ingest hooks after the commit (``run_hooks``, ``pending_hook_runs``, ``PostIngestHook``);
- ``upload``: one upload from end to end (``ingest``, ``IngestReport``).
"""
