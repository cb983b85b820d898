"""Two real torch releases, the same models, one database: what changed from one release to the next.

For each release it makes (once, in the persistent cache) a runner environment: a venv with that torch release and its
torchvision from the registry, pinned by a constraint as the runner images pin theirs, then perfdash's runner
dependencies and perfdash itself (editable, no dependencies). The current venv is used as is for the release it holds.
Each environment runs `perfdash nightly`'s models (service.nightly.DEFAULT_PICKS, the same `perfdash run` command
lines, one per suite) with `--torch RELEASE`, so a run can only measure the release it is named for. Both results
directories are ingested into one database (DATABASE_URL, default an SQLite file under bench/out/), detection runs,
and it prints each run's summary, the detection findings of the newer run, and the Releases view between the two.

    python -m bench.release_compare --base 2.13.0 --new 2.14.1 [--database-url URL] [--repeat N]

Run it as a module from the repository root.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("PERFDASH_CACHE_DIR", Path.home() / ".cache" / "perfdash"))


def current_torch() -> str | None:
    from perfdash.torch_spec import installed_torch

    version, _ = installed_torch()
    return version.split("+")[0] if version else None


def runner_python(release: str) -> Path:
    """A python whose torch is ``release``: this venv's when it has it, else a cached venv made for it."""
    if current_torch() == release:
        return Path(sys.executable)
    venv = CACHE / "venvs" / f"torch-{release}"
    python = venv / "bin" / "python"
    if (venv / ".perfdash-ready").exists():
        return python
    subprocess.run(["python3.11", "-m", "venv", str(venv)], check=True)
    from perfdash.torch_spec import torchvision_for

    pins = (f"torch=={release}", f"torchvision=={torchvision_for(release)}")
    constraints = venv / "torch-constraints.txt"
    constraints.write_text("\n".join(pins) + "\n")
    # The registry's build of the release: this machine's local wheel directories hold a +cpu build of some releases
    # that has no torchvision to go with it here, and pip would prefer it (a higher local version).
    registry = {**os.environ, "PIP_FIND_LINKS": "", "PIP_CONFIG_FILE": os.devnull}
    wheels = CACHE / "wheels" / f"torch-{release}-pypi"
    source = ["--find-links", str(wheels)] if wheels.is_dir() else []
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *source, *pins], check=True, env=registry)
    requirements = subprocess.run([sys.executable, str(REPO / "docker" / "requirements-of.py"),
                                   str(REPO / "pyproject.toml"), "runner"], check=True, capture_output=True,
                                  text=True).stdout.splitlines()
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *requirements], check=True,
                   env={**os.environ, "PIP_CONSTRAINT": str(constraints)})
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(REPO)], check=True)
    (venv / ".perfdash-ready").touch()
    return python


def benchmark(release: str, results: Path, repeat: int | None) -> float:
    """`perfdash nightly`'s models under ``release``; returns the wall time."""
    from service.nightly import DEFAULT_PICKS, DEFAULT_SUITES, NightlyConfig, run_argv

    python = runner_python(release)
    config = NightlyConfig(picks=DEFAULT_PICKS, results_dir=results, report=results / "report.md", repeat=repeat)
    start = time.monotonic()
    for pick in (p for p in DEFAULT_PICKS if p.suite in DEFAULT_SUITES):
        argv = [str(python), "-m", "perfdash.cli", *run_argv(pick, config), "--torch", release, "--no-progress"]
        print(f"$ {shlex.join(argv)}", flush=True)
        subprocess.run(argv, check=False, cwd=REPO)
    return time.monotonic() - start


def perfdash(*argv: str, database_url: str) -> None:
    print(f"$ perfdash {shlex.join(argv)}", flush=True)
    subprocess.run([sys.executable, "-m", "perfdash.cli", *argv], check=True, cwd=REPO,
                   env={**os.environ, "DATABASE_URL": database_url})


def show(database_url: str, base: str, new: str) -> None:
    import sqlalchemy as sa

    from service.db import make_engine
    from service.models import Finding, Run
    from service.queries.releases import compare_versions, versions

    engine = make_engine(database_url)
    with engine.connect() as connection:
        session = sa.orm.Session(bind=connection)
        runs = session.scalars(sa.select(Run).order_by(Run.id)).all()
        for run in runs:
            print(f"run {run.id}: {run.configuration.suite} torch {run.torch_version} ({run.torch_git_commit})")
        for run in runs:
            perfdash("summary", "--run", str(run.id), database_url=database_url)
        newest = {run.configuration_id: run.id for run in runs}
        for finding in session.scalars(sa.select(Finding).where(Finding.run_id.in_(list(newest.values())))):
            print(f"finding [{finding.category}] {finding.summary}")
        stored = {v.split("+")[0]: v for v in versions(session)}
        view = compare_versions(session, stored[base], stored[new])
        print(f"Releases view {stored[base]} -> {stored[new]} (the page: /releases?base={stored[base]}&new=...):")
        print(view.model_dump_json(indent=1)[:8000])
    engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="2.13.0")
    parser.add_argument("--new", default="2.14.1")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "releases")
    parser.add_argument("--database-url", help="default: an SQLite file in --out")
    parser.add_argument("--repeat", type=int, help="perfdash run --repeat (default: the runner's)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    database_url = args.database_url or f"sqlite:///{args.out / 'releases.db'}"
    print(f"machine: {_cpu()}, {os.cpu_count()} cores; load {os.getloadavg()}")
    seconds = {}
    for release in (args.base, args.new):
        seconds[release] = benchmark(release, args.out / release, args.repeat)
    print("benchmark wall time: " + ", ".join(f"torch {r} {s:.0f} s" for r, s in seconds.items()))
    perfdash("db", "upgrade", database_url=database_url)
    for release in (args.base, args.new):  # oldest first: detection compares each run with the one before
        perfdash("ingest", str(args.out / release), database_url=database_url)
    perfdash("detect", database_url=database_url)
    show(database_url, args.base, args.new)
    return 0


def _cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
