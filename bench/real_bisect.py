"""One real bisection: a small git repository whose commits change Inductor settings of a tiny model, one of them
making the compiled model much slower, bisected by ``perfdash bisect`` with ``perfdash run`` as the measurement.

The repository (made in ``--workdir``) holds bench/data/real_bisect/ (model.py: an elementwise-heavy module built by
the ``py:`` builder; models.toml; measure.sh: one ``perfdash run`` of the model, printing the compiled latency) and a
settings.py that model.py applies to ``torch._inductor.config`` before compiling. Its commits, oldest first:

  good  settings.py applies nothing
  c1    config.cpp.min_chunk_size = 512          (Inductor's default: no change)
  c2    config.epilogue_fusion = True            (the default again)
  c3    config.cpp.simdlen = 1                   (the culprit: no vector ISA has 1 bit, so Inductor's C++ kernels are
                                                  scalar; torch/_inductor/cpu_vec_isa.py pick_vec_isa)
  c4    config.cpp.min_chunk_size = 512          (no change)

    python -m bench.real_bisect [--workdir DIR] [--repeats 7] [--max-pairs 7]

prints the verdict, the culprit, the number of ``perfdash run`` measurements and the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "real_bisect"
COMMITS = (
    ("settings: none", "def apply(config):\n    pass\n"),
    ("settings: cpp.min_chunk_size 512", "def apply(config):\n    config.cpp.min_chunk_size = 512\n"),
    ("settings: epilogue_fusion on", "def apply(config):\n    config.cpp.min_chunk_size = 512\n"
                                     "    config.epilogue_fusion = True\n"),
    ("settings: cpp.simdlen 1", "def apply(config):\n    config.cpp.min_chunk_size = 512\n"
                                "    config.epilogue_fusion = True\n    config.cpp.simdlen = 1\n"),
    ("settings: chunk size again", "def apply(config):\n    config.cpp.min_chunk_size = 512\n"
                                   "    config.epilogue_fusion = True\n    config.cpp.simdlen = 1\n"
                                   "    # chunk size stays 512\n"),
)
CULPRIT = 3


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ada Dev", "GIT_AUTHOR_EMAIL": "ada@example.com",
           "GIT_COMMITTER_NAME": "Ada Dev", "GIT_COMMITTER_EMAIL": "ada@example.com"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def make_repo(repo: Path) -> list[str]:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for name in ("model.py", "models.toml", "measure.sh"):
        shutil.copy(DATA / name, repo / name)
    shas = []
    for subject, settings in COMMITS:
        (repo / "settings.py").write_text(settings)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", subject)
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--max-pairs", type=int, default=7)
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="real_bisect_"))
    shas = make_repo(work / "repo")
    out = work / "result.json"
    env = {**os.environ, "PERFDASH_PYTHON": sys.executable}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "perfdash.cli", "bisect", "--repo", str(work / "repo"), "--good", shas[0], "--bad",
         shas[-1], "--measure", "sh measure.sh", "--metric-direction", "lower", "--threshold", "10",
         "--repeats", str(args.repeats), "--max-pairs", str(args.max_pairs), "--cache-dir", str(work / "cache"),
         "--json", str(out)], env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    print(proc.stderr[-6000:])
    if not out.exists():
        print(f"no result (exit {proc.returncode})")
        return 1
    result = json.loads(out.read_text())
    culprit = (result.get("culprit") or {}).get("sha")
    print(f"verdict {result['verdict']}; culprit {culprit} ({'right' if culprit == shas[CULPRIT] else 'WRONG'}: "
          f"expected {shas[CULPRIT][:10]} \"{COMMITS[CULPRIT][0]}\"); {result['measurements']} perfdash run "
          f"measurements; wall time {wall:.0f} s; result {out}")
    return 0 if culprit == shas[CULPRIT] else 1


if __name__ == "__main__":
    raise SystemExit(main())
