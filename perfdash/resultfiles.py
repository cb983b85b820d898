"""Finding result files on disk: what `perfdash ingest` stores directly and what it posts to a service.

Standard library only: the runner image (no service extra) and the service share it.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

_PATTERNS = ("*.csv", "*_manifest.json", "*_samples.jsonl")


def collect(paths: list[str]) -> dict[Path, dict[str, bytes]]:
    """Result files grouped by directory (one directory may hold several runs; two directories may hold files of
    the same name, which are different runs)."""
    found: dict[Path, dict[str, bytes]] = defaultdict(dict)
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted({f for pattern in _PATTERNS for f in path.rglob(pattern) if f.is_file()})
        elif path.is_file():
            files = [path]
        else:
            raise FileNotFoundError(f"{raw}: no such file or directory")
        for file in files:
            found[file.parent.resolve()][file.name] = file.read_bytes()
    return dict(found)


def default_timestamp(directory: Path, files: dict[str, bytes]) -> datetime:
    """Without --timestamp or a manifest: when the CSVs were last written (the run's end), so re-ingesting the same
    files gives the same run key."""
    mtimes = [(directory / name).stat().st_mtime for name in files if name.endswith(".csv")]
    return datetime.fromtimestamp(int(max(mtimes)), UTC) if mtimes else datetime.now(UTC)
