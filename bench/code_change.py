"""What the compiler changed (issue 28): induced code changes, same code under load, and the cost of knowing.

Three parts, each on real runs of the real harness (``runner.api.run_suite``: worker processes, CPU inference with
TORCHINDUCTOR_FREEZING=1 as the nightly runs):

- ``induced``: each tiny model of tests/runner/data/tiny_real.toml (resnet10t, BertForMaskedLM, tiny_mlp) run with
  Inductor's defaults and with each of INDUCED_SETTINGS (``perfdash run --inductor-config``); for each pair the code
  comparison a finding makes (perfdash.code_change.compare_code on what the samples file carries) against
  the kernels that really changed, found independently: a line diff of the two stored sources, each changed line
  assigned to the kernel whose definition it falls in (wrapper lines count for no kernel). A case is a hit when every
  kernel that really changed is among those the finding names. Target: hits in >= 90 % of the cases.
- ``load``: a replay of real runs: RUNS_QUIET runs of two tiny models, then RUNS_LOADED runs with HOGS_PER_CORE
  busy loops per core, same torch, same code; ingested into a fresh SQLite database through the service's ingest,
  detection over every run as the post-ingest hook runs it. Prints the findings by category, the regression issues
  the publisher would file (target 0) and the "same code, different time" gauge.
- ``cost``: the nightly's three models (service/nightly.py DEFAULT_PICKS: torchbench lennard_jones, huggingface
  DistilBertForMaskedLM, timm lcnet_050, batch size 4) with a warm cache: the kernel profile plus the fingerprint as a
  share of the model's wall time outside compilation (target <= 10 %), and the bytes per result of the fingerprint
  and kernel table (target <= 50 kB) and of the packed source kept for the code diff.

- ``releases``: the same tiny models under two torch releases, the base one run by another interpreter
  (``--base-python``: a venv holding e.g. torch 2.13.0 and perfdash, the new one this interpreter's): per model,
  whether the generated code changed, the kernels changed, added and removed (the fingerprint's comparison), and the
  kernels whose self time moved by 10 % or more in either direction, beside the line diff's count of kernels that
  really changed (``really``) and the changed lines of the whole source (``lines``, the first few printed). A release
  pair is an environment change, so nothing here is a machine change.

    .venv/bin/python -m bench.code_change [induced] [load] [cost]     (default: these three)
    .venv/bin/python -m bench.code_change releases --base-python ~/.cache/perfdash/venv-torch2.13/bin/python
"""

from __future__ import annotations

import argparse
import difflib
import json
import multiprocessing
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "runner" / "data" / "tiny_real.toml"
TINY_MODELS = ("resnet10t", "BertForMaskedLM", "tiny_mlp")
# cpp.simdlen=1: no vector ISA is 1 bit wide, so the C++ kernels go scalar on any CPU (256, used before, is AVX2's
# own width and changed nothing on an AVX2-only machine)
INDUCED_SETTINGS = ("cpp.simdlen=1", "max_fusion_size=1")
LOAD_MODELS = ("resnet10t", "tiny_mlp")
RUNS_QUIET, RUNS_LOADED = 10, 5  # a shared machine: enough runs that a change point stands out of its noise
# busy loops per core in the loaded runs: the machine is shared, so "quiet" runs already meet other work; three per
# core make the loaded runs slower beyond that noise
HOGS_PER_CORE = 3
_KERNEL_DEF = re.compile(r"^(\w+) = async_compile\.\w+\(")


def _run(out: Path, models: str, *, suite: str = "huggingface", models_file: Path | None = TINY,
         model_list: str = "default", batch_size: int | None = None, repeat: int = 20,
         inductor_config: tuple[str, ...] = ()):  # -> RunReport
    from runner.api import run_suite
    from runner.inductor_overrides import ENV_NAME, encode
    from runner.options import RunOptions

    env = {ENV_NAME: encode(inductor_config)} if inductor_config else {}
    return run_suite(RunOptions(suite=suite, models_file=models_file, model_list=model_list, filters=(models,),
                                backend="inductor", performance=True, repeat=repeat, timeout_s=900.0,
                                batch_size=batch_size, output_dir=out, extra_env=env))


