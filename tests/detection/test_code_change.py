"""Findings that say what the compiler changed (perfdash.code_change), on a real Postgres with runs stored
through ingest and real Inductor output code (tests/contract/data/inductor_output_cpu.txt)."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from perfdash.code_change import (
    CODE_CHANGED,
    CODE_UNCHANGED,
    CODE_UNKNOWN,
    CodeChange,
    CodeSide,
    compare_code,
)
from perfdash.contract import ModelSamples
from perfdash.generated_code import KernelTime, fingerprint, normalise, pack_source
from perfdash.verdicts import MACHINE_CHANGE
from service.alerts.issues import issue_finding_ids
from service.detection.detector import detect_run
from service.models import BisectionRequest, Finding
from service.queries.generated_code import code_diff, digests_by_run, same_code_gauge

OUTPUT = normalise((Path(__file__).parents[1] / "contract" / "data" / "inductor_output_cpu.txt").read_text())
# The first kernel with another vector width: what changing Inductor's cpp.simdlen does to it.
OUTPUT_NARROW = OUTPUT.replace("x1+=static_cast<int64_t>(16L)", "x1+=static_cast<int64_t>(8L)", 1)
COMMIT = "a" * 40


def _samples(name: str, code: str, first_kernel_us: float) -> ModelSamples:
    times = (KernelTime("cpp_fused_addmm_relu_0", first_kernel_us, 0.1, 1.0),
             KernelTime("cpp_fused_addmm_relu_1", 2.0, 0.02, 1.0))
    return ModelSamples(name, 8, (10.0, 10.1), (5.0, 5.1), code=fingerprint([code]), kernel_times=times,
                        code_source=pack_source([code]))


def _history(store_run, series_values, *, code_after: str, commit_after: str | None) -> list[int]:
    """26 nights of resnet18 and vit_small; resnet18's speedup drops 15 % from night 24 on."""
    a, b = series_values(1, 26), series_values(2, 26, level=2.0)
    runs = []
    for night in range(26):
        late = night >= 24
        code = code_after if late else OUTPUT
        runs.append(store_run(night, {"resnet18": a[night] * (0.85 if late else 1.0), "vit_small": b[night]},
                              commit=commit_after if late and commit_after else COMMIT,
                              samples=[_samples("resnet18", code, 12.0 if late and code is OUTPUT_NARROW else 6.0),
                                       _samples("vit_small", OUTPUT, 6.0)]))
    return runs


def _model_findings(session) -> list[Finding]:
    return list(session.scalars(sa.select(Finding).where(Finding.kind == "performance").order_by(Finding.id)).unique())


def test_same_code_same_environment_is_a_machine_change_with_no_issue(session, store_run, series_values) -> None:
    runs = _history(store_run, series_values, code_after=OUTPUT, commit_after=None)
    for run in runs:
        detect_run(session, run)
    found = _model_findings(session)
    assert {(f.model, f.metric, f.category) for f in found} == {
        ("resnet18", "speedup", MACHINE_CHANGE.name), ("resnet18", "abs_latency", MACHINE_CHANGE.name)}
    # the suite geomean moved with it: the same machine change
    suite = list(session.scalars(sa.select(Finding).where(Finding.kind == "summary")).unique())
    assert [f.category for f in suite] == [MACHINE_CHANGE.name]
    assert all(f.code_change["verdict"] == CODE_UNCHANGED and not f.code_change["environment_changed"]
               for f in found)
    assert all("machine change" in f.summary for f in found)
    # no confirmation (so no A/B, no bisection) and no issue; counted on the configuration's gauge
    assert session.scalar(sa.select(sa.func.count()).select_from(BisectionRequest)) == 0
    assert all(f.confirmation == "none" for f in found)
    assert issue_finding_ids(session, run_ids=runs) == []
    assert same_code_gauge(session) == {found[0].configuration_id: 1}  # one model, one night


