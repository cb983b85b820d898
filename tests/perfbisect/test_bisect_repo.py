"""``perfdash bisect`` end to end on synthetic git histories (real git, real subprocesses, seeded noise)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from perfdash.cli import main

MEASURE = "sh measure.sh"
BUILD = "sh build.sh"


def _bisect(capsys, history, cache_dir: Path, tmp_path: Path, *extra: str) -> tuple[Ran, dict]:
    """``perfdash bisect`` in this process (a Python start costs up to a second on this shared machine)."""
    out = tmp_path / "result.json"
    code = main(["bisect", "--repo", str(history.repo), "--good", history.shas[0], "--bad", history.shas[-1],
                 "--build", BUILD, "--measure", MEASURE, "--cache-dir", str(cache_dir), "--json", str(out), *extra])
    ran = Ran(code, capsys.readouterr().err)
    assert out.exists(), ran.stderr
    return ran, json.loads(out.read_text())


@dataclass(frozen=True)
class Ran:
    returncode: int
    stderr: str


def test_finds_the_slower_commit_skips_the_broken_one_and_leaves_the_repo_alone(synth, perf_history, cache_dir,
                                                                                tmp_path, capsys):
    synth.dirty(perf_history.repo)
    before = synth.snapshot(perf_history.repo)

    proc, result = _bisect(capsys, perf_history, cache_dir, tmp_path)

    assert proc.returncode == 0, proc.stderr
    assert result["verdict"] == "culprit_found"
    culprit = perf_history.shas[17]
    assert result["culprit"] == {"sha": culprit, "subject": "work: 1100 iterations",
                                 "author": "Ada Dev <ada@example.com>", "date": "2026-01-01T00:00:17+00:00"}
    # The broken commit was probed (it is the first midpoint), skipped, and never blamed.
    broken = perf_history.shas[15]
    skipped = [s for s in result["steps"] if s["decision"] == "skip"]
    assert [s["sha"] for s in skipped] == [broken]
    assert "does not compile" in skipped[0]["reason"]
    # Every step that was measured has its samples and a decision consistent with the truth.
    for step in result["steps"]:
        if step["decision"] != "skip":
            assert len(step["samples"]) >= 2  # a step's first look (it pools the confirmation's noise)
            expected = "bad" if perf_history.index(step["sha"]) >= 17 else "good"
            assert step["decision"] == expected, step
    assert len(result["good_samples"]) >= 5 and len(result["bad_samples"]) >= 5
    assert 7 <= result["change_pct"] <= 13  # the regression is 10 %
    # The readable summary names the culprit too.
    assert culprit[:10] in proc.stderr and "work: 1100 iterations" in proc.stderr
    assert synth.snapshot(perf_history.repo) == before


def test_build_results_are_cached_per_commit(perf_history, cache_dir, tmp_path, capsys):
    _bisect(capsys, perf_history, cache_dir, tmp_path)
    broken = perf_history.shas[15]
    record = json.loads((cache_dir / broken / "build.json").read_text())
    assert record["ok"] is False and "does not compile" in record["reason"]
    good = json.loads((cache_dir / perf_history.shas[0] / "build.json").read_text())
    assert good["ok"] is True and (cache_dir / perf_history.shas[0] / "src" / "build" / "cost.txt").exists()

    # A second bisection with a build that would now fail everywhere reuses the cached results instead.
    proc, result = _bisect(capsys, perf_history, cache_dir, tmp_path, "--build", "exit 3",
                           "--state", str(tmp_path / "second.json"))
    assert result["verdict"] == "culprit_found" and result["culprit"]["sha"] == perf_history.shas[17], proc.stderr


def test_regression_that_does_not_reproduce_is_not_bisected(synth, tmp_path, cache_dir, capsys):
    # 0.5 % slower: real but below the 5 % threshold, and hidden in 2 % noise.
    changes = [synth.touch(n) for n in range(1, 10)] + [synth.set_iterations(1005)] + \
              [synth.touch(n) for n in range(11, 20)]
    history = synth.make_history(tmp_path, changes, {"build.sh": synth.build_sh, "measure.sh": synth.measure_sh,
                                                     "work.py": "ITERATIONS = 1000\n"})
    proc, result = _bisect(capsys, history, cache_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert result["verdict"] == "not_reproduced"
    assert result["culprit"] is None and result["steps"] == []
    assert "not reproduced" in result["summary"]


def test_interrupted_bisection_resumes_from_its_state(synth, perf_history, cache_dir, tmp_path):
    state = tmp_path / "state.json"
    out = tmp_path / "result.json"
    # Measurements of the synthetic work take milliseconds, so a whole bisection can end between two polls: a gate
    # holds every measurement of a step commit (not the good or bad one) while it exists, so the interrupt is sure to
    # land after the confirmation, inside the first step.
    gate = tmp_path / "gate"
    gate.touch()
    gated = tmp_path / "gated_measure.sh"
    gated.write_text(f'case "$PERFBISECT_SHA" in {perf_history.shas[0]}|{perf_history.shas[-1]}) ;;\n'
                     f'*) while [ -e "{gate}" ]; do sleep 0.05; done ;;\nesac\nexec {MEASURE}\n')
    args = [sys.executable, "-m", "perfdash.cli", "bisect", "--repo", str(perf_history.repo), "--good",
            perf_history.shas[0], "--bad", perf_history.shas[-1], "--build", BUILD, "--measure", f"sh {gated}",
            "--cache-dir", str(cache_dir), "--state", str(state), "--json", str(out)]
    before = synth.snapshot(perf_history.repo)
    # Ctrl-C's default action in the child even when this test runs as a background job of a non-interactive shell
    # (`make test &`), which starts with SIGINT ignored; Python keeps an inherited SIG_IGN and never sees the signal.
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until the confirmation is done (the first step's A/B has begun)
        if state.exists():
            try:
                if any(key.startswith("step:") for key in json.loads(state.read_text())["samples"]):
                    break
            except json.JSONDecodeError:
                pass  # caught between write and rename of an older version: try again
        time.sleep(0.05)
    time.sleep(0.5)  # into the gated step (its commit's side waits at the gate)
    assert proc.poll() is None, "the bisection ended before the interrupt"
    os.kill(proc.pid, signal.SIGINT)
    gate.unlink()
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr
    assert not out.exists()
    assert synth.snapshot(perf_history.repo) == before  # nothing stuck mid-bisect
    measured = json.loads(state.read_text())["samples"]

    resumed = subprocess.run([*args, "--resume"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(out.read_text())
    assert result["verdict"] == "culprit_found" and result["culprit"]["sha"] == perf_history.shas[17]
    # The samples taken before the interruption were kept, not measured again.
    confirmed = measured[f"confirm:{perf_history.shas[0]}:{perf_history.shas[-1]}:A"]
    assert confirmed and result["good_samples"][: len(confirmed)] == confirmed
    records = [result["confirmation"], result["verification"], *(s["ab"] for s in result["steps"] if s["ab"])]
    total = sum(len(r["samples_a"]) + len(r["samples_b"]) for r in records)
    total -= 2 * result["verification"]["carried_pairs"]  # a verification that continues a step repeats its pairs
    assert result["measurements"] == total - sum(len(v) for v in measured.values())


def test_resume_refuses_the_state_of_another_bisection(perf_history, cache_dir, tmp_path, capsys):
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"version": 2, "identity": {"repo": "elsewhere"}, "samples": {}, "skipped": {}}))
    code = main(["bisect", "--repo", str(perf_history.repo), "--good", perf_history.shas[0], "--bad",
                 perf_history.shas[-1], "--measure", MEASURE, "--state", str(state), "--resume", "--cache-dir",
                 str(cache_dir)])
    assert code == 1
    assert "different bisection" in capsys.readouterr().err


def test_bad_not_after_good_is_an_error(perf_history, cache_dir, capsys):
    code = main(["bisect", "--repo", str(perf_history.repo), "--good", perf_history.shas[5], "--bad",
                 perf_history.shas[2], "--measure", MEASURE, "--cache-dir", str(cache_dir)])
    assert code == 1
    assert "not an ancestor" in capsys.readouterr().err


def test_a_hanging_measurement_times_out_and_its_process_tree_is_killed(perf_history, tmp_path):
    from perfbisect.commands import CommandOracle
    from perfbisect.procedure import MeasureFailed

    pid_file = tmp_path / "child.pid"
    oracle = CommandOracle(repo=perf_history.repo, cache_dir=tmp_path / "cache", measure_timeout=1.0,
                           measure_cmd=f"sleep 60 & echo $! > {pid_file}; wait")
    started = time.monotonic()
    try:
        oracle.measure(perf_history.shas[0], 0)
    except MeasureFailed as exc:
        assert exc.status == "timeout"
    else:
        raise AssertionError("a hanging measurement must time out")
    assert time.monotonic() - started < 30
    child = int(pid_file.read_text())
    time.sleep(0.2)
    try:
        os.kill(child, 0)
        alive = Path(f"/proc/{child}/stat").read_text().split()[2] != "Z"
    except ProcessLookupError:
        alive = False
    assert not alive, "the command's children must be killed with it"
