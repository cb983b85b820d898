#!/usr/bin/env bash
# PyTorch's TorchBench (torchbenchmark) into a venv: `install-torchbench.sh VENV [LIST ...]` (scripts/setup.sh runs it
# in both profiles). runner/torchbench_install.py does the work: the pinned commit from PERFDASH_TORCHBENCH_SOURCE
# (a git URL, a checkout, or a git archive of the commit, file or URL; unset: ../shared/third_party/'s archive beside
# the clone when it exists, else GitHub), unpacked once under $PERFDASH_CACHE_DIR/torchbench/, then the requirements
# of the models of LIST (default: the CPU list, runner/suites/data/torchbench.toml) without replacing any package
# but setuptools, held below 81 as PyTorch's CI holds it (fastNLP_Bert imports pkg_resources).
set -euo pipefail
venv="${1:-.venv}"
shift || true
here="$(cd "$(dirname "$0")/.." && pwd)"
lists=("$@")
[ "${#lists[@]}" -gt 0 ] || lists=("$here/runner/suites/data/torchbench.toml")
args=()
for list in "${lists[@]}"; do
    args+=(--list "$list")
done
"$venv/bin/python" "$here/runner/torchbench_install.py" "${args[@]}"
