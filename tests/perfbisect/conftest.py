"""Synthetic git histories for the bisection tests, made by the tests themselves.

A history is a real git repository whose commits change ``work.py`` (the "function" whose cost is measured),
optionally break the build, or change nothing that matters. Commit dates are fixed, so shas (and with them the
seeded noise of the measure script) are the same on every run: the tests are deterministic, the statistics real.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# Shell and awk rather than Python: the machine is shared and a Python start costs up to a second under load.
BUILD_SH = """\
if [ -e BROKEN ]; then echo "error: this commit does not compile" >&2; exit 1; fi
mkdir -p build && sed -n 's/^ITERATIONS = //p' work.py > build/cost.txt
"""

# The measured "time" of the function: its cost from the build product, with seeded Gaussian noise (2 % unless
# NOISE says otherwise), the seed being the commit and the measurement index: deterministic, different per run.
MEASURE_SH = """\
cost=$(cat build/cost.txt) || exit 1
seed=$(printf '%s-%s' "$PERFBISECT_SHA" "$PERFBISECT_REPEAT" | cksum | cut -d' ' -f1)
awk -v c="$cost" -v s="$seed" -v n="${NOISE:-0.02}" 'BEGIN { srand(s % 2147483647); u = rand(); v = rand();
  if (u < 1e-12) u = 1e-12; z = sqrt(-2 * log(u)) * cos(6.283185307 * v);
  printf "work() took %.3f ms\\n", c * (1 + n * z) }'
"""


@dataclass(frozen=True, slots=True)
class History:
    repo: Path
    shas: list[str]  # shas[0] is the good commit, shas[-1] the bad one

    def index(self, sha: str) -> int:
        return self.shas.index(sha)


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


def _commit_env(number: int) -> dict[str, str]:
    stamp = f"2026-01-01T00:{number // 60:02d}:{number % 60:02d}+00:00"
    return {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_NAME": "Ada Dev",
            "GIT_AUTHOR_EMAIL": "ada@example.com", "GIT_COMMITTER_NAME": "Ada Dev",
            "GIT_COMMITTER_EMAIL": "ada@example.com"}


Change = Callable[[Path], str]  # edits the tree, returns the commit subject


def make_history(root: Path, changes: list[Change], files: dict[str, str]) -> History:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    for name, text in files.items():
        (repo / name).write_text(text)
    shas = []
    for number, change in enumerate([lambda _r: "initial: the good commit", *changes]):
        subject = change(repo)
        git(repo, "add", "-A")
        git(repo, "commit", "--quiet", "--allow-empty", "-m", subject, env=_commit_env(number))
        shas.append(git(repo, "rev-parse", "HEAD").strip())
    return History(repo, shas)


def set_iterations(value: int) -> Change:
    def change(repo: Path) -> str:
        (repo / "work.py").write_text(f"ITERATIONS = {value}\n\ndef work():\n    return sum(range(ITERATIONS))\n")
        return f"work: {value} iterations"
    return change


def touch(number: int) -> Change:
    def change(repo: Path) -> str:
        (repo / f"notes_{number}.txt").write_text(f"note {number}\n")
        return f"docs: note {number}"
    return change


def break_build(repo: Path) -> str:
    (repo / "BROKEN").write_text("syntax error\n")
    return "refactor: half-done change that does not build"


def fix_build(repo: Path) -> str:
    (repo / "BROKEN").unlink()
    return "fix the build"


@pytest.fixture
def perf_history(tmp_path: Path) -> History:
    """30 commits after good; commit 17 makes work() 10 % slower; commit 15 (the first midpoint) does not build."""
    changes: list[Change] = []
    for number in range(1, 31):
        if number == 17:
            changes.append(set_iterations(1100))
        elif number == 15:
            changes.append(break_build)
        elif number == 16:
            changes.append(fix_build)
        else:
            changes.append(touch(number))
    files = {"build.sh": BUILD_SH, "measure.sh": MEASURE_SH,
             "work.py": "ITERATIONS = 1000\n\ndef work():\n    return sum(range(ITERATIONS))\n"}
    return make_history(tmp_path, changes, files)


def repo_snapshot(repo: Path) -> dict[str, str]:
    """Everything a bisection must leave as it was."""
    git_dir = Path(git(repo, "rev-parse", "--absolute-git-dir").strip())
    return {
        "HEAD": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "symbolic-ref", "-q", "HEAD"),
        "status": git(repo, "status", "--porcelain=v2", "--branch", "--untracked-files=all"),
        "refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "stash": git(repo, "stash", "list"),
        "worktrees": git(repo, "worktree", "list", "--porcelain"),
        "diff": git(repo, "diff"),
        "staged": git(repo, "diff", "--cached"),
        "git_dir_entries": " ".join(sorted(p.name for p in git_dir.iterdir()
                                           if p.name.startswith(("BISECT", "worktrees")))),
    }


def dirty(repo: Path) -> None:
    """Make the user's checkout look like a working day: a stash, staged and unstaged edits, an untracked file."""
    (repo / "notes_1.txt").write_text("stashed edit\n")
    git(repo, "stash", "push", "--quiet", "-m", "work in progress")
    (repo / "notes_2.txt").write_text("staged edit\n")
    git(repo, "add", "notes_2.txt")
    (repo / "notes_3.txt").write_text("unstaged edit\n")
    (repo / "scratch.txt").write_text("untracked\n")


def perfdash(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "perfdash.cli", *args], cwd=cwd, capture_output=True, text=True,
                          check=False, timeout=300)


@pytest.fixture
def cache_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "cache"


@dataclass(frozen=True, slots=True)
class Synth:
    """The helpers above, for test modules (with --import-mode=importlib they cannot import conftest)."""

    make_history: Callable[..., History] = make_history
    set_iterations: Callable[[int], Change] = set_iterations
    touch: Callable[[int], Change] = touch
    break_build: Change = break_build
    fix_build: Change = fix_build
    snapshot: Callable[[Path], dict[str, str]] = repo_snapshot
    dirty: Callable[[Path], None] = dirty
    perfdash: Callable[..., subprocess.CompletedProcess[str]] = perfdash
    git: Callable[..., str] = git
    build_sh: str = BUILD_SH
    measure_sh: str = MEASURE_SH


@pytest.fixture
def synth() -> Synth:
    return Synth()
