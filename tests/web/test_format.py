"""Cell colours and URL hygiene of the pages (pure functions, no browser)."""

from __future__ import annotations

from perfdash.metric_registry import COMPILE_TIME, GEOMEAN, MEMORY, PASSRATE, Better
from perfdash.metrics import SuiteSummary
from service.web.format import SummaryCell, change_class, web_url


def summary(passed: int, total: int, geomean: float | None, compile_s: float | None = 10.0,
            memory: float | None = 1.1) -> SuiteSummary:
    return SuiteSummary(passed=passed, total=total, geomean_speedup=geomean, geomean_speedup_unclipped=geomean,
                        mean_compile_time_s=compile_s, mean_compression_ratio=memory)


def test_change_class_needs_more_than_five_percent_and_knows_the_direction() -> None:
    assert change_class(1.0, 1.05, Better.HIGHER, 0.05) == ""
    assert change_class(1.0, 1.06, Better.HIGHER, 0.05) == "better"
    assert change_class(1.0, 0.94, Better.HIGHER, 0.05) == "worse"
    assert change_class(10.0, 11.0, Better.LOWER, 0.05) == "worse"  # compile time went up
    assert change_class(None, 1.0, Better.HIGHER, 0.05) == "" and change_class(0.0, 1.0, Better.HIGHER, 0.05) == ""


def test_below_target_is_yellow_unless_it_also_got_worse() -> None:
    steady = SummaryCell.build(PASSRATE, summary(85, 100, 1.2), summary(86, 100, 1.2))
    assert steady.css == "below-target" and "below target 0.9" in steady.title
    dropped = SummaryCell.build(PASSRATE, summary(80, 100, 1.2), summary(95, 100, 1.2))
    assert dropped.css == "worse"
    slow = SummaryCell.build(GEOMEAN, summary(9, 10, 0.94), None)
    assert slow.css == "below-target" and slow.base_text is None and slow.new_text == "0.94x"
    memory = SummaryCell.build(MEMORY, summary(9, 10, 1.0, memory=0.85), summary(9, 10, 1.0, memory=0.8))
    assert memory.css == "below-target"  # +6 %, yet still under 0.9x: the low level is what needs attention
    assert SummaryCell.build(COMPILE_TIME, summary(9, 10, 1.0, compile_s=50.0),
                             summary(9, 10, 1.0, compile_s=40.0)).css == "worse"


def test_only_http_links_become_hrefs() -> None:
    assert web_url("https://jenkins.example.org/job/1/") == "https://jenkins.example.org/job/1/"
    assert web_url(" http://ci/x ") == "http://ci/x"
    assert web_url("javascript:alert(1)") is None
    assert web_url("JaVaScRiPt:alert(1)") is None
    assert web_url(None) is None and web_url("") is None
