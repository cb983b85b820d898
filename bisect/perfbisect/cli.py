"""``perfdash bisect``: find the commit that caused a regression, robust to noise and broken builds.

Generic: ``--repo --good --bad --build CMD --measure CMD`` on any git repository (``--measure`` prints a number last,
or a status word such as pass/fail). PyTorch: ``--suite --model`` and ``perfdash run``'s configuration flags instead
of ``--measure``; torch is installed at each commit (nightly wheel, source build or ``--install-cmd``). From the
service: ``--request-id ID --url URL --token T`` fetches the request, bisects, posts the result back. Every
comparison is a paired A/B (perfdash/ab.py); the culprit is re-measured against its parent before it is named.

Exit status: 0 when the bisection finished (culprit found, culprit range, not reproduced, not confirmed or
inconclusive), 1 on an error, 130 when interrupted (the state is kept: rerun the same command with ``--resume``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from perfdash.ab import duet_halves
from perfdash.axes import AXIS, add_choice_flags, run_axis_values
from perfdash.metric_registry import BISECT_METRICS, Better, better_of
from perfdash.verdicts import BisectionVerdictName


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("bisect", help="find the commit that caused a regression (confirmed, noise-robust)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_argument_group("what to bisect")
    what.add_argument("--repo", type=Path, default=Path("."), help="the git repository (default: .)")
    what.add_argument("--good", metavar="REV", help="last good commit")
    what.add_argument("--bad", metavar="REV", help="first bad commit")
    what.add_argument("--no-fetch", dest="fetch", action="store_false",
                      help="do not fetch the repository's origin before resolving --good/--bad (default: fetch, so a "
                           "clone cached on the node reaches commits pushed after it was made)")
    what.add_argument("--build", metavar="CMD", help="shell command building the checkout (failure: commit skipped)")
    what.add_argument("--measure", metavar="CMD", help="shell command printing the value last (or pass/fail)")
    how = p.add_argument_group("statistics")
    how.add_argument("--repeats", type=int, default=6, metavar="N",
                     help="pairs at the confirmation's first look at most (6; fewer, down to 5, when the series' noise "
                          "is known; steps and the verification look after 2)")
    how.add_argument("--metric-direction", choices=[b.value for b in Better],
                     help="which way is better (default: lower; in PyTorch mode from the metric)")
    how.add_argument("--threshold", type=float, metavar="PCT", help="smallest regression to bisect, %% (default 5)")
    how.add_argument("--alpha", type=float, default=0.01,
                     help="bound on a false 'different' (and 'same') of each A/B over all its looks (0.01)")
    how.add_argument("--max-pairs", type=int, default=160, metavar="N",
                     help="pairs of an A/B before it answers 'unknown' (160)")
    how.add_argument("--series-noise", type=float, metavar="PCT",
                     help="the series' own between-run noise, %% (robust CV of its nightly results; a service "
                          "request carries it): pooled into the confirmation's noise scale and sizing its first look "
                          "(default: none, the confirmation learns the noise from its own pairs)")
    how.add_argument("--series-noise-runs", type=int, default=30, metavar="N",
                     help="the nightly runs --series-noise rests on (30): how much weight it gets")
    run = p.add_argument_group("running")
    run.add_argument("--json", type=Path, metavar="FILE", help="write the full result as JSON")
    run.add_argument("--cache-dir", type=Path, metavar="DIR",
                     help="checkouts and build results per commit (default $PERFBISECT_CACHE_DIR or "
                          "~/.cache/perfbisect, then <repo>-<hash>)")
    run.add_argument("--state", type=Path, metavar="FILE", help="resumable state (default in the cache dir)")
    run.add_argument("--resume", action="store_true", help="continue an interrupted bisection from its state")
    run.add_argument("--build-timeout", type=float, metavar="S", help="per build, seconds (timeout: skipped)")
    run.add_argument("--measure-timeout", type=float, metavar="S", help="per measurement, seconds")
    run.add_argument("--quiet", action="store_true", help="no progress lines")
    run.add_argument("--duet", action="store_true",
                     help="measure each A/B's two commits at the same time, one on each half of the CPUs (a "
                          "PyTorch-mode run gets as many threads as its half has CPUs): the machine's slow spells "
                          "then move both sides and cancel (bench/README.md, \"Duet\"); default one at a time")
    pt = p.add_argument_group("PyTorch mode (perfdash run's configuration)")
    pt.add_argument("--suite", help="torchbench, huggingface, timm_models, hf_vision")
    pt.add_argument("--model", help="the model (perfdash run --only)")
    pt.add_argument("--metric", choices=BISECT_METRICS, default="speedup")
    pt.add_argument("--backend", default=AXIS["backend"].default)
    add_choice_flags(pt, ("compile_mode", "device", "dtype", "mode"))
    pt.add_argument("--threads", type=int, metavar="N")
    pt.add_argument("--batch-size", type=int, metavar="N")
    pt.add_argument("--dynamic-shapes", action="store_true")
    pt.add_argument("--disable-cudagraphs", action="store_true", help="the inductor_no_cudagraphs series")
    pt.add_argument("--run-repeat", type=int, metavar="N", help="perfdash run --repeat (timed iterations)")
    pt.add_argument("--processes", type=int, metavar="K",
                    help="perfdash run --processes of every measurement (confirmation, steps, verification): K "
                         "worker processes per result (default: not passed, i.e. 1). K=3 costs about 2.1x a run: "
                         "worth it for abs_latency (its A/B variance 4x lower), not for the speedup (1.5x lower; "
                         "bench/README.md)")
    pt.add_argument("--models-file", type=Path, metavar="PATH", help="perfdash run --models-file")
    pt.add_argument("--install", choices=("auto", "nightly", "source"), default="auto",
                    help="how torch is installed at each commit (auto: nightly wheel, else source build)")
    pt.add_argument("--cuda-variant", default=os.environ.get("PERFDASH_CUDA_VARIANT") or None, metavar="TAG",
                    help="wheel variant of CUDA nightlies (default: $PERFDASH_CUDA_VARIANT, which the CUDA image "
                         "sets to its own, else perfbisect.pytorch.DEFAULT_CUDA_VARIANT)")
    pt.add_argument("--install-cmd", metavar="CMD", help="custom install command (installs into $PERFBISECT_SITE)")
    pt.add_argument("--nightly-ref", default="origin/nightly", metavar="REF",
                    help="PyTorch's nightly branch in --repo: commits with a nightly wheel are bisected first "
                         "(default origin/nightly; ignored when missing)")
    svc = p.add_argument_group("service")
    svc.add_argument("--request-id", type=int, metavar="ID", help="run the service's bisection request ID")
    svc.add_argument("--url", metavar="URL", help="the perfdash service")
    svc.add_argument("--token-file", metavar="PATH", type=Path, default=_env_path("PERFDASH_TOKEN_FILE"),
                     help="file holding a token of scope bisect (default $PERFDASH_TOKEN_FILE)")
    svc.add_argument("--token", metavar="T", default=os.environ.get("PERFDASH_TOKEN"),
                     help="token of scope bisect; shows in the process list: prefer --token-file "
                          "(default $PERFDASH_TOKEN)")
    svc.add_argument("--ca-bundle", metavar="PATH", type=Path,
                     help="PEM file of the CA that signed the service's certificate (default $PERFDASH_CA_BUNDLE, "
                          "else the system's trust store)")
    p.set_defaults(handler=handle)


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


def default_cache_dir(repo: Path) -> Path:
    """$PERFBISECT_CACHE_DIR (a persistent volume on the agents), else ~/.cache/perfbisect; one folder per repo."""
    digest = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:10]
    env = os.environ.get("PERFBISECT_CACHE_DIR")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "perfbisect"
    return base / f"{repo.resolve().name}-{digest}"


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def handle(args: argparse.Namespace) -> int:
    import signal

    from rich.console import Console

    # Jenkins stops a job (abort, timeout) with SIGTERM: end it like Ctrl-C, killing the running command's process
    # group and keeping the state for --resume, instead of dying with a measurement still running.
    signal.signal(signal.SIGTERM, _interrupt)
    console = Console(stderr=True)
    if args.request_id is not None:
        return _handle_request(args, console)
    try:
        report = _bisect(args, console)
    except KeyboardInterrupt:
        return 130
    except (ValueError, RuntimeError) as exc:
        console.print(f"[bold red]perfdash bisect:[/] {exc}")
        return 1
    return 1 if report.verdict == BisectionVerdictName.ERROR else 0


def _handle_request(args: argparse.Namespace, console: Any) -> int:
    from perfbisect.gitops import CommitNotFound
    from perfbisect.service import ServiceClient, ServiceError
    from perfdash.bisection import BisectionResult

    if not args.url:
        console.print("[bold red]perfdash bisect:[/] --request-id needs --url")
        return 1
    from perfdash.client_auth import TokenError, read_token_file, tls_verify

    try:
        token = args.token if args.token else read_token_file(args.token_file) if args.token_file else None
        verify = tls_verify(os.environ, args.ca_bundle)
    except TokenError as exc:
        console.print(f"[bold red]perfdash bisect:[/] {exc}")
        return 1
    with ServiceClient(args.url, token, verify=verify) as client:
        try:
            request = client.fetch(args.request_id, args.models_file)
        except ServiceError as exc:
            console.print(f"[bold red]perfdash bisect:[/] {exc}")
            return 1
        target = request.target
        args.good, args.bad = request.good_commit, request.bad_commit
        args.metric_direction, args.threshold = request.direction, request.threshold_pct
        if request.series_noise_cv is not None:
            args.series_noise, args.series_noise_runs = request.series_noise_cv * 100, request.series_noise_runs
        if not args.measure:  # a --measure CMD given by hand replaces perfdash run (e.g. a quicker reproducer)
            vars(args).update(run_axis_values(target), model=target.model, metric=target.metric)
        # A confirm request is a candidate's A/B re-measurement: the confirm step alone, no search.
        args.confirm_only = request.raw.get("purpose") == "confirm"
        console.print(f"request {request.id}{' (confirm only)' if args.confirm_only else ''}: {target.suite}/"
                      f"{target.model} {target.metric} {request.good_commit[:10]}..{request.bad_commit[:10]}")
        try:
            body = _bisect(args, console).to_service()
        except KeyboardInterrupt:
            return 130  # not posted: the request stays open and the job can be resumed
        except CommitNotFound as exc:
            console.print(f"[bold red]perfdash bisect:[/] {exc}")
            body = BisectionResult(verdict=BisectionVerdictName.COMMIT_NOT_FOUND, summary=f"nothing measured: {exc}",
                                   jenkins_build_url=_jenkins_url()).model_dump(mode="json")
        except (ValueError, RuntimeError) as exc:
            console.print(f"[bold red]perfdash bisect:[/] {exc}")
            body = BisectionResult(verdict=BisectionVerdictName.ERROR, summary=f"bisection failed: {exc}",
                                   jenkins_build_url=_jenkins_url()).model_dump(mode="json")
        try:
            client.post_result(request.id, body)
        except ServiceError as exc:
            console.print(f"[bold red]perfdash bisect:[/] could not post the result: {exc}")
            return 1
        console.print(f"posted the result of request {request.id} ({body['verdict']})")
        return 1 if BisectionVerdictName(body["verdict"]).measured_nothing else 0


def _jenkins_url() -> str | None:
    return os.environ.get("JENKINS_BUILD_URL") or os.environ.get("BUILD_URL") or None


def _bisect(args: argparse.Namespace, console: Any) -> Any:
    from perfbisect.commands import CommandOracle
    from perfbisect.gitops import commit_info, commits_between, resolve_fetching
    from perfbisect.procedure import Bisector
    from perfbisect.pytorch import DEFAULT_CUDA_VARIANT, TorchOracle, TorchTarget, nightly_commits
    from perfbisect.report import build_report
    from perfbisect.state import BisectState
    from perfbisect.stats import Policy

    if not args.good or not args.bad:
        raise ValueError("--good and --bad are required (or --request-id)")
    repo = args.repo.resolve()

    def log(message: str) -> None:
        if not args.quiet:
            console.print(f"[dim]bisect[/] {message}", highlight=False)

    good, bad = resolve_fetching(repo, [args.good, args.bad], fetch=args.fetch, log=log)
    commits = commits_between(repo, good, bad)
    if not commits:
        raise ValueError("bad is the good commit: nothing to bisect")
    cache_dir = (args.cache_dir or default_cache_dir(repo)).resolve()

    pytorch_mode = args.suite is not None or args.model is not None
    direction = args.metric_direction or (better_of(args.metric) if pytorch_mode else Better.LOWER)
    policy = Policy(direction=direction, threshold_pct=5.0 if args.threshold is None else args.threshold,
                    alpha=args.alpha, repeats=args.repeats, max_pairs=args.max_pairs,
                    series_cv=None if args.series_noise is None else args.series_noise / 100,
                    series_runs=args.series_noise_runs if args.series_noise is not None else 0)
    policy_identity = asdict(policy)
    if policy.series_cv is None:  # a state saved before requests carried the series' noise resumes as it was
        del policy_identity["series_cv"], policy_identity["series_runs"]
    identity: dict[str, Any] = {"repo": str(repo), "good": good, "bad": bad, "build": args.build,
                                "measure": args.measure, "policy": policy_identity}
    duet = duet_halves(sorted(os.sched_getaffinity(0))) if args.duet else None
    if duet is not None:
        identity["duet"] = [sorted(half) for half in duet]  # a duet's pairs are not a sequential A/B's: never mixed
        if args.threads is not None and args.threads > len(duet[0]):
            raise ValueError(f"--duet gives each side {len(duet[0])} CPU(s): --threads {args.threads} does not fit")
    oracle: CommandOracle
    preferred: frozenset[str] = frozenset()
    if pytorch_mode:
        if not args.suite or not args.model:
            raise ValueError("PyTorch mode needs both --suite and --model")
        target = TorchTarget(**run_axis_values(args), model=args.model, metric=args.metric, repeat=args.run_repeat,
                             processes=args.processes,
                             models_file=args.models_file.resolve() if args.models_file else None)
        target_identity = {k: str(v) for k, v in asdict(target).items()}
        if target.processes in (None, 1):  # one process is the default: a state saved before --processes resumes
            del target_identity["processes"]
        identity.update(target=target_identity, install=args.install, install_cmd=args.install_cmd)
        uses_nightlies = args.install in ("auto", "nightly") and not args.install_cmd and not args.build
        nightlies = nightly_commits(repo, args.nightly_ref) if uses_nightlies else {}
        preferred = frozenset(sha for sha in commits if sha in nightlies)
        if preferred:
            log(f"{len(preferred)} of the commits have a nightly wheel: bisecting among those first")
        oracle = TorchOracle(repo=repo, measure_cmd="", cache_dir=cache_dir, build_cmd=args.build,
                             build_timeout=args.build_timeout, measure_timeout=args.measure_timeout, log=log,
                             target=target, strategy="custom" if args.install_cmd else args.install,
                             install_cmd=args.install_cmd, nightlies=nightlies,
                             cuda_variant=args.cuda_variant or DEFAULT_CUDA_VARIANT)
    else:
        if not args.measure:
            raise ValueError("--measure CMD is required (or --suite and --model for PyTorch mode)")
        oracle = CommandOracle(repo=repo, measure_cmd=args.measure, cache_dir=cache_dir, build_cmd=args.build,
                               build_timeout=args.build_timeout, measure_timeout=args.measure_timeout, log=log)
    state_path = (args.state or cache_dir / f"state-{good[:12]}-{bad[:12]}.json").resolve()
    state = BisectState.open(state_path, identity, resume=args.resume)
    log(f"{len(commits)} commits after {good[:10]} up to {bad[:10]}; state in {state_path}")
    if duet is not None:
        log(f"duet: every A/B measures its two commits at once, on CPUs {sorted(duet[0])} and {sorted(duet[1])}")
    bisector = Bisector(oracle, policy, state, log, duet=duet)
    try:
        outcome = (bisector.confirm_only(good, bad) if getattr(args, "confirm_only", False)
                   else bisector.run(good, commits, preferred))
    except KeyboardInterrupt:
        console.print(f"[bold yellow]interrupted[/]: {sum(state.counts.values())} measurements so far are kept in "
                      f"{state_path}; rerun the same command with --resume to continue")
        raise
    report = build_report(outcome, lambda sha: commit_info(repo, sha), good, bad, policy, len(commits),
                          _jenkins_url(), processes=args.processes if pytorch_mode else None,
                          duet=duet)
    report.print(console)
    if args.json:
        report.write_json(args.json)
    return report
