"""The benchmark harness (imports torch only inside the worker and suites)."""