def test_changed_code_names_the_kernel_that_changed_and_slowed(session, store_run, series_values) -> None:
    runs = _history(store_run, series_values, code_after=OUTPUT_NARROW, commit_after=None)
    for run in runs:
        detect_run(session, run)
    speedup = next(f for f in _model_findings(session) if f.metric == "speedup")
    assert speedup.category == "regression" and speedup.confirmation == "pending"
    change = CodeChange.from_json(speedup.code_change)
    assert change.verdict == CODE_CHANGED
    assert change.changed == ("cpp_fused_addmm_relu_0",) and change.added == change.removed == ()
    assert change.slowed == (("cpp_fused_addmm_relu_0", 6.0, 12.0),)
    assert "changed cpp_fused_addmm_relu_0" in speedup.summary
    # the model page's markers and the diff between the two runs the finding compares
    digests = digests_by_run(session, runs[22:], "resnet18")
    assert digests[runs[23]] != digests[runs[24]] and digests[runs[24]] == digests[runs[25]]
    diff = code_diff(session, runs[23], runs[24], "resnet18")
    assert "-            for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); " \
           "x1+=static_cast<int64_t>(16L))" in diff
    changed_lines = [line for line in diff.splitlines()[2:] if line[:1] in "+-"]
    assert len(changed_lines) == 2 and "x1+=static_cast<int64_t>(8L)" in changed_lines[1]


def test_same_code_under_another_torch_build_stays_a_regression(session, store_run, series_values) -> None:
    runs = _history(store_run, series_values, code_after=OUTPUT, commit_after="b" * 40)
    for run in runs:
        detect_run(session, run)
    speedup = next(f for f in _model_findings(session) if f.metric == "speedup")
    assert speedup.category == "regression"
    assert speedup.code_change == {"verdict": CODE_UNCHANGED, "environment_changed": True, "added": [],
                                   "removed": [], "changed": [], "slowed": []}
    assert "torch build or environment changed" in speedup.summary


def test_compare_code_lists_largest_first_and_unknown_without_both_sides() -> None:
    before = CodeSide("d1", {"k_small": "1", "k_big": "2", "gone": "3"}, {"k_small": 1.0, "k_big": 10.0, "gone": 4.0})
    after = CodeSide("d2", {"k_small": "9", "k_big": "8", "new": "7"}, {"k_small": 3.0, "k_big": 30.0, "new": 5.0})
    change = compare_code(before, after, environment_changed=False)
    assert change.changed == ("k_big", "k_small") and change.added == ("new",) and change.removed == ("gone",)
    assert change.slowed == (("k_big", 10.0, 30.0), ("k_small", 1.0, 3.0))
    assert change.named_kernels == ("k_big", "k_small", "new", "gone")
    assert not change.machine_change
    assert compare_code(None, after, False).verdict == CODE_UNKNOWN
    same = compare_code(before, CodeSide("d1", before.kernels, {"k_big": 10.5}), environment_changed=False)
    assert same.machine_change and same.slowed == ()


def test_the_report_and_the_issue_say_what_the_compiler_changed(session, store_run, series_values) -> None:
    from service.alerts.texts import issue_body
    from service.detection.report import build_report, render_report

    runs = _history(store_run, series_values, code_after=OUTPUT_NARROW, commit_after=None)
    for run in runs:
        detect_run(session, run)
    text = render_report(build_report(session, runs[25]))
    section = text.split("## What the compiler changed ##")[1].split("##")[0]
    assert "resnet18 speedup: Generated code changed: changed cpp_fused_addmm_relu_0" in section
    assert "Noise gauge: 0 time(s)" in text
    speedup = next(f for f in _model_findings(session) if f.metric == "speedup")
    assert "Generated code changed: changed cpp_fused_addmm_relu_0" in issue_body(speedup, None)


def test_the_report_lists_machine_changes_and_counts_them(session, store_run, series_values) -> None:
    from service.detection.report import build_report, render_report

    runs = _history(store_run, series_values, code_after=OUTPUT, commit_after=None)
    for run in runs:
        detect_run(session, run)
    text = render_report(build_report(session, runs[25]))
    same = text.split("## Same code, different time")[1].split("## Environment")[0]
    assert "| timm_models | resnet18 | speedup |" in same
    assert "Noise gauge: 1 time(s)" in same
    regressions = text.split("## Regressions ##")[1].split("##")[0]
    assert "resnet18" not in regressions
