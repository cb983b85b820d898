#!/usr/bin/env bash
# Installs everything perfdash needs on a fresh Debian machine: system packages, then the virtual environment.
set -euo pipefail
venv="${1:-.venv}"
here="$(cd "$(dirname "$0")/.." && pwd)"

"$here/scripts/install-system-packages.sh"

if [ ! -x "$venv/bin/python" ]; then
    python3.11 -m venv "$venv"
fi
# torch and torchvision are pinned (the series records the torch version); pip takes them from local wheels here.
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet "torch==2.14.1" "torchvision==0.29.1"
"$venv/bin/pip" install --quiet -e "$here[runner,service,dev,backends]"
