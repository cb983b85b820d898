"""The Model page's generated-code parts (issue 28): a "code changed" marker per point of the history, the kernel
tables of two runs side by side, and the code diff between them, only when asked for (``?diff=1``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from service.queries.generated_code import code_diff, digests_by_run, stored_code
from service.queries.history import ModelPoint


def code_changed_marks(digests: dict[int, str], points: Sequence[ModelPoint]) -> list[bool | None]:
    """Per point: whether its generated code differs from the previous point's that has one (None: not recorded)."""
    marks: list[bool | None] = []
    previous: str | None = None
    for p in points:
        digest = digests.get(p.run_id)
        marks.append(None if digest is None or previous is None else digest != previous)
        previous = digest or previous
    return marks


@dataclass(frozen=True, slots=True)
class KernelRow:
    name: str
    a_us: float | None
    b_us: float | None
    a_share: float | None
    b_share: float | None
    code: str  # same | changed | added | removed | "" (a library kernel: no generated source)

    @property
    def change_pct(self) -> float | None:
        if not self.a_us or self.b_us is None:
            return None
        return 100.0 * (self.b_us / self.a_us - 1.0)


@dataclass(frozen=True, slots=True)
class CodePanel:
    runs: list[tuple[int, str]]  # (run id, label) of the runs with generated code, newest first
    a: int | None
    b: int | None
    a_digest: str | None
    b_digest: str | None
    rows: list[KernelRow]
    diff: str | None  # only when asked for
    diff_asked: bool


def _code_state(name: str, a: dict[str, str], b: dict[str, str]) -> str:
    if name in a and name in b:
        return "same" if a[name] == b[name] else "changed"
    return "added" if name in b else ("removed" if name in a else "")


def code_panel(session: Session, model: str, points: Sequence[ModelPoint], digests: dict[int, str],
               a: int | None, b: int | None, want_diff: bool) -> CodePanel | None:
    """Runs ``a`` (older) and ``b`` of the model compared; by default the two latest runs with generated code."""
    with_code = [p for p in points if p.run_id in digests]
    if not with_code:
        return None
    known = {p.run_id for p in with_code}
    b = b if b in known else with_code[-1].run_id
    a = a if a in known else (with_code[-2].run_id if len(with_code) > 1 else b)
    left, right = stored_code(session, a, model), stored_code(session, b, model)
    assert left is not None and right is not None
    times_a = {str(t[0]): (float(t[1]), float(t[2])) for t in left.kernel_times}
    times_b = {str(t[0]): (float(t[1]), float(t[2])) for t in right.kernel_times}
    kernels_a, kernels_b = dict(left.kernel_digests), dict(right.kernel_digests)
    names = list(dict.fromkeys([*times_b, *times_a, *kernels_b, *kernels_a]))
    rows = [KernelRow(n, times_a.get(n, (None, None))[0], times_b.get(n, (None, None))[0],
                      times_a.get(n, (None, None))[1], times_b.get(n, (None, None))[1],
                      _code_state(n, kernels_a, kernels_b)) for n in names]
    rows.sort(key=lambda r: -(r.b_us if r.b_us is not None else (r.a_us or 0.0)))
    labels = [(p.run_id, f"{p.night} run {p.run_id} ({(p.torch_git_commit or '?')[:10]})") for p in reversed(with_code)]
    return CodePanel(runs=labels, a=a, b=b, a_digest=left.digest, b_digest=right.digest, rows=rows,
                     diff=code_diff(session, a, b, model) if want_diff and a != b else None, diff_asked=want_diff)


def model_code(session: Session, model: str, points: Sequence[ModelPoint], a: int | None, b: int | None,
               want_diff: bool) -> tuple[list[bool | None], CodePanel | None]:
    digests = digests_by_run(session, [p.run_id for p in points], model)
    return code_changed_marks(digests, points), code_panel(session, model, points, digests, a, b, want_diff)
