"""Confirmation before any issue: a model's performance regression is a *candidate* until re-measured.

Lifecycle of a finding's ``confirmation``:

- ``pending`` — a change point that says a model got slower (or its compile time or memory worse). It is on the
  dashboard and in the report's "suspected" list, with no GitHub issue. A ``confirm`` request (table
  bisection_requests, purpose ``confirm``) asks the bisect job to measure the last good and the first bad torch build
  (the change point's range widened by CONFIRM_MARGIN nights each way) side by side on a machine of the series,
  interleaved in a random balanced order, with repeats: the confirm step of perfbisect (``Bisector.confirm``, the
  sequential paired A/B of perfdash/ab.py: from 6 pairs to at most 160, "different" when the pairs' likelihood
  ratio favours "worse by the request's threshold" over "no change" by 1 / alpha; the threshold is 0.6 of the
  metric's minimum effect, bisections.CONFIRM_THRESHOLD_SHARE; at most 1 % false "different" per A/B). The request
  carries the series' own between-run noise (bisections.py, from service.queries.noise: the runs before the change),
  which the A/B pools into its noise scale and sizes its first look by (perfdash.ab.NoisePrior; 5 pairs or more
  with it). The job posts the verdict back over HTTP.
- ``confirmed`` — reproduced: the finding is a regression, its issue is filed and a bisection is requested.
- ``not_reproduced`` — closed with the A/B figures; it stays quiet (no issue, out of the report's open lists).
- ``error`` — the re-measurement could not be made (no commit range, the job failed): it stays in the suspected list
  with the reason, and no issue is filed on unconfirmed evidence.
- ``none`` — findings that need no confirmation: status changes (pass -> fail alerts at once), improvements, suite
  findings, environment and missing-data findings.

Many series, one night: why a per-series budget and no false-discovery-rate control over the night's family.
A configuration has about 500 series (150 models x 3-4 metrics). The change-point detector's budget is about one
false alert per 1,000 series-nights (bench/detection.py --alerts, 500 series over a year: 0.84 at 2 % Gaussian noise,
1.37 under Student-t(3), 4.09 with one-sided outliers); over a configuration that is 7.3, 10.2 and 49.9 false
regression candidates a month. Benjamini-Hochberg over a night's family would need p-values that are uniform under
the null and comparable across series; the detector's are neither (its thresholds depend on how many nights a level
has, spike guards and the series' noise estimate), and BH controls the share of false discoveries, not their number
a month, which is what a reader of the issues feels. So the per-series budget stays, and the second stage bounds
the family: a candidate becomes an issue only if an independent A/B re-measurement reproduces it. With no real
change its false confirmation rate is at most alpha = 0.01 from the Mann-Whitney test alone, and far lower in fact,
since the median change must also reach 0.6 of the minimum effect (3 % for a speedup) while the A/B's noise is the
within-run noise (bench/harness.py: speedup CV 0.58-0.76 %; ten runs a side put the median change's standard error
near 0.4 %). Bound: 50 false candidates x 0.01 = 0.5 false issues per configuration-month in the worst noise model;
measured (bench/detection.py --alerts, four noise models, 45 configuration-months): no false issue at all, where the
same candidates unconfirmed would have been 7-50 a month and the baselines file 1-235.
(The A/B's noise is not the within-run figure above: each of its samples is a full run, so its scale is the pairs'
own, pooled with the series' between-run noise the request carries; bench/README.md, "Issue 39 item 2".)
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from perfdash.bisection import BisectionIn, BisectionResult
from perfdash.metric_registry import followers_of, leader_of
from perfdash.verdicts import REGRESSION, BisectionVerdictName, ConfirmationState, FindingKind
from service.alerts.bisections import BisectionError, request_bisection
from service.models import BisectionRequest, ChangePointRow, Finding
from service.queries.detection import has_later_run, series_commits

logger = logging.getLogger(__name__)

PENDING, CONFIRMED, ERROR = ConfirmationState.PENDING, ConfirmationState.CONFIRMED, ConfirmationState.ERROR
CONFIRM_MARGIN = 2  # nights the A/B's range reaches beyond the change point's on either side (bench/alerts.py too)


def needs_confirmation(finding: Finding) -> bool:
    """A model's performance regression: the kind of finding noise makes, and an A/B can check."""
    return (finding.kind == FindingKind.PERFORMANCE and finding.category == REGRESSION.name
            and finding.series_id is not None and finding.change_point_id is not None)


def _sibling_key(finding: Finding) -> tuple[int | None, int | None]:
    cp = finding.change_point
    return finding.series_id, cp.run_id if cp is not None else None


