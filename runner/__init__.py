"""The benchmark harness behind ``perfdash run`` (imports torch only in the fork server, the workers and the builders).

- ``runner.api.run_suite(RunOptions) -> RunReport``: the Python API (the CLI and the nightly job use it);
- ``runner.suites``: the suites, their TOML model lists and the builders (see ``runner.suites.base`` to add one);
- ``runner.process`` / ``runner.zygote``: the fork server (one per run) and the worker it forks per model;
- ``runner.worker`` / ``runner.execute``: the per-model worker process and what it measures;
- ``runner.protocol``: the JSON protocol between them.
"""
