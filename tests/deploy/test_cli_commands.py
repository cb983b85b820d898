"""Every `perfdash ...` command line in the pipelines, the compose file and the images is accepted by the real parser.

A subcommand another part of perfdash has not registered yet is skipped with its name, not counted as a pass.
"""

from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path

import pytest
import yaml

from perfdash.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
NIGHTLY = REPO / "Jenkinsfile"
BISECT = REPO / "bisect" / "Jenkinsfile"
SUBCOMMANDS = ("run", "ingest", "detect", "report", "bisect", "db", "serve")

_BISECTION = ('{"id": 7, "status": "pending", "suite": "timm_models", "model": "lcnet_050", "device": "%s", '
              '"threads": %s, "metric": "speedup", "good_commit": "a1", "bad_commit": "b2"}')


@pytest.fixture(scope="module")
def command_lines(run_pipeline, extract_commands) -> list[tuple[str, list[str]]]:
    """(where, argv) for every perfdash invocation, from runs of the pipelines in several configurations."""
    records = {
        "Jenkinsfile (defaults)": run_pipeline(NIGHTLY, stdout={"api/v1/runs?since=": _RUNS}),
        "Jenkinsfile (extended, filtered)": run_pipeline(NIGHTLY, {"EXTENDED": True, "ONLY": "lcnet.*",
                                                                   "RUN_GPU": False, "SUITES": "timm_models"}),
        "bisect/Jenkinsfile (cpu)": run_pipeline(BISECT, {"REQUEST_ID": "7"},
                                                 {"api/v1/bisections/": _BISECTION % ("cpu", 1)}),
        "bisect/Jenkinsfile (cuda)": run_pipeline(BISECT, {"REQUEST_ID": "7"},
                                                  {"api/v1/bisections/": _BISECTION % ("cuda", '"all"')}),
    }
    found = [(where, args) for where, record in records.items() for script in record["sh"]
             for args in extract_commands(script)]
    compose = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        command = service.get("command")
        if command:
            argv = command if isinstance(command, list) else shlex.split(command)
            if argv[0] == "perfdash":
                found.append((f"docker/compose.yaml ({name})", argv[1:]))
    for dockerfile in sorted((REPO / "docker").glob("*.Dockerfile")):
        for line in dockerfile.read_text().splitlines():
            if line.startswith("CMD ["):
                argv = yaml.safe_load(line[4:])
                if argv[0] == "perfdash":
                    found.append((dockerfile.name, argv[1:]))
    return found


_RUNS = '[{"id": 5, "jenkins_url": "https://jenkins.example/job/perfdash/1/"}]'


def _registered() -> set[str]:
    parser = build_parser()
    for action in parser._actions:  # argparse keeps the subcommands only on this private action
        if action.dest == "command":
            return set(action.choices)
    return set()


@pytest.mark.parametrize("subcommand", SUBCOMMANDS)
def test_perfdash_command_lines_parse(subcommand: str, command_lines) -> None:
    lines = [(where, args) for where, args in command_lines if args[:1] == [subcommand]]
    assert lines, f"no `perfdash {subcommand}` found in the pipelines, compose file or images"
    if subcommand not in _registered():
        pytest.skip(f"`perfdash {subcommand}` is not registered in perfdash.cli.COMMAND_MODULES yet")
    parser = build_parser()
    for where, args in lines:
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            try:
                parsed = parser.parse_args(args)
            except SystemExit as exit_:
                pytest.fail(f"{where}: `perfdash {shlex.join(args)}` is rejected (exit {exit_.code}):\n"
                            f"{stderr.getvalue()}")
        assert callable(parsed.handler), f"{where}: perfdash {subcommand} sets no handler"


def test_extraction_sees_the_commands_it_should(command_lines) -> None:
    # Guards the extraction itself: a quoting change must not hide commands from the parser check above.
    joined = {" ".join(args) for _, args in command_lines}
    assert any(line.startswith("run --suite timm_models --device cpu") and "--filter lcnet.*" in line
               for line in joined)
    assert any(line.startswith("db upgrade") for line in joined)
    assert any(line.startswith("bisect --request-id 7 --url http") for line in joined)
