#!/usr/bin/env bash
# Installs what perfdash needs on a fresh Debian machine: `setup.sh VENV run|test`.
#   run   the nightly and the dashboard (`make run`): system packages, then a venv with the runner and the service
#   test  everything the tests use as well (`make test`): test system packages, the dev and backends extras
set -euo pipefail
venv="${1:-.venv}"
profile="${2:-test}"
here="$(cd "$(dirname "$0")/.." && pwd)"

"$here/scripts/install-system-packages.sh" "$profile"

if [ ! -x "$venv/bin/python" ]; then
    python3.11 -m venv "$venv"
fi
# The development venv's torch is pinned here, not in the runner extra: a runner measures the torch it is given (the
# images install theirs first: docker/install-torch.sh). pip takes both from local wheels on these machines.
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet "torch==2.14.1" "torchvision==0.29.1"
# psycopg2 is built from source now (libpq-dev); psycopg2-binary, which a venv made before may hold, installs the same
# module and would stay beside it
"$venv/bin/pip" uninstall --quiet --yes psycopg2-binary 2>/dev/null || true
extras="runner,service"
[ "$profile" = test ] && extras="runner,service,dev,backends"
"$venv/bin/pip" install --quiet -e "$here[$extras]"
# PyTorch's TorchBench for the torchbench suite, last: its models' requirements are added under pins of everything
# installed above (the torch under test included), never replacing any of it but setuptools (below 81, as PyTorch's
# CI has it; runner/torchbench_install.py's ENVIRONMENT_REQUIREMENTS says why).
"$here/scripts/install-torchbench.sh" "$venv"
