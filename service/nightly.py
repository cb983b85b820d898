"""`perfdash nightly`: the whole nightly on one machine — what `make run` does.

Benchmark a few small models of each suite on this CPU, ingest them into DATABASE_URL (the SQLite file perfdash.db by
default), detect regressions, write the report markdown, then serve the dashboard. Every step is a real perfdash
subcommand called through ``perfdash.cli.main``; this module only plans and sequences them.

Runs are stored with their real start and end times. A second `make run` on the same day is a second run of the
same night: both are points of every history, the summary shows the later one and compares it with the earlier
(service.queries.order).
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.settings import Settings

DEFAULT_SUITES = ("torchbench", "huggingface", "timm_models")


@dataclass(frozen=True, slots=True)
class SuitePick:
    """The models of one suite the quick nightly runs, at one small batch size (the suite's own sizes take minutes
    per model on a laptop)."""

    suite: str
    models: tuple[str, ...]
    batch_size: int
    model_list: str = "default"  # the runner's --model-list the models are picked from


# One small member of each suite's list (names as the runner selects them). Measured on two cores of an idle Xeon
# with a cold cache, a model took 3-5 minutes when it compiled three times (55-95 s each); it now compiles once in
# inference (accuracy reuses the timed model, peak memory is measured in the same worker), but one model a suite is
# still what fits the 15-minute budget of `make run` on a busy machine; `--models SUITE=A,B` runs more. One batch
# size for all: the batch size is part of a configuration, and the report covers one configuration group.
DEFAULT_PICKS: tuple[SuitePick, ...] = (
    # TorchBench's lennard_jones (torchbenchmark; a small MLP): of the small models of PyTorch's CPU list it compiled
    # fastest here, cold, at batch size 4 (60 s against phlippe_resnet's 74 s and dcgan's 69 s, 2 busy cores,
    # 2026-11-28; a whole run 124 s against 157 s and 163 s).
    SuitePick("torchbench", ("lennard_jones",), 4),
    SuitePick("huggingface", ("DistilBertForMaskedLM",), 4),
    # lcnet_050 (the smallest timm model perfdash lists) left PyTorch's current list: it is in the extended one.
    SuitePick("timm_models", ("lcnet_050",), 4, "extended"),
    # Not in DEFAULT_SUITES (a ResNet-50 adds about 4 minutes): `--suites ...,hf_vision` fills the Vision page.
    SuitePick("hf_vision", ("ResNet_bs4",), 4),  # its rows are named <model>_bs<N>
)


@dataclass(frozen=True, slots=True)
class Step:
    """One perfdash subcommand of the nightly. ``required``: the steps after it make no sense if it fails."""

    title: str
    argv: tuple[str, ...]
    required: bool = False


@dataclass(frozen=True, slots=True)
class NightlyConfig:
    picks: tuple[SuitePick, ...]
    results_dir: Path
    report: Path
    serve: bool = True
    host: str = "127.0.0.1"
    port: int = 8000
    repeat: int | None = None
    timeout: int | None = None
    models_files: dict[str, Path] = field(default_factory=dict)
    skip_benchmark: bool = False
    # the UTC date the nightly started: every run of it is filed under this night, even those that start after midnight
    night: date | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _only(models: Sequence[str]) -> str:
    return "^(" + "|".join(re.escape(m) for m in models) + ")$"


def run_argv(pick: SuitePick, config: NightlyConfig) -> tuple[str, ...]:
    argv = ["run", "--suite", pick.suite, "--device", "cpu", "--backend", "inductor",
            "--batch-size", str(pick.batch_size), "--output-dir", str(config.results_dir)]
    if pick.suite in config.models_files:
        argv += ["--models-file", str(config.models_files[pick.suite])]
    elif pick.model_list != "default":
        argv += ["--model-list", pick.model_list]
    if pick.models:
        argv += ["--filter", _only(pick.models)]
    if config.repeat is not None:
        argv += ["--repeat", str(config.repeat)]
    if config.timeout is not None:
        argv += ["--timeout", str(config.timeout)]
    if config.night is not None:
        argv += ["--night", config.night.isoformat()]
    return tuple(argv)


def plan(config: NightlyConfig) -> list[Step]:
    """The subcommands of one nightly, in order (serving is not a step: it runs until interrupted)."""
    steps = [Step("migrate the database", ("db", "upgrade"), required=True)]
    if not config.skip_benchmark:
        for pick in config.picks:
            models = ", ".join(pick.models) or "every model of the list"
            steps.append(Step(f"benchmark {pick.suite}: {models}", run_argv(pick, config)))
    steps += [
        Step("ingest the results", ("ingest", str(config.results_dir)), required=True),
        Step("detect regressions", ("detect",)),
        Step("write the report", ("report", "--output", str(config.report))),
        # retention of raw samples (PERFDASH_SAMPLES_KEEP_DAYS / _RUNS); says so and does nothing when neither is set
        Step("compact old raw samples", ("db", "compact-samples")),
    ]
    return steps


# ---- command line ----------------------------------------------------------------------------------------------

def _pick(text: str) -> tuple[str, tuple[str, ...]]:
    suite, sep, models = text.partition("=")
    if not sep or not suite:
        raise argparse.ArgumentTypeError(f"{text!r}: expected SUITE=MODEL[,MODEL...]")
    return suite, tuple(m for m in models.split(",") if m)


def _models_file(text: str) -> tuple[str, Path]:
    suite, sep, path = text.partition("=")
    if not sep or not Path(path).is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: expected SUITE=PATH to an existing model list (TOML)")
    return suite, Path(path)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "nightly", help="the whole nightly on this machine: benchmark, ingest, detect, report, serve",
        description="Benchmark a few small models of each suite on this CPU, ingest them into DATABASE_URL "
                    "(default: the SQLite file perfdash.db), detect regressions, write the report, then serve the "
                    "dashboard. Run it again for a second night.")
    parser.add_argument("--suites", default=",".join(DEFAULT_SUITES),
                        help="comma-separated suites (default: %(default)s)")
    parser.add_argument("--models", type=_pick, action="append", default=[], metavar="SUITE=M1,M2",
                        help="models of a suite instead of the quick defaults (repeatable; 'SUITE=' runs its list)")
    parser.add_argument("--models-file", type=_models_file, action="append", default=[], metavar="SUITE=PATH",
                        help="a model list (TOML, the runner's format) for a suite (repeatable)")
    parser.add_argument("--batch-size", type=int, help="batch size for every suite (default: 4)")
    parser.add_argument("--repeat", type=int, help="timed repetitions per model (default: the runner's)")
    parser.add_argument("--timeout", type=int, help="seconds per model (default: the runner's)")
    parser.add_argument("--results-dir", type=Path,
                        help="where the night's CSVs go (default: results/nightly/<UTC time>)")
    parser.add_argument("--report", type=Path, default=Path("perfdash-report.md"),
                        help="report markdown file (default: %(default)s)")
    parser.add_argument("--database-url", help="overrides DATABASE_URL (default: sqlite:///perfdash.db)")
    parser.add_argument("--skip-benchmark", action="store_true",
                        help="ingest, detect and report the existing --results-dir without benchmarking")
    parser.add_argument("--no-serve", action="store_true", help="stop after the report instead of serving")
    parser.add_argument("--host", default="127.0.0.1", help="dashboard address (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8000, help="dashboard port (default: %(default)s)")
    parser.add_argument("--dry-run", action="store_true", help="print the steps and exit")
    parser.set_defaults(handler=_handle, reads_settings=True)


def config_from_args(args: argparse.Namespace, now: datetime) -> NightlyConfig:
    suites = [s for s in args.suites.split(",") if s]
    defaults = {p.suite: p for p in DEFAULT_PICKS}
    chosen = dict(args.models)
    files = dict(args.models_file)
    picks = []
    for suite in suites:
        default = defaults.get(suite, SuitePick(suite, (), 4))
        models = chosen.get(suite, () if suite in files else default.models)
        # Named models come from the pick's list (extended lists hold the default ones); a whole suite runs its default.
        model_list = default.model_list if models else "default"
        picks.append(SuitePick(suite, models, args.batch_size or default.batch_size, model_list))
    if args.skip_benchmark and args.results_dir is None:
        raise SystemExit("perfdash nightly: --skip-benchmark needs --results-dir")
    results_dir = args.results_dir or Path("results") / "nightly" / now.strftime("%Y%m%dT%H%M%SZ")
    return NightlyConfig(picks=tuple(picks), results_dir=results_dir, report=args.report, serve=not args.no_serve,
                         host=args.host, port=args.port, repeat=args.repeat, timeout=args.timeout,
                         models_files=files, skip_benchmark=args.skip_benchmark, night=now.astimezone(UTC).date())


def _handle(args: argparse.Namespace) -> int:
    settings = args.settings
    if args.database_url:  # handed to every step (perfdash.cli.main(settings=...)), never through the environment
        settings = settings.model_copy(update={"database_url": args.database_url})
    config = config_from_args(args, datetime.now(UTC))
    if args.dry_run:
        for number, step in enumerate(plan(config), 1):
            print(f"{number}. perfdash {' '.join(step.argv)}    # {step.title}")
        if config.serve:
            print(f"then: perfdash serve --host {config.host} --port {config.port}")
        return 0
    return run_nightly(config, settings)


# ---- running -----------------------------------------------------------------------------------------------------

def _call(argv: Sequence[str], settings: Settings) -> int:
    from perfdash.cli import main

    try:
        return main(list(argv), settings=settings)
    except SystemExit as exc:  # argparse and some handlers exit; a step's failure must not end the nightly
        return exc.code if isinstance(exc.code, int) else 1


def ingest_files(results_dir: Path) -> tuple[list[str], list[str]]:
    """The result files to ingest, and the runs left out: a suite stopped before its first model leaves a manifest
    without CSVs, which the ingest would refuse, and with it the whole night."""
    csv_stems = {path.name.rsplit("_", 1)[0] for path in results_dir.glob("*.csv")}
    files, empty = [], []
    for path in sorted(results_dir.iterdir()):
        stem = path.name.rsplit("_", 1)[0]
        if path.suffix == ".csv" or (stem in csv_stems and path.name.endswith(("_manifest.json", "_samples.jsonl"))):
            files.append(str(path))
        elif path.name.endswith("_manifest.json"):
            empty.append(stem)
    return files, empty


def run_nightly(config: NightlyConfig, settings: Settings) -> int:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    steps = plan(config)
    outcomes: list[tuple[str, str, float]] = []
    failed = False
    console.rule(f"perfdash nightly -> {settings.database_url}")
    for number, step in enumerate(steps, 1):
        console.print(f"[bold][{number}/{len(steps)}] {step.title}[/bold]  [dim]perfdash {' '.join(step.argv)}[/dim]")
        argv = step.argv
        if argv[0] == "ingest" and config.results_dir.is_dir():
            files, empty = ingest_files(config.results_dir)
            for stem in empty:
                console.print(f"  [yellow]{stem}: no model finished, nothing to ingest[/yellow]")
            argv = ("ingest", *files) if files else argv
        started = time.monotonic()
        code = _call(argv, settings)
        elapsed = time.monotonic() - started
        outcomes.append((step.title, "ok" if code == 0 else f"exit {code}", elapsed))
        if code != 0:
            failed = True
            console.print(f"  [red]failed with exit code {code}[/red]")
            if step.required:
                break

    table = Table(title="perfdash nightly")
    for column in ("step", "result", "seconds"):
        table.add_column(column)
    for title, result, seconds in outcomes:
        table.add_row(title, result, f"{seconds:.0f}")
    console.print(table)
    benchmark = sum(s for title, _, s in outcomes if title.startswith("benchmark "))
    console.print(f"benchmarking took {benchmark / 60:.1f} min; results in {config.results_dir}")
    if config.report.exists():
        console.print(f"report: {config.report}")

    ingested = any(title == "ingest the results" and result == "ok" for title, result, _ in outcomes)
    if config.serve and ingested:
        console.print(f"[bold green]dashboard: {config.url}/[/bold green]  (Ctrl-C stops it)")
        code = _call(("serve", "--host", config.host, "--port", str(config.port), "--no-upgrade"), settings)
        failed = failed or code != 0
    return 1 if failed else 0
