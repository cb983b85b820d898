"""A forked worker's resident set counts the file pages its fork server had resident (runner.measure), as a process
that loaded them itself does: the CPU peak memory of PyTorch's one-model process."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import psutil
import pytest

from runner.measure import FORKED_FROM_ENV, process_rss_bytes, untouched_parent_pages

SIZE = 32 * 2**20


def _in_child(fn: object) -> str:
    """Run ``fn()`` (returning text) in a forked child and return its text."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write_fd, str(fn()).encode())  # type: ignore[operator]
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as handle:
        text = handle.read().decode()
    os.waitpid(pid, 0)
    return text


def test_file_pages_of_the_parent_count_until_the_child_touches_them(tmp_path: Path) -> None:
    path = tmp_path / "lib.bin"
    path.write_bytes(os.urandom(SIZE))
    with path.open("rb") as handle:
        mapped = mmap.mmap(handle.fileno(), SIZE, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    checksum = sum(mapped[i] for i in range(0, SIZE, mmap.PAGESIZE))  # fault every page in, as imports do
    parent = os.getpid()

    def child() -> str:
        os.environ.pop(FORKED_FROM_ENV, None)
        raw = process_rss_bytes()
        untouched = untouched_parent_pages(parent)
        os.environ[FORKED_FROM_ENV] = str(parent)
        counted = process_rss_bytes()
        assert sum(mapped[i] for i in range(0, SIZE, mmap.PAGESIZE)) == checksum  # now the child has them too
        after = untouched_parent_pages(parent)
        own_after = psutil.Process().memory_info().rss
        return f"{raw} {untouched} {counted} {after} {own_after}"

    raw, untouched, counted, after, own_after = map(int, _in_child(child).split())
    assert untouched >= SIZE * 0.9  # the fork left the mapping's pages out of the child's resident set...
    assert counted - raw >= SIZE * 0.9  # ...and the worker's figure puts them back
    assert after <= untouched - SIZE * 0.9  # once touched, they are the child's own and not counted twice
    assert own_after - raw >= SIZE * 0.9
    mapped.close()


def test_no_parent_no_addition(monkeypatch: pytest.MonkeyPatch) -> None:
    assert untouched_parent_pages(2**22 + 12345) == 0  # no such process: nothing added
    monkeypatch.delenv(FORKED_FROM_ENV, raising=False)
    assert abs(process_rss_bytes() - psutil.Process().memory_info().rss) < 8 * 2**20
    # A process the worker started inherits the variable, but its parent is not the server: nothing added (the
    # server's mappings are not its own, whatever their addresses).
    monkeypatch.setenv(FORKED_FROM_ENV, "1")
    assert os.getppid() != 1
    assert abs(process_rss_bytes() - psutil.Process().memory_info().rss) < 8 * 2**20