def _only(names: tuple[str, ...]) -> str:
    return "^(" + "|".join(re.escape(n) for n in names) + ")$"


def _side(samples):  # -> CodeSide
    from perfdash.code_change import CodeSide

    return CodeSide(samples.code.digest, samples.code.kernel_map, {k.name: k.self_us for k in samples.kernel_times})


def really_changed(old: str, new: str) -> set[str]:
    """Kernels with a changed line, by a line diff of the two sources (independent of the fingerprint's digests)."""

    def owners(lines: list[str]) -> list[str | None]:
        """Per line, the kernel whose definition it is in: from ``name = async_compile...(`` to the line that closes
        its source (starting with triple quotes); None for the wrapper's lines."""
        owner, out = None, []
        for line in lines:
            match = _KERNEL_DEF.match(line)
            owner = match.group(1) if match else owner
            out.append(owner)
            if owner and line.startswith(("'''", '"""')):
                owner = None
        return out

    a, b = old.splitlines(), new.splitlines()
    own_a, own_b = owners(a), owners(b)
    changed: set[str] = set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        changed.update(o for o in own_a[i1:i2] if o)
        changed.update(o for o in own_b[j1:j2] if o)
    return changed


def induced(workdir: Path) -> None:
    from perfdash.code_change import compare_code
    from perfdash.contract import read_samples
    from perfdash.generated_code import unpack_source

    def samples_of(report) -> dict:
        return {s.name: s for s in read_samples(report.paths.samples)}

    base = samples_of(_run(workdir / "induced-base", _only(TINY_MODELS)))
    hits = cases = 0
    print("induced code changes: tiny models, CPU inference, Inductor defaults -> one setting changed")
    print(f"{'model':<16} {'setting':<20} {'really changed':<44} {'finding names':<44} hit")
    for setting in INDUCED_SETTINGS:
        tag = re.sub(r"\W", "_", setting)
        other = samples_of(_run(workdir / f"induced-{tag}", _only(TINY_MODELS), inductor_config=(setting,)))
        for model in TINY_MODELS:
            a, b = base.get(model), other.get(model)
            if a is None or b is None or a.code is None or b.code is None:
                print(f"{model:<16} {setting:<20} (no code recorded: {a is None or a.code is None}, "
                      f"{b is None or b.code is None})")
                continue
            truth = really_changed(unpack_source(a.code_source), unpack_source(b.code_source))
            change = compare_code(_side(a), _side(b), environment_changed=True)
            named = set(change.named_kernels)
            if not truth and change.verdict == "unchanged":
                print(f"{model:<16} {setting:<20} {'(none: same code)':<44} {'(code unchanged)':<44} -")
                continue
            cases += 1
            hit = truth <= named
            hits += hit
            print(f"{model:<16} {setting:<20} {','.join(sorted(truth)) or '(wrapper only)':<44.44} "
                  f"{','.join(change.named_kernels) or '-':<44.44} {'yes' if hit else 'NO'}")
    print(f"induced cases whose finding names every kernel that really changed: {hits}/{cases}"
          + (f" = {hits / cases:.0%} (target >= 90 %)" if cases else ""))


def _samples_in(directory: Path) -> dict:
    from perfdash.contract import read_samples

    (path,) = directory.rglob("*_samples.jsonl")
    return {s.name: s for s in read_samples(path)}


def _torch_of(directory: Path) -> str:
    (path,) = directory.rglob("*_manifest.json")
    manifest = json.loads(path.read_text())
    return f"{manifest.get('torch_version')} ({str(manifest.get('torch_git_commit') or '')[:10]})"


def _changed_lines(old: str, new: str) -> list[str]:
    """The lines a line diff of the two sources changes, "-old" / "+new"."""
    out = []
    a, b = old.splitlines(), new.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out += [f"-{line.strip()}" for line in a[i1:i2]] + [f"+{line.strip()}" for line in b[j1:j2]]
    return out


