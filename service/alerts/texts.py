"""What an issue and a culprit comment say on GitHub. Every value from data goes through service.github.safe (no
mention, link or markup of its own); service.alerts.issues decides when they are posted."""

from __future__ import annotations

from perfdash.axes import run_command, stored_axes
from perfdash.code_change import describe
from perfdash.verdicts import BisectionVerdictName, ConfirmationState, category
from service.github import safe
from service.models import BisectionRequest, Finding


def issue_title(finding: Finding) -> str:
    c = finding.configuration
    subject = finding.model or "suite geomean speedup"
    change = "" if finding.change_pct is None else f" {finding.change_pct:+.1f}%"
    return safe.title(f"[perfdash] {c.suite} {subject}: {finding.metric}{change} "
                      f"({c.backend_variant}, {c.dtype}, {c.mode}, {c.device}, {c.thread_config})")


def issue_body(finding: Finding, dashboard_url: str | None) -> str:
    """Every value from data goes through service.github.safe (no mention, link or markup of its own)."""
    c = finding.configuration
    cp = finding.change_point
    ab = finding.confirmation_result or {}
    md = safe.inline
    confirmed = []
    if finding.confirmation == ConfirmationState.CONFIRMED:
        confirmed = [f"| A/B re-measurement | {md(_ab_text(ab))} |"]
    lines = [
        f"perfdash found a {category(finding.category).label} of **{md(finding.metric)}** on **{md(c.suite)} / "
        f"{md(finding.model or '(suite)')}**.",
        "",
        "| | |",
        "|---|---|",
        f"| configuration | {md(c.backend_variant)}, compile mode {md(c.compile_mode)}, {md(c.dtype)}, {md(c.mode)}, "
        f"{md(c.device)}, {md(c.thread_config)} |",
        f"| machine | {md(c.machine.fingerprint)} |",
        f"| before | {finding.old_value:.4g} |" if finding.old_value is not None else "| before | - |",
        f"| after | {finding.new_value:.4g} |" if finding.new_value is not None else "| after | - |",
        f"| change | {finding.change_pct:+.1f}% |" if finding.change_pct is not None else "| change | - |",
        f"| p-value | {finding.p_value:.1e} |" if finding.p_value is not None else "| p-value | - |",
        f"| nights | {cp.n_before} before, {cp.n_after} after |" if cp else "| nights | - |",
        f"| commit range | {md(finding.good_commit or '?')}..{md(finding.bad_commit or '?')} |",
        *confirmed,
        "",
        md(describe(finding.code_change)) if finding.kind == "performance" else "",
        "",
        "Reproduce:",
        safe.code_block(_repro(finding)),
    ]
    if dashboard_url and finding.series_id:
        lines.append(f"Dashboard: {dashboard_url.rstrip('/')}/model/{finding.series_id}")
    elif dashboard_url:
        lines.append(f"Dashboard: {dashboard_url.rstrip('/')}/suite/{finding.run_id}")
    # "finding 12", not "finding #12": GitHub would link issue 12 of the repository
    lines += ["", f"perfdash finding {finding.id}. A bisection comments the culprit here when it names one."]
    return "\n".join(lines)


def _ab_text(ab: dict) -> str:
    """The confirmation's figures in one cell: medians of good and bad, the change and its p-value."""
    parts = []
    if ab.get("good_median") is not None and ab.get("bad_median") is not None:
        parts.append(f"good {ab['good_median']:.4g} ({len(ab.get('good_samples') or [])} runs), "
                     f"bad {ab['bad_median']:.4g} ({len(ab.get('bad_samples') or [])} runs)")
    if ab.get("change_pct") is not None:
        parts.append(f"{ab['change_pct']:+.1f}% worse")
    if ab.get("p_value") is not None:
        parts.append(f"p={ab['p_value']:.1e}")
    return "; ".join(parts) or str(ab.get("summary") or "reproduced")


def _repro(finding: Finding) -> str:
    return run_command(stored_axes(finding.configuration), finding.model)


def culprit_body(bisection: BisectionRequest, dashboard_url: str | None = None) -> str:
    """The verdict; the commit's subject and author, the summary and the URL are data (service.github.safe)."""
    result = bisection.result or {}
    culprit = result.get("culprit") or {}
    verdict = result.get("verdict", "?")
    md = safe.inline
    # "Bisection 4", not "Bisection #4": GitHub would link issue 4 of the repository
    lines = [f"Bisection {bisection.id} of {md(bisection.metric)} on {md(bisection.configuration.suite)} / "
             f"{md(bisection.model)} ({md(bisection.good_commit[:10])}..{md(bisection.bad_commit[:10])}): "
             f"**{md(verdict)}**."]
    if culprit:
        lines += ["", f"Culprit: {md(culprit.get('sha'))} — {md(culprit.get('subject', ''))}",
                  f"Author: {md(culprit.get('author', '?'))}, {md(culprit.get('date', '?'))}"]
    candidates = result.get("candidates") or []
    if verdict == BisectionVerdictName.CULPRIT_RANGE and candidates:
        # the commits before the culprit do not build: the verdict is the range, never one of its authors
        lines += ["", f"Range ({len(candidates)} commits; all but the last do not build): "
                      f"{md(candidates[0].get('sha', '?')[:10])}..{md(candidates[-1].get('sha', '?')[:10])}"]
    elif verdict == BisectionVerdictName.NOT_CONFIRMED:
        lines += ["", "The commit the search pointed at did not reproduce the regression against its parent: "
                      "nobody is named."]
    if result.get("summary"):
        lines += ["", md(result["summary"])]
    steps = result.get("steps") or []
    if steps:
        lines += ["", f"{len(steps)} steps."]
    if result.get("jenkins_build_url"):
        lines += ["", f"Jenkins: {md(result['jenkins_build_url'])}"]
    if dashboard_url:  # every A/B the verdict rests on, for a reader to check
        lines += ["", f"Bisection page: {dashboard_url.rstrip('/')}/bisections/{bisection.id}"]
    return "\n".join(lines)
