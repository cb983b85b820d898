"""Detection's declared rules (service.detection.detector.RULES): detect_run runs each entry in order, files only the
categories an entry declares, and the report files a finding by its category's vocabulary entry, never by default."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from perfdash.verdicts import MODELS_DROPPED, REGRESSION, UnknownVerdict
from service.detection.detector import RULES, Rule, RunDetection, detect_run, models_dropped, run_rules
from service.detection.report import ReportContext, _place
from service.models import Finding, Run
from service.queries.order import previous_run


def test_every_rule_files_categories_of_the_vocabulary() -> None:
    assert [r.name for r in RULES][:2] == ["status", "environment"]  # the environment resets the change points' base
    assert len({r.name for r in RULES}) == len(RULES)


def test_a_rule_entry_and_its_function(session, store_run) -> None:
    # The example of docs/architecture.md: the models-dropped rule alone, as detect_run runs it.
    first = store_run(0, {"resnet18": 1.5, "vit_small": 2.0, "mobilenet": 1.2, "convnext": 1.1, "deit": 1.3})
    second = store_run(1, {"resnet18": 1.5, "vit_small": 2.0, "mobilenet": 1.2})
    rule = Rule("models_dropped", (MODELS_DROPPED,), models_dropped)
    run = session.get(Run, second)
    (finding,) = run_rules(RunDetection(session, run, previous_run(session, run), incremental=True), [rule])
    assert (finding.category, finding.old_value, finding.new_value) == ("models_dropped", 5.0, 3.0)
    assert run_rules(RunDetection(session, session.get(Run, first), None, incremental=True), [rule]) == []
    # detect_run files the same finding once: the key is stored already
    assert detect_run(session, second).count == 0
    assert session.scalar(sa.select(sa.func.count()).select_from(Finding)
                          .where(Finding.category == MODELS_DROPPED.name)) == 1


def test_a_rule_filing_an_undeclared_category_is_an_error(session, store_run) -> None:
    store_run(0, {"resnet18": 1.5, "vit_small": 2.0, "mobilenet": 1.2, "convnext": 1.1, "deit": 1.3})
    second = store_run(1, {"resnet18": 1.5})
    run = session.get(Run, second)
    mislabelled = Rule("models_dropped", (REGRESSION,), models_dropped)
    with pytest.raises(UnknownVerdict, match="models_dropped"):
        run_rules(RunDetection(session, run, previous_run(session, run), incremental=True), [mislabelled])


def test_the_report_refuses_an_unknown_category() -> None:
    context = ReportContext.__new__(ReportContext)  # only its lists matter here
    for name in ("regressions", "improvements", "new_failures", "fixed", "environment", "models_dropped"):
        setattr(context, name, [])
    _place(context, Finding(category="models_dropped", confirmation="none"))
    assert len(context.models_dropped) == 1 and context.regressions == []
    with pytest.raises(UnknownVerdict):
        _place(context, Finding(category="slower", confirmation="none"))
    assert context.regressions == []