def releases(workdir: Path, base_python: str | None) -> None:
    import subprocess

    from perfdash.code_change import compare_code, slowed_kernels
    from perfdash.generated_code import unpack_source

    if not base_python:
        raise SystemExit("releases: --base-python (the interpreter of the base release's environment) is needed")
    base_dir, new_dir = workdir / "release-base", workdir / "release-new"
    # The base release runs in its own interpreter: one process cannot hold two torch builds.
    subprocess.run([base_python, "-m", "bench.code_change", "--run-only", str(base_dir)], cwd=ROOT, check=True)
    _run(new_dir, _only(TINY_MODELS))
    base, new = _samples_in(base_dir), _samples_in(new_dir)
    print(f"the same tiny models under two torch releases: base {_torch_of(base_dir)}, new {_torch_of(new_dir)}")
    print(f"{'model':<16} {'code':<9} {'really':>6} {'changed':>7} {'added':>5} {'removed':>7} {'lines':>5}  "
          f"kernels slower / faster by >= 10 % (self us per step)")
    for model in TINY_MODELS:
        a, b = base.get(model), new.get(model)
        if a is None or b is None or a.code is None or b.code is None:
            print(f"{model:<16} (no code recorded on one side)")
            continue
        change = compare_code(_side(a), _side(b), environment_changed=True)
        old_source, new_source = unpack_source(a.code_source), unpack_source(b.code_source)
        truth = really_changed(old_source, new_source)
        wrapper = _changed_lines(old_source, new_source)
        before = {k.name: k.self_us for k in a.kernel_times}
        after = {k.name: k.self_us for k in b.kernel_times}
        slower = slowed_kernels(before, after)
        faster = slowed_kernels(after, before)
        moved = [f"+{k} {x:.3g}->{y:.3g}" for k, x, y in slower[:3]] + \
                [f"-{k} {y:.3g}->{x:.3g}" for k, x, y in faster[:3]]
        print(f"{model:<16} {change.verdict:<9} {len(truth):>6} {len(change.changed):>7} {len(change.added):>5} "
              f"{len(change.removed):>7} {len(wrapper):>5}  {'; '.join(moved) or '-'}")
        for line in wrapper[:4]:
            print(f"{'':<16} {line[:110]}")
        if change.named_kernels:
            print(f"{'':<16} named: {', '.join(change.named_kernels)}")


