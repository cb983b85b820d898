#!/usr/bin/env bash
# Debian packages the tests and the nightly need: a PostgreSQL server, headless Chromium, Groovy (Jenkinsfile check),
# jemalloc (CPU workers preload it by default, as PyTorch's CPU dashboard: runner/allocator.py).
set -euo pipefail
missing=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v groovyc >/dev/null 2>&1 || missing+=(groovy)
command -v runuser >/dev/null 2>&1 || missing+=(util-linux)
compgen -G "/usr/lib/*/libjemalloc.so.2" >/dev/null || missing+=(libjemalloc2)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing Debian packages: ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts a cluster on install; the tests start their own in a temporary directory.
if command -v pg_lsclusters >/dev/null 2>&1; then
    $sudo service postgresql stop >/dev/null 2>&1 || true
fi
