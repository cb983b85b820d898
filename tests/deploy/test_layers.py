"""The layers point one way: the contract package (perfdash/) imports no other part of perfdash and nothing heavy,
the service imports no runner code and no torch, the runner imports no service, the bisect tool talks to the service
over HTTP only. Checked twice: every import statement in the source (function-local ones included), and what a fresh
interpreter has loaded after importing a whole layer."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from collections.abc import Collection, Mapping, Sequence
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


# Inside the service, top to bottom: a module imports from its own layer or below, never above (docs/architecture.md,
# "Layers"). A module belongs to the layer of its longest listed prefix.
SERVICE_LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"service.app", "service.cli", "service.ingest_cli", "service.export_cli", "service.summary_cli",
               "service.nightly", "service.hooks", "service.prometheus", "service.request_log",
               "service.detection.cli"}),                                           # entry points and wiring
    frozenset({"service.api", "service.web"}),                                      # HTTP routes and pages
    frozenset({"service.detection", "service.ingest", "service.release_verdicts", "service.retention",
               "service.backup", "service.migrate"}),                               # what writes: ingest, detection
    frozenset({"service.alerts"}),                                                  # what follows a finding
    frozenset({"service.github"}),                                                  # the GitHub adapter
    frozenset({"service.queries"}),                                                 # the reads
    frozenset({"service", "service.models", "service.github.models", "service.db", "service.locks",
               "service.settings"}),                                                # tables, sessions, settings
)


# Inside the runner, top to bottom, as inside the service (docs/architecture.md, "Layers"): the parent's side above
# the worker's, both above what they share.
RUNNER_LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"runner.cli", "runner.scale_cli", "runner.smoke", "runner.zygote",
               "runner.rank"}),                                                     # entry points, process mains
    frozenset({"runner.api", "runner.scale", "runner.scale_summary",
               "runner.summary"}),                                                  # what a run does
    frozenset({"runner.options", "runner.manifest", "runner.outcome", "runner.process",
               "runner.distributed"}),                                              # its parts: options, processes
    frozenset({"runner.worker", "runner.execute", "runner.measure", "runner.accuracy", "runner.check_settings",
               "runner.generated_code", "runner.contention", "runner.optimizer", "runner.backends.worker",
               "runner.backends.onnx",
               "runner.backends.openvino", "runner.backends.tensorrt"}),           # the worker (imports torch)
    frozenset({"runner.backends", "runner.suites"}),                                # the backends, the suites
    frozenset({"runner", "runner.protocol", "runner.suites.base", "runner.allocator", "runner.gpu_settings",
               "runner.inductor_overrides", "runner.lifeline", "runner.cuda_extras",
               "runner.torchbench_install"}),                                       # what both sides share
)


def module_names(folder: Path, package: str) -> dict[str, Path]:
    return dict(zip(_modules(folder, package), sorted(folder.rglob("*.py")), strict=True))


def imported_modules(path: Path, known: Collection[str]) -> set[str]:
    """The modules of ``known`` that a file imports when it runs (function-local imports included, those under
    ``if TYPE_CHECKING:`` left out: they never execute). ``from package import name`` is the submodule when ``name``
    is one, else the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    typing_only = {id(inner) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for statement in node.body for inner in ast.walk(statement)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
                     for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:  # `import service.web.pages.x` -> the module that holds it
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def import_graph(folder: Path, package: str) -> dict[str, set[str]]:
    known = module_names(folder, package)
    return {name: imported_modules(path, known) - {name} for name, path in known.items()}


def import_circle(graph: Mapping[str, Collection[str]]) -> list[str]:
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as circle:
        return list(circle.args[1])
    return []


def layer_of(module: str, layers: Sequence[Collection[str]] = SERVICE_LAYERS) -> int:
    """The rank of a module's layer (0: the top), by its longest listed prefix."""
    prefix = module
    while prefix:
        for rank, layer in enumerate(layers):
            if prefix in layer:
                return rank
        prefix = prefix.rpartition(".")[0]
    raise AssertionError(f"{module} is in no layer of its package's list (SERVICE_LAYERS, RUNNER_LAYERS): add it")


def upward_imports(graph: Mapping[str, Collection[str]],
                   layers: Sequence[Collection[str]] = SERVICE_LAYERS) -> list[str]:
    return [f"{module} imports {target}" for module, targets in sorted(graph.items()) for target in sorted(targets)
            if layer_of(target, layers) < layer_of(module, layers)]


@pytest.mark.parametrize("package", ["service", "runner"])
def test_no_import_circle(package: str) -> None:
    assert import_circle(import_graph(REPO / package, package)) == []


def test_no_service_import_points_up_its_layers() -> None:
    assert upward_imports(import_graph(REPO / "service", "service")) == []


def test_no_runner_import_points_up_its_layers() -> None:
    assert upward_imports(import_graph(REPO / "runner", "runner"), RUNNER_LAYERS) == []


def test_the_checks_see_a_circle_and_an_upward_import(tmp_path: Path) -> None:
    # Both checks must be able to fail: the circle goes through a function-local import (as runner.backends ->
    # runner.cuda_extras -> runner.manifest -> runner.backends once did), the typing-only import is no circle.
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import f\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
                                  "def f():\n    from pkg.c import g\n")
    (package / "c.py").write_text("from pkg import a\n")
    graph = import_graph(package, "pkg")
    assert graph["pkg.b"] == {"pkg.c"}
    assert sorted(import_circle(graph)[:-1]) == ["pkg.a", "pkg.b", "pkg.c"]
    assert upward_imports({"service.queries.x": {"service.detection.detector"}, "service.api.y": {"service.db"}}) \
        == ["service.queries.x imports service.detection.detector"]


def test_the_runner_check_sees_an_upward_import() -> None:
    # One checker serves both packages: the worker's job format (the bottom) may not import the run (its middle).
    assert upward_imports({"runner.protocol": {"runner.api", "runner.suites.base"}, "runner.cli": {"runner.api"}},
                          RUNNER_LAYERS) == ["runner.protocol imports runner.api"]