def _busy(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


def load(workdir: Path) -> None:
    import sqlalchemy as sa

    from service.alerts.issues import issue_finding_ids
    from service.db import make_engine, make_session_factory
    from service.detection.detector import detect_run
    from service.ingest.files import bundles_from_files
    from service.ingest.upload import ingest
    from service.migrate import upgrade
    from service.models import Finding
    from service.queries.generated_code import same_code_gauge

    url = f"sqlite:///{workdir / 'load.db'}"
    upgrade(url)
    engine = make_engine(url)
    digests: dict[str, set[str]] = {m: set() for m in LOAD_MODELS}
    medians: list[dict[str, float]] = []
    run_ids = []
    for index in range(RUNS_QUIET + RUNS_LOADED):
        loaded = index >= RUNS_QUIET
        hogs = []
        if loaded:  # busy loops for longer than the run takes; stopped after it
            hogs = [multiprocessing.Process(target=_busy, args=(time.time() + 900,), daemon=True)
                    for _ in range(HOGS_PER_CORE * multiprocessing.cpu_count())]
            for hog in hogs:
                hog.start()
        try:
            report = _run(workdir / f"load-{index}", _only(LOAD_MODELS))
        finally:
            for hog in hogs:
                hog.terminate()
                hog.join()
        medians.append({s.name: statistics.median(s.compiled_ms) for s in report.samples})
        for s in report.samples:
            if s.code is not None:
                digests[s.name].add(s.code.digest)
        files = {p.name: p.read_bytes() for p in report.paths.performance.parent.iterdir() if p.is_file()}
        with make_session_factory(engine)() as session:
            stored = ingest(session, bundles_from_files(files))
            session.commit()
            for run in stored.runs:
                detect_run(session, run.run_id, incremental=True)
                run_ids.append(run.run_id)
            session.commit()
    with make_session_factory(engine)() as session:
        categories = Counter(session.scalars(sa.select(Finding.category).where(Finding.kind == "performance")))
        issues = issue_finding_ids(session, run_ids=run_ids)
        gauge = same_code_gauge(session)
    engine.dispose()
    print(f"same code under load: {RUNS_QUIET} runs, then {RUNS_LOADED} with {HOGS_PER_CORE} busy loops per core, "
          f"models {', '.join(LOAD_MODELS)}")
    for model in LOAD_MODELS:
        quiet = statistics.median(m[model] for m in medians[:RUNS_QUIET] if model in m)
        busy = statistics.median(m[model] for m in medians[RUNS_QUIET:] if model in m)
        print(f"  {model}: compiled median {quiet:.3f} ms quiet, {busy:.3f} ms loaded ({busy / quiet - 1:+.0%}); "
              f"code digests seen: {len(digests[model])}")
    print(f"  model performance findings by category: {dict(categories) or 'none'}")
    print(f"  regression issues the publisher would file: {len(issues)} (target 0)")
    print(f"  same code, different time gauge: {sum(gauge.values())} event(s)")


def cost(workdir: Path) -> None:
    from service.nightly import DEFAULT_PICKS

    picks = [p for p in DEFAULT_PICKS if p.suite in ("torchbench", "huggingface", "timm_models")]
    print("cost: the nightly's three models, CPU inference, batch size 4, repeat 30, second run (warm caches)")
    print(f"{'model':<24} {'wall s':>7} {'compile s':>9} {'profile s':>9} {'fingerprint s':>13} {'share':>7} "
          f"{'code+kernels B':>14} {'source B':>9}")
    shares = []
    for pick in picks:
        for attempt in ("fill", "measured"):
            report = _run(workdir / f"cost-{pick.suite}-{attempt}", _only(pick.models), suite=pick.suite,
                          models_file=None, model_list=pick.model_list, batch_size=pick.batch_size, repeat=30)
        for outcome, samples in zip(report.outcomes, report.samples, strict=False):
            t = outcome.timings
            if outcome.status != "pass" or samples.code is None:
                print(f"{outcome.name:<24} failed or no code: {outcome.status} {outcome.error}")
                continue
            outside = t["worker_wall"] - t.get("compile", 0.0)
            spent = t.get("kernel_profile", 0.0) + t.get("fingerprint", 0.0)
            shares.append(spent / outside)
            line = json.loads(samples.to_json())
            kept = len(json.dumps({k: line[k] for k in ("code", "kernel_times") if k in line}))
            source = len(line.get("code_source", ""))
            print(f"{outcome.name:<24} {t['worker_wall']:>7.2f} {t.get('compile', 0.0):>9.2f} "
                  f"{t.get('kernel_profile', 0.0):>9.3f} {t.get('fingerprint', 0.0):>13.4f} {shares[-1]:>7.2%} "
                  f"{kept:>14} {source:>9}")
    if shares:
        print(f"fingerprint + kernel profile, share of a model's wall time outside compilation: max {max(shares):.2%}"
              f" (target <= 10 %)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="*", metavar="{induced,load,cost,releases}",
                        help="default: induced, load and cost")
    parser.add_argument("--base-python", help="releases: the interpreter of the base release's environment")
    parser.add_argument("--run-only", type=Path, help=argparse.SUPPRESS)  # releases: the base side's run
    args = parser.parse_args(argv)
    if args.run_only is not None:
        _run(args.run_only, _only(TINY_MODELS))
        return 0
    parts = args.parts or ["induced", "load", "cost"]
    if set(parts) - {"induced", "load", "cost", "releases"}:
        parser.error(f"unknown part in {parts}")
    actions = {"induced": induced, "load": load, "cost": cost,
               "releases": lambda workdir: releases(workdir, args.base_python)}
    with tempfile.TemporaryDirectory(prefix="code-change-") as tmp:
        for part in parts:
            start = time.perf_counter()
            actions[part](Path(tmp))
            print(f"({part}: {time.perf_counter() - start:.0f} s)\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
