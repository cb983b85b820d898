"""The suite registry: every module in this package that defines ``SUITE`` is a suite (see ``base`` for adding one)."""

from __future__ import annotations

import importlib
import pkgutil

from runner.suites.base import ModelSpec, Suite, SuiteError, Tolerance

__all__ = ["ModelSpec", "Suite", "SuiteError", "Tolerance", "available_suites", "get_suite"]

_NOT_SUITES = frozenset({"base", "builders"})


def available_suites() -> list[str]:
    """Names of the suite modules in this package (cheap: imports nothing heavy)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_SUITES)


def get_suite(name: str) -> Suite:
    if name not in available_suites():
        raise SuiteError(f"unknown suite {name!r}; available: {', '.join(available_suites())}")
    suite = getattr(importlib.import_module(f"{__name__}.{name}"), "SUITE", None)
    if not isinstance(suite, Suite):
        raise SuiteError(f"module runner.suites.{name} does not define SUITE = Suite(...)")
    return suite
