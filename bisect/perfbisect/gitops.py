"""The few git operations a bisection needs, all read-only on the user's repository.

Commits are checked out into separate directories as ``git clone --shared`` clones (objects borrowed from the user's
repository through alternates, so a clone costs a checkout, not a copy of the history). Unlike ``git worktree add``
this registers nothing in the user's repository: a bisection killed with SIGKILL leaves no worktree entry, no
refs/bisect and no BISECT_LOG behind, and ``git worktree list`` stays what it was.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


class GitError(RuntimeError):
    pass


class CommitNotFound(GitError):
    """A commit of the request that neither the clone nor its remote has (after fetching)."""


@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    subject: str
    author: str
    date: str  # committer date, ISO 8601

    def to_json(self) -> dict[str, str]:
        return {"sha": self.sha, "subject": self.subject, "author": self.author, "date": self.date}


def _env() -> dict[str, str]:
    # A GIT_DIR or GIT_WORK_TREE inherited from a hook or a CI step would point every command at the wrong repository.
    return {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=_env(), check=False)
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def rev_parse(repo: Path, rev: str) -> str:
    return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()


def remote_url(repo: Path, remote: str = "origin") -> str | None:
    try:
        return git(repo, "remote", "get-url", remote).strip() or None
    except GitError:
        return None


def resolve_fetching(repo: Path, revs: list[str], fetch: bool = True, remote: str = "origin",
                     log: Callable[[str], None] = lambda _message: None) -> list[str]:
    """The full shas of ``revs``, after bringing the clone up to date with its remote: a clone cached on the node
    since an earlier night has none of the commits pushed after it. A sha that no branch carries yet is fetched by
    name. A rev found nowhere raises CommitNotFound naming the clone and the remote."""
    url = remote_url(repo, remote) if fetch else None
    if url is not None:
        log(f"fetching {remote} ({url})")
        git(repo, "fetch", "--quiet", "--tags", "--force", remote)
    out = []
    for rev in revs:
        sha = _resolve_or_none(repo, rev)
        if sha is None and url is not None:
            try:  # a commit no branch head has (yet): servers that allow it give it by name
                git(repo, "fetch", "--quiet", remote, rev)
            except GitError:
                pass
            sha = _resolve_or_none(repo, rev)
        if sha is None:
            where = (f"{repo} or its remote {url}" if url else
                     f"{repo} (no remote {remote!r} to fetch from)" if fetch else f"{repo} (not fetched: --no-fetch)")
            raise CommitNotFound(f"commit {rev} is not in {where}")
        out.append(sha)
    return out


def _resolve_or_none(repo: Path, rev: str) -> str | None:
    try:
        return rev_parse(repo, rev)
    except GitError:
        return None


def commits_between(repo: Path, good: str, bad: str) -> list[str]:
    """First-parent commits after ``good`` up to and including ``bad``, oldest first."""
    proc = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", good, bad], env=_env(), check=False,
                          capture_output=True)
    if proc.returncode != 0:
        raise GitError(f"{good[:10]} is not an ancestor of {bad[:10]}: nothing to bisect")
    return git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}").split()


def commit_info(repo: Path, sha: str) -> Commit:
    out = git(repo, "show", "-s", "--format=%H%x00%s%x00%an <%ae>%x00%cI", sha).rstrip("\n")
    full, subject, author, date = out.split("\x00")
    return Commit(full, subject, author, date)


def checkout(repo: Path, sha: str, dest: Path) -> Path:
    """A checkout of ``sha`` at ``dest`` (reused when it is already there)."""
    if (dest / ".git").exists():
        try:
            if git(dest, "rev-parse", "HEAD").strip() == sha:
                return dest
        except GitError:
            pass  # a broken leftover (an interrupted clone): made again below
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    git(repo, "clone", "--quiet", "--shared", "--no-checkout", str(repo.resolve()), str(tmp))
    git(tmp, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", sha)
    tmp.rename(dest)
    return dest
