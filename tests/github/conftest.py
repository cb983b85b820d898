"""The GitHub stand-in server (tests/github/standin.py) as a fixture."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


def load_standin():
    """Import standin.py by path (tests are not a package; other test folders load it the same way)."""
    name = "perfdash_tests_github_standin"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("standin.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def github() -> Iterator:
    with load_standin().GitHubStandIn() as server:
        yield server
