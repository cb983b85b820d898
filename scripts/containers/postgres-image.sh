#!/usr/bin/env bash
# Makes sure an official postgres image (docker/compose.yaml's) is in podman's store: `postgres-image.sh TAG BASE`.
# It is pulled when a registry answers. Where none can be reached (these build machines), a stand-in is built under
# the same tag from Debian's postgresql-15 on BASE, the Dockerfiles' base image (base-image.sh makes sure it is there):
# postgres-standin/ says what it keeps of the official image. Labelled, and this script says on stderr which it was.
set -euo pipefail
tag="${1:?usage: postgres-image.sh TAG BASE (e.g. postgres:15.10-bookworm python:3.11.11-slim-bookworm)}"
base="${2:?usage: postgres-image.sh TAG BASE}"
: "${CONTAINERS_CONF:?source scripts/containers/env first}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if podman image exists "$tag"; then
    origin="$(podman image inspect --format '{{ index .Labels "org.perfdash.base" }}' "$tag" 2>/dev/null || true)"
    echo "postgres image $tag: present${origin:+ ($origin)}" >&2
    [ "$origin" = "<no value>" ] || [ -z "$origin" ] && exit 0
    # a stand-in: rebuilt (layers cached) so a change of its recipe reaches it
fi
if ! podman image exists "$tag" && podman pull --quiet "docker.io/library/$tag" >/dev/null 2>&1; then
    echo "postgres image $tag: pulled from docker.io" >&2
    exit 0
fi
major="${tag#postgres:}"
major="${major%%.*}"
[ "$major" = 15 ] || { echo "postgres image $tag: the stand-in is postgresql-15 only" >&2; exit 1; }
podman build --network host --layers --format docker --build-arg "BASE=$base" \
    --label "org.perfdash.base=stand-in: Debian bookworm postgresql-15 on $base" \
    -t "docker.io/library/$tag" "$here/postgres-standin" >/dev/null
echo "postgres image $tag: stand-in built from Debian's postgresql-15" >&2
