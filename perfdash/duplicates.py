"""Repeated model rows in one result file: the last row wins, and the user is told which lines were dropped.

Real PyTorch result files hold a model 4-5 times: the harness appends a row per attempt (a model re-run with
``--only`` after a timeout, a retried CI shard, ``--diff-branch`` tags) and never rewrites earlier ones, so the last
row is the latest measurement. runner.py has no rule for this: it looks each name up with
``df[df["name"] == name]``, so a model written n times becomes n x n rows of its frame and its first accuracy row
gates them all — nothing worth mirroring. perfdash keeps exactly one row per model, the last, and reports every
repeated model with the lines it dropped (what they said included), so a ``pass 1.50x`` hidden behind a later
``fail_accuracy`` is visible, never silent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RepeatedModel:
    file: str
    name: str
    lines: tuple[int, ...]  # every line the model is on, in file order; the last one is kept
    dropped: tuple[str, ...]  # what each dropped line said, e.g. "pass" or "1.50x"
    kept: str
    unit: str = "line"  # "line" in a file; "results" index in a JSON upload

    @property
    def message(self) -> str:
        def at(line: int) -> str:
            return f"line {line}" if self.unit == "line" else f"{self.unit}[{line}]"

        dropped = ", ".join(f"{at(line)} ({what})" for line, what in zip(self.lines, self.dropped, strict=False))
        return (f"{self.file}: model {self.name!r} is written {len(self.lines)} times; kept the last "
                f"({at(self.lines[-1])}: {self.kept}), dropped {dropped}")


def find_repeats(file: str, rows: Iterable[tuple[int, str, str]], unit: str = "line") -> list[RepeatedModel]:
    """``rows``: (line, model name, what the row says) in file order. One entry per model written more than once."""
    seen: dict[str, list[tuple[int, str]]] = {}
    for line, name, what in rows:
        seen.setdefault(name, []).append((line, what))
    return [RepeatedModel(file=file, name=name, lines=tuple(line for line, _ in hits),
                          dropped=tuple(what for _, what in hits[:-1]), kept=hits[-1][1], unit=unit)
            for name, hits in seen.items() if len(hits) > 1]


def csv_repeats(data: bytes, file: str, kind: str) -> list[RepeatedModel]:
    """Repeated models of a result CSV that has already parsed (perfdash.contract), with their line numbers."""
    from perfdash.contract import _decode, _records  # the contract's own reader, so lines are counted the same way

    def what(record: dict[str, str]) -> str:
        if kind == "accuracy":
            return record.get("accuracy", "")
        speedup = record.get("speedup", "")
        try:
            return f"{float(speedup):.2f}x"
        except ValueError:
            return speedup

    return find_repeats(file, ((line, rec.get("name", ""), what(rec))
                               for line, rec in _records(_decode(data, file), file, kind)))
