"""Helpers for the deployment tests: Groovy/Java discovery, the pipeline stand-in, perfdash command extraction."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NIGHTLY = REPO / "Jenkinsfile"
BISECT = REPO / "bisect" / "Jenkinsfile"
STUB = Path(__file__).with_name("pipeline_stub.groovy")

# What `python -m perfdash.torch_spec resolve nightly` prints in the Plan stage, unless a test says otherwise.
RESOLVED_NIGHTLY = {"asked": "nightly", "spec": "2.15.0.dev20261125@" + "5" * 40, "version": "2.15.0.dev20261125",
                    "git_commit": "5" * 40, "day": "2026-11-25", "variants": ["cpu", "cu130"], "note": ""}

# What the shell would put in place of the variables the pipelines' sh steps use.
SHELL_SAMPLES = {
    "PERFDASH_TOKEN": "token-from-jenkins-credentials",
    "PERFDASH_TOKEN_FILE": "/workspace@tmp/secretFiles/1/token",
    "SERVICE_URL": "https://perfdash.internal:8443",
    "REQUEST_ID": "7",
    "REPO": "https://github.com/pytorch/pytorch",
    "OMP_NUM_THREADS": "8",
}


def _java_home() -> str | None:
    """Debian's groovy starts through /usr/lib/jvm/default-java; fall back to any installed JDK when that is missing."""
    installed = sorted(map(str, Path("/usr/lib/jvm").glob("*")))
    for candidate in (os.environ.get("JAVA_HOME"), "/usr/lib/jvm/default-java", *installed):
        if candidate and (Path(candidate) / "bin" / "java").exists():
            return candidate
    return None


@pytest.fixture(scope="session")
def groovy_env() -> dict[str, str]:
    if shutil.which("groovyc") is None or shutil.which("groovy") is None:
        pytest.skip("Debian's groovy is not installed (scripts/install-system-packages.sh installs it)")
    java_home = _java_home()
    if java_home is None:
        pytest.skip("no Java runtime under /usr/lib/jvm for groovy")
    return {**os.environ, "JAVA_HOME": java_home}


@pytest.fixture(scope="session")
def run_pipeline(groovy_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Callable[..., dict]:
    """Runs a Jenkinsfile in the DSL stand-in (pipeline_stub.groovy) with parameters and canned sh output."""
    directory = tmp_path_factory.mktemp("pipelines")
    cache: dict[str, dict] = {}

    def run(jenkinsfile: Path, params: dict | None = None, stdout: dict[str, str] | None = None) -> dict:
        # By default the service has no pending bisection and no run of this build.
        canned = {"bisections?status=pending": "[]", "api/v1/runs?since=": "[]",
                  "perfdash.torch_spec resolve": json.dumps(RESOLVED_NIGHTLY),
                  "date -u +%F": "2026-11-27",  # the night the build started (its Plan stage)
                  **(stdout or {})}
        scenario = json.dumps({"params": params or {}, "stdout": canned}, sort_keys=True)
        key = f"{jenkinsfile}:{scenario}"
        if key not in cache:
            path = directory / f"scenario-{len(cache)}.json"
            path.write_text(scenario)
            done = subprocess.run(["groovy", str(STUB), str(jenkinsfile), str(path)], env=groovy_env,
                                  capture_output=True, text=True, timeout=180)
            if done.returncode != 0:
                raise AssertionError(f"{jenkinsfile.name} failed in the stand-in:\n{done.stdout}\n{done.stderr}")
            cache[key] = json.loads(done.stdout.strip().splitlines()[-1])
        return cache[key]

    return run


def _expand_shell(line: str) -> str:
    line = re.sub(r"\$\(xeon-launch --count \w+\)", "8", line)

    def variable(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in SHELL_SAMPLES:
            raise AssertionError(f"shell variable ${name} in {line!r}: add a sample value to SHELL_SAMPLES")
        return SHELL_SAMPLES[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", variable, line)


def perfdash_commands(script: str) -> list[list[str]]:
    """Every `perfdash ...` invocation in a shell script, as the argument list perfdash's parser receives."""
    commands = []
    for raw in script.replace("\\\n", " ").splitlines():
        if "perfdash " not in raw or raw.lstrip().startswith("#"):
            continue
        lexer = shlex.shlex(_expand_shell(raw).replace("2>&1", " "), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
        for index, token in enumerate(tokens):
            if token != "perfdash":
                continue
            args = []
            for argument in tokens[index + 1:]:
                if set(argument) <= set("();<>|&"):
                    break
                args.append(argument)
            commands.append(args)
    return commands


@pytest.fixture(scope="session")
def extract_commands() -> Callable[[str], list[list[str]]]:
    return perfdash_commands


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
