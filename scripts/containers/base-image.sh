#!/usr/bin/env bash
# Makes sure the Dockerfiles' base image is in podman's store: `base-image.sh TAG`.
# It is pulled when a registry answers. Where none can be reached (these build machines), a stand-in is made under
# the same tag from Debian's own packages: debootstrap of the Debian release the tag names, python3 as `python`, the
# EXTERNALLY-MANAGED marker removed (the official image's pip installs system-wide too) and this machine's CA bundle
# (pip reaches the registries through it). The stand-in is labelled, and this script says on stderr which it was.
set -euo pipefail
tag="${1:?usage: base-image.sh TAG (e.g. python:3.11.11-slim-bookworm)}"
: "${CONTAINERS_CONF:?source scripts/containers/env first}"

if podman image exists "$tag"; then
    origin="$(podman image inspect --format '{{ index .Labels "org.perfdash.base" }}' "$tag" 2>/dev/null || true)"
    echo "base image $tag: present${origin:+ ($origin)}" >&2
    exit 0
fi
if podman pull --quiet "docker.io/library/$tag" >/dev/null 2>&1; then
    echo "base image $tag: pulled from docker.io" >&2
    exit 0
fi

suite="${tag##*-}"                       # python:3.11.11-slim-bookworm -> bookworm
mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)"
mirror="${mirror:-http://deb.debian.org/debian}"
root="$(mktemp -d "${TMPDIR:-/tmp}/perfdash-base.XXXXXX")"
trap 'rm -rf "$root"' EXIT
echo "base image $tag: no registry reachable; making a stand-in with debootstrap $suite from $mirror" >&2
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
    "$suite" "$root/fs" "$mirror" >"$root/debootstrap.log" 2>&1 || { tail -20 "$root/debootstrap.log" >&2; exit 1; }
ln -sf python3 "$root/fs/usr/bin/python"
ln -sf pip3 "$root/fs/usr/bin/pip"
rm -f "$root"/fs/usr/lib/python3*/EXTERNALLY-MANAGED
cp /etc/ssl/certs/ca-certificates.crt "$root/fs/etc/ssl/certs/ca-certificates.crt"
rm -rf "$root"/fs/var/cache/apt/archives/*.deb "$root"/fs/var/lib/apt/lists/*
tar -C "$root/fs" -c . | podman import \
    --change 'CMD ["python3"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
    --change "LABEL org.perfdash.base=\"stand-in: debootstrap $suite from Debian packages\"" \
    --quiet - "docker.io/library/$tag" >/dev/null
echo "base image $tag: stand-in made ($(podman image inspect --format '{{.Size}}' "$tag") bytes)" >&2
