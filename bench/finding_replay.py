"""What happens to findings over a replayed history, dumped for a before/after comparison (issue 41: no behaviour
change when a finding's life moved to service/alerts/).

A throwaway Postgres (tests/pgcluster.py) and the GitHub stand-in (tests/github/standin.py); the app in process.
Two configurations (timm_models, huggingface) of ``MODELS`` models over ``--nights`` nights are posted through
``POST /api/v1/runs`` (detection as the post-ingest hook), with planted changes: speedup steps (their latency
follows), a compile-time and a memory step, new failures and fixes, an environment change, dropped models. After
each night every pending confirm and bisect request gets a result through ``POST /api/v1/bisections/{id}/result``,
its verdict taken in turn from the contract's verdicts (so every verdict is met), a bisection is asked for by hand
on some candidates, GitHub answers some posts with a 502, and ``perfdash report --post`` runs.

The output (``--output``, JSON) holds the stored findings, bisection requests with their results, the GitHub ledger,
the audit log, the issues and comments GitHub holds, and each report command's exit code: no ids of time, no
timestamps, GitHub's URLs without the stand-in's port. Run it on two trees and compare the files (``cmp``).

Run from the repository root: ``python -m bench.finding_replay --output replay.json``; for another tree's code,
``PYTHONPATH=TREE:TREE/bisect python bench/finding_replay.py`` from that tree.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

MODELS = [f"model_{i:02d}" for i in range(10)]
TOKEN = "replay-operator-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# Every verdict of the contract, in turn: a confirm request's and a bisection's results cycle through them.
CONFIRM_VERDICTS = ("confirmed", "not_reproduced", "confirmed", "error", "inconclusive", "culprit_found",
                    "commit_not_found", "confirmed")
BISECT_VERDICTS = ("culprit_found", "culprit_range", "not_confirmed", "inconclusive", "error", "commit_not_found")


def _files(night: int, suite: str, values: dict[str, tuple[float, float, float, str]],
           environment: dict[str, str]) -> list[tuple[str, tuple[str, bytes, str]]]:
    from perfdash.contract import AccuracyRow, PerformanceRow, csv_text
    from perfdash.manifest import MachineInfo, Manifest, RunConfig

    start = datetime(2026, 1, 1, 1, 0, tzinfo=UTC) + timedelta(days=night)
    manifest = Manifest(source="perfdash", config=RunConfig(suite=suite, backend="inductor"),
                        machine=MachineInfo(host="agent-1", device="cpu", cpu_model="Replay Xeon", cpu_count=2),
                        torch_version="2.14.1", torch_git_commit=f"c{night:04d}" + "0" * 36,
                        suite_versions={"timm": "1.0.31"}, start_time=start, end_time=start + timedelta(hours=1),
                        command=f"perfdash run --suite {suite}", environment=environment)
    perf, acc = [], []
    for name, (speedup, compile_s, ratio, status) in values.items():
        perf.append(PerformanceRow(dev="cpu", name=name, batch_size=8, speedup=speedup, abs_latency=10.0 / speedup,
                                   compilation_latency=compile_s, compression_ratio=ratio, eager_peak_mem=0.2,
                                   dynamo_peak_mem=0.2 / ratio))
        acc.append(AccuracyRow(dev="cpu", name=name, batch_size=8, accuracy=status))
    stem = manifest.config.key().stem
    out = {f"{stem}_performance.csv": csv_text(perf, "performance").encode(),
           f"{stem}_accuracy.csv": csv_text(acc, "accuracy").encode()}
    out[f"{stem}_manifest.json"] = manifest.model_dump_json().encode()
    return [("files", (name, data, "text/csv")) for name, data in out.items()]


def _night_values(rng: np.random.Generator, suite: str, night: int) -> dict[str, tuple[float, float, float, str]]:
    values = {}
    models = MODELS if not (suite == "huggingface" and night >= 34) else MODELS[:6]  # models dropped
    for i, name in enumerate(models):
        speedup = (1.0 + 0.1 * i) * float(np.exp(rng.normal(0, 0.015)))
        compile_s = 20.0 * float(np.exp(rng.normal(0, 0.01)))
        ratio = 1.2 * float(np.exp(rng.normal(0, 0.01)))
        status = "pass"
        if i in (0, 3, 7) and night >= 20 + i:  # slowdowns of 20 %: candidates (latency follows)
            speedup *= 0.8
        if i == 5 and night >= 24:
            compile_s *= 1.4
        if i == 6 and night >= 26:
            ratio *= 0.8
        if i == 2 and night >= 30:
            speedup *= 1.25  # an improvement
        if i == 8 and 18 <= night < 28:
            status = "fail_accuracy"  # a new failure, fixed later
        if i in (1, 4) and night >= 39 + i // 2:  # two more slowdowns, on nights 39 and 41
            speedup *= 0.75 if suite == "timm_models" else 1.0
        values[name] = (speedup, compile_s, ratio, status)
    if suite == "timm_models" and night >= 36:  # an environment change: everything 8 % slower with a new kernel
        values = {k: (s * 0.92, c, r, st) for k, (s, c, r, st) in values.items()}
    return values


def _result(verdict: str, request: dict[str, Any], turn: int) -> dict[str, Any]:
    good, bad = 1.5, 1.5 if verdict == "not_reproduced" else 1.2
    body: dict[str, Any] = {
        "verdict": verdict, "steps": [], "good_samples": [good] * 10, "bad_samples": [bad] * 10,
        "summary": f"replay {request['purpose']} {turn}: {verdict}", "jenkins_build_url": f"http://jenkins/b/{turn}/",
        "change_pct": round(100 * (1 - bad / good), 3), "p_value": 1e-5 if bad != good else 0.4}
    if verdict == "culprit_found":
        body["culprit"] = {"sha": "d" * 40, "subject": f"Change {turn}", "author": "dev@example", "date": "2026-02-01"}
    if verdict in ("culprit_range", "not_confirmed", "inconclusive"):
        body["candidates"] = [{"sha": f"{k}" * 40, "subject": f"commit {k}"} for k in "ef"]
    return body


def _answer_requests(client: Any, turns: dict[str, int]) -> None:
    for request in client.get("/api/v1/bisections?status=pending").json():
        purpose = request["purpose"]
        cycle = CONFIRM_VERDICTS if purpose == "confirm" else BISECT_VERDICTS
        turn = turns[purpose]
        turns[purpose] += 1
        done = client.post(f"/api/v1/bisections/{request['id']}/result", json=_result(cycle[turn % len(cycle)],
                                                                                        request, turn), headers=AUTH)
        assert done.status_code == 200, done.text


def _ask_by_hand(client: Any, night: int) -> None:
    """On some nights, a bisection asked for by hand on the newest pending candidate (it confirms first)."""
    if night % 7 != 3:
        return
    pending = [f for f in client.get("/api/v1/findings?kind=performance").json() if f["confirmation"] == "pending"]
    if pending:
        client.post("/api/v1/bisections", json={"finding_id": pending[-1]["id"]}, headers=AUTH)


def _dump(session: Any, github: Any, reports: list[int]) -> dict[str, Any]:
    import sqlalchemy as sa

    def rows(sql: str) -> list[dict[str, Any]]:
        return [dict(r._mapping) for r in session.execute(sa.text(sql))]

    return {
        "findings": rows("SELECT id, run_id, kind, category, metric, series_id, change_point_id, summary, "
                         "round(change_pct::numeric, 6) AS change_pct, good_commit, bad_commit, confirmation, "
                         "confirmation_result FROM findings ORDER BY id"),
        "bisections": rows("SELECT id, status, purpose, finding_id, configuration_id, model, metric, direction, "
                           "good_commit, bad_commit, threshold_pct, result FROM bisection_requests ORDER BY id"),
        "github_posts": rows("SELECT id, kind, key, repository, issue_number, comment_id, title, body, status, "
                             "attempts, last_error, html_url, finding_id FROM github_posts ORDER BY id"),
        "audit": rows("SELECT token_name, scope, action, target, detail, outcome FROM audit_log ORDER BY id"),
        "github_issues": {str(k): {"title": v["title"], "body": v["body"]} for k, v in
                          sorted(github.state.issues.items())},
        "github_comments": {str(k): {"issue": v.get("issue_number"), "body": v["body"]} for k, v in
                            sorted(github.state.comments.items())},
        "report_exit_codes": reports,
    }


def _load(name: str, path: str) -> Any:
    """A test helper by its path, as tests/conftest.py loads it (tests/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=46)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    from fastapi.testclient import TestClient

    from perfdash.cli import main as perfdash_main
    from service.app import create_app
    from service.db import make_engine
    from service.migrate import upgrade
    from service.settings import Settings

    temporary_postgres = _load("replay_pgcluster", "tests/pgcluster.py").temporary_postgres
    GitHubStandIn = _load("replay_github_standin", "tests/github/standin.py").GitHubStandIn

    with temporary_postgres() as url, GitHubStandIn() as github:
        upgrade(url)
        report_issue = github.add_issue("nightly reports")
        settings = Settings(database_url=url, github_token="ghp_replay", github_repository="perfdash/replay",
                            github_api_url=github.url, report_issue=report_issue, detection_workers=1,
                            dashboard_url="http://perfdash.example",
                            tokens=[{"name": "replay", "scopes": ["ingest", "bisect", "admin"], "token": TOKEN}])
        rng = {suite: np.random.default_rng(seed) for seed, suite in enumerate(("timm_models", "huggingface"))}
        turns = {"confirm": 0, "bisect": 0}
        reports = []
        with TestClient(create_app(settings)) as client:
            for night in range(args.nights):
                for suite in ("timm_models", "huggingface"):
                    env = {"kernel": "6.8.0-1" if suite == "timm_models" and night >= 36 else "6.1.0-18"}
                    response = client.post("/api/v1/runs", headers=AUTH,
                                           files=_files(night, suite, _night_values(rng[suite], suite, night), env))
                    assert response.status_code in (200, 201), response.text
                _ask_by_hand(client, night)
                if night % 5 == 2:  # GitHub has a bad moment: the next two posts get a 502
                    github.fail_next(github.canned(502), github.canned(502))
                _answer_requests(client, turns)
                reports.append(perfdash_main(["report", "--post"], settings=settings))
        engine = make_engine(url)
        from sqlalchemy.orm import Session

        with Session(engine) as session:
            dump = _dump(session, github, reports)
        engine.dispose()
    # the stand-in's port changes from run to run: GitHub's URLs (html_url, the audit's details) without it
    text = json.dumps(dump, indent=1, sort_keys=True, default=str).replace(github.url, "http://github.invalid")
    args.output.write_text(text, encoding="utf-8")
    print(f"{len(dump['findings'])} findings, {len(dump['bisections'])} bisection requests, "
          f"{len(dump['github_posts'])} GitHub posts, {len(dump['github_issues'])} issues, "
          f"{len(dump['github_comments'])} comments -> {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
