#!/usr/bin/env bash
# Debian packages perfdash needs: `install-system-packages.sh run|test`.
#   run   what `make run` uses: jemalloc (CPU workers preload it by default, as PyTorch's CPU dashboard:
#         runner/allocator.py), g++ (Inductor's C++ kernels), and what builds psycopg2 from source (libpq-dev for
#         pg_config and libpq, gcc, Python's headers)
#   test  also what the tests use: a PostgreSQL server, headless Chromium, Groovy (Jenkinsfile checks), util-linux
#         (runuser, lscpu), and podman with runc, debootstrap and CNI's dnsname plugin (the image tests:
#         tests/containers; compose's containers find each other by service name through dnsname)
set -euo pipefail
profile="${1:-test}"
missing=()
compgen -G "/usr/lib/*/libjemalloc.so.2" >/dev/null || missing+=(libjemalloc2)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
command -v pg_config >/dev/null 2>&1 || missing+=(libpq-dev)
python3.11 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' \
    2>/dev/null || missing+=(python3.11-dev)
if [ "$profile" = test ]; then
    ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v groovyc >/dev/null 2>&1 || missing+=(groovy)
    command -v runuser >/dev/null 2>&1 || missing+=(util-linux)
    command -v podman >/dev/null 2>&1 || missing+=(podman)
    command -v runc >/dev/null 2>&1 || missing+=(runc)
    command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
    [ -x /usr/lib/cni/dnsname ] || missing+=(golang-github-containernetworking-plugin-dnsname)
elif [ "$profile" != run ]; then
    echo "usage: $0 run|test" >&2
    exit 2
fi
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