def queue_confirmations(session: Session, findings: Sequence[Finding]) -> list[BisectionRequest]:
    """Mark new regression findings as candidates and queue one confirm request per model and change night.

    A slowdown moves a model's speedup and its latency on the same night: one A/B answers both, so the finding of a
    metric that follows another (perfdash.metric_registry: ``follows``) waits on its leader's request when the leader
    moved too (it has none of its own). Flushes.
    """
    candidates = [f for f in findings if needs_confirmation(f)]
    for f in candidates:
        f.confirmation = PENDING
    # A backfill (`perfdash detect --all` over imported history) finds years of old candidates: re-measuring builds
    # of long ago would flood the bisect agents for nothing anyone acts on. Only the newest night's are queued; the
    # others stay suspected, never filed (a bisection can still be asked for by hand).
    stale = [f for f in candidates if has_later_run(session, f.run)]
    for f in stale:
        f.confirmation_result = {"verdict": PENDING, "summary": "found over older nights: not re-measured"}
    candidates = [f for f in candidates if f not in stale]
    by_key: dict[tuple[int | None, int | None], list[Finding]] = {}
    for f in candidates:
        by_key.setdefault(_sibling_key(f), []).append(f)
    queued = []
    for group in by_key.values():
        moved = {f.metric for f in group}
        for f in group:
            if leader_of(f.metric) in moved:
                continue  # answered by its leader's A/B
            try:
                request, created = request_bisection(session, BisectionIn(finding_id=f.id), purpose="confirm")
                if created:
                    request.good_commit, request.bad_commit = _widened_range(session, f)
            except BisectionError as exc:
                for g in group:  # a follower waits on this A/B: it will not come
                    if g is f or leader_of(g.metric) == f.metric:
                        g.confirmation = ERROR
                        g.confirmation_result = {"verdict": ERROR, "summary": f"cannot be re-measured: {exc}"}
                continue
            queued.append(request)
    session.flush()
    return queued


def _widened_range(session: Session, finding: Finding) -> tuple[str, str]:
    """The candidate's commit range, CONFIRM_MARGIN nights wider on either side (the series' own nights).

    Under 2 % noise the change point's split is one or two nights off the night a 5 % step landed about one time in
    five (bench/alerts.py on 80 Gaussian series: 57 splits on the night, 9 one night early, 5 two nights early, 7 one
    late); an A/B of two builds on the same side of the step would then call a real regression not reproduced (with
    one night each way, the two-nights-early splits were 6 % of real 5 % steps lost). Widened by two, the good build
    is before the step and the bad one after it; the bisection searches the wider range (about one step more).
    """
    cp = finding.change_point
    assert cp is not None and finding.series_id is not None and finding.good_commit and finding.bad_commit
    runs = series_commits(session, finding.series_id)
    ids = [run_id for run_id, _ in runs]
    if cp.previous_run_id not in ids or cp.run_id not in ids:
        return finding.good_commit, finding.bad_commit
    last_good, first_bad = ids.index(cp.previous_run_id), ids.index(cp.run_id)
    good = runs[max(0, last_good - CONFIRM_MARGIN)][1]
    bad = runs[min(len(runs) - 1, first_bad + CONFIRM_MARGIN, ids.index(finding.run_id) if finding.run_id in ids
                   else len(runs) - 1)][1]
    return good, bad


def _followers(session: Session, finding: Finding) -> list[Finding]:
    """The finding and the candidates its A/B answers too (its followers: the latency of the same model on the same
    night)."""
    series_id, cp_run = _sibling_key(finding)
    followers = followers_of(finding.metric)
    if series_id is None or cp_run is None or not followers:
        return [finding]
    rows = session.scalars(sa.select(Finding).join(ChangePointRow, ChangePointRow.id == Finding.change_point_id)
                           .where(Finding.series_id == series_id, ChangePointRow.run_id == cp_run,
                                  Finding.metric.in_(followers), Finding.confirmation == PENDING)).unique().all()
    return [finding, *rows]


def _figures(result: BisectionResult) -> dict[str, Any]:
    good = [s for s in result.good_samples if isinstance(s, int | float)]
    bad = [s for s in result.bad_samples if isinstance(s, int | float)]
    figures: dict[str, Any] = {"verdict": result.verdict, "summary": result.summary,
                               "good_samples": good, "bad_samples": bad, "change_pct": result.change_pct,
                               "p_value": result.p_value, "jenkins_build_url": result.jenkins_build_url}
    if good and bad:
        figures["good_median"], figures["bad_median"] = statistics.median(good), statistics.median(bad)
    return figures


def record_confirmation(session: Session, request: BisectionRequest, result: BisectionResult) -> list[Finding]:
    """Apply a confirm request's verdict to its finding (and the findings it answers for); on ``confirmed`` a
    bisection is requested. Returns the findings now confirmed (whose issues the caller files). Flushes."""
    if request.finding_id is None:
        return []
    finding = session.get(Finding, request.finding_id)
    if finding is None:
        return []
    state = BisectionVerdictName(result.verdict).settles
    if request.purpose != "confirm":
        # A bisection asked for by hand before the candidate's own A/B: it confirms first too (perfbisect's
        # procedure), so its verdict decides a candidate that is still pending; it never re-opens a decided one.
        if finding.confirmation != PENDING or state == ERROR:
            return []
        for f in _followers(session, finding):
            f.confirmation, f.confirmation_result = state, _figures(result)
        session.flush()
        return []
    figures = _figures(result)
    changed = _followers(session, finding)
    for f in changed:
        f.confirmation, f.confirmation_result = state, figures
    session.flush()
    if state != CONFIRMED:
        logger.info("finding %s: %s (%s)", finding.id, state, result.summary)
        return []
    try:
        bisection, created = request_bisection(session, BisectionIn(finding_id=finding.id), purpose="bisect")
        if created:
            # The range and threshold the A/B reproduced it with: the bisection confirms again first, and at the full
            # minimum effect a real step of exactly that size would be "not reproduced" half the time.
            bisection.good_commit, bisection.bad_commit = request.good_commit, request.bad_commit
            bisection.threshold_pct = request.threshold_pct
    except BisectionError as exc:  # cannot happen for a finding that was re-measured, but never lose the verdict
        logger.warning("finding %s confirmed, but no bisection: %s", finding.id, exc)
    return changed
