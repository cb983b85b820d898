"""The layers point one way: the contract package (perfdash/) imports no other part of perfdash and nothing heavy,
the service imports no runner code and no torch, the runner imports no service, the bisect tool talks to the service
over HTTP only. Checked twice: every import statement in the source (function-local ones included), and what a fresh
interpreter has loaded after importing a whole layer."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# layer -> (its source folder, the top-level packages it must never import)
LAYERS: dict[str, tuple[Path, frozenset[str]]] = {
    "perfdash": (REPO / "perfdash", frozenset({"service", "runner", "perfbisect", "torch", "fastapi", "sqlalchemy",
                                               "alembic", "starlette", "uvicorn", "jinja2"})),
    "service": (REPO / "service", frozenset({"runner", "perfbisect", "torch", "torchvision", "timm", "transformers"})),
    "runner": (REPO / "runner", frozenset({"service", "perfbisect", "fastapi", "sqlalchemy", "alembic"})),
    "perfbisect": (REPO / "bisect" / "perfbisect", frozenset({"service", "fastapi", "sqlalchemy", "alembic"})),
}


def imported_packages(path: Path) -> set[tuple[str, int]]:
    """(top-level package, line) of every absolute import in a file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {(alias.name.split(".")[0], node.lineno) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add((node.module.split(".")[0], node.lineno))
    return found


def violations(layer: str) -> list[str]:
    folder, forbidden = LAYERS[layer]
    return [f"{path.relative_to(REPO)}:{line} imports {package}"
            for path in sorted(folder.rglob("*.py"))
            for package, line in sorted(imported_packages(path)) if package in forbidden]


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_no_import_statement_crosses_a_layer(layer: str) -> None:
    assert violations(layer) == []


def test_the_check_sees_a_crossing(tmp_path: Path) -> None:
    # The checker itself must be able to fail: a function-local import is found like a top-level one.
    source = tmp_path / "bad.py"
    source.write_text("import json\n\ndef f():\n    from service.db import make_engine\n    import torch.nn\n")
    assert imported_packages(source) == {("json", 1), ("service", 4), ("torch", 5)}


def _loaded_after_importing(modules: list[str]) -> set[str]:
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n"
            "    importlib.import_module(name)\n"
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def _modules(folder: Path, package: str) -> list[str]:
    names = []
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(folder).with_suffix("").parts
        names.append(".".join((package, *parts[:-1])) if parts[-1] == "__init__" else ".".join((package, *parts)))
    return names


def test_the_contract_package_loads_nothing_of_the_other_parts() -> None:
    loaded = _loaded_after_importing(_modules(REPO / "perfdash", "perfdash"))
    assert loaded & LAYERS["perfdash"][1] == set()


def test_the_service_loads_no_runner_and_no_torch() -> None:
    loaded = _loaded_after_importing(["service.app", "service.cli", "service.nightly", "service.detection.cli",
                                      *_modules(REPO / "service" / "queries", "service.queries")])
    assert loaded & LAYERS["service"][1] == set()


def test_the_change_vocabulary_and_judgement_sit_in_the_contract_layer() -> None:
    # perfdash/verdicts.py (the words) and perfdash/judgement.py (the one judgement) are read by the service, its
    # pages, the report and the GitHub publisher: they live below all of them, the vocabulary on the standard
    # library alone.
    vocabulary = REPO / "perfdash" / "verdicts.py"
    assert {package for package, _ in imported_packages(vocabulary)} <= {"__future__", "dataclasses", "enum"}
    assert {package for package, _ in imported_packages(REPO / "perfdash" / "judgement.py")} <= {
        "__future__", "collections", "dataclasses", "typing", "numpy", "perfdash"}
    assert "perfdash.verdicts" in _modules(REPO / "perfdash", "perfdash")  # under the checks above


def test_the_database_and_the_reads_import_no_web_framework() -> None:
    # service/db.py serves the CLI and `perfdash nightly` as much as the app (a request's session: service/api/deps.py)
    paths = [REPO / "service" / "db.py", *sorted((REPO / "service" / "queries").rglob("*.py"))]
    assert [f"{p.relative_to(REPO)}:{line}" for p in paths for package, line in sorted(imported_packages(p))
            if package in {"fastapi", "starlette"}] == []
