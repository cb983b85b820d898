#!/usr/bin/env bash
# Installs the torch under test into a runner image: `install-torch SPEC VARIANT`.
#   SPEC     a release (2.14.1), a nightly date (20261121 or 2026-11-21), an exact nightly (2.15.0.dev20261121), a
#            pytorch commit (7 to 40 hex digits), or a version followed by @COMMIT (perfdash/torch_spec.py says what
#            each means; the nightly pipeline resolves `nightly` into version@commit once per build)
#   VARIANT  the wheel flavour: cpu, or a CUDA tag such as cu130 (the index PyTorch publishes for that CUDA)
# The series records the torch version, so a release is pinned exactly and a nightly is the wheel of that date, never
# "whatever is newest". Afterwards the installed torch is checked against SPEC, and pip constraints pinning it are
# written to $TORCH_CONSTRAINTS: the image sets PIP_CONSTRAINT to that file, so no later `pip install` (perfdash's
# own extras, timm, the backends) can swap the torch under test for another one without failing the build.
# PIP overrides the pip command (the tests point it at a recorder; INSTALL_TORCH_VERIFY=0 skips the check then).
set -euo pipefail

spec="${1:?usage: install-torch SPEC VARIANT}"
variant="${2:-cpu}"
pip_cmd="${PIP:-python -m pip}"
read -r -a pip <<<"$pip_cmd"
index_root="${TORCH_INDEX_ROOT:-https://download.pytorch.org/whl}"
constraints="${TORCH_CONSTRAINTS:-/etc/perfdash/torch-constraints.txt}"
here="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
spec_tool="${TORCH_SPEC_TOOL:-$here/torch_spec.py}"
[ -f "$spec_tool" ] || spec_tool="$here/../perfdash/torch_spec.py"

# torchvision's minor version is torch's plus 15 (torch 2.14.1 pairs with torchvision 0.29.1).
vision_for() {
    local major minor patch
    IFS=. read -r major minor patch <<<"$1"
    [ "$major" = 2 ] || { echo "install-torch: no torchvision pairing known for torch $1" >&2; exit 2; }
    echo "0.$((minor + 15)).${patch}"
}

# The nightly of one date: pip cannot select "the .dev build of date D" by itself, so list the versions and pick it.
install_nightly() {
    local date="$1" index="${index_root}/nightly/${variant}" versions torch_version vision_versions vision_version
    versions="$("${pip[@]}" index versions torch --pre --index-url "$index" | sed -n 's/^Available versions: //p')"
    torch_version="$(tr ',' '\n' <<<"$versions" | tr -d ' ' | grep -m1 "\.dev${date}$" || true)"
    if [ -z "$torch_version" ]; then
        echo "install-torch: no torch nightly for ${date} on ${index}" >&2
        exit 3
    fi
    vision_versions="$("${pip[@]}" index versions torchvision --pre --index-url "$index" | sed -n 's/^Available versions: //p')"
    vision_version="$(tr ',' '\n' <<<"$vision_versions" | tr -d ' ' | grep -m1 "\.dev${date}$" || true)"
    "${pip[@]}" install --pre "torch==${torch_version}" ${vision_version:+"torchvision==${vision_version}"} \
        --index-url "$index"
}

version="${spec%%@*}"
if [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    "${pip[@]}" install "torch==${version}" "torchvision==$(vision_for "$version")" --index-url "${index_root}/${variant}"
elif [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.dev([0-9]{8})$ ]]; then
    install_nightly "${BASH_REMATCH[1]}"
elif [[ "$spec" =~ ^([0-9]{4})-?([0-9]{2})-?([0-9]{2})$ ]]; then
    install_nightly "${BASH_REMATCH[1]}${BASH_REMATCH[2]}${BASH_REMATCH[3]}"
elif [[ "$spec" =~ ^[0-9a-f]{7,40}$ ]]; then
    # A commit between nightlies: build it from source (an hour on a big Xeon; perfbisect caches such builds per
    # commit and tries the nightly of the commit's date first). torchvision comes from the nightly index without
    # dependencies: its Python models are what the suites use.
    src="${TORCH_SRC_DIR:-/tmp/pytorch}"
    if [ ! -d "$src/.git" ]; then
        git clone --filter=blob:none https://github.com/pytorch/pytorch "$src"
    fi
    git -C "$src" fetch origin "$spec"
    git -C "$src" checkout --detach "$spec"
    git -C "$src" submodule update --init --recursive --jobs 8
    "${pip[@]}" install -r "$src/requirements.txt"
    if [ "$variant" = cpu ]; then export USE_CUDA=0; fi
    "${pip[@]}" install --no-build-isolation -v "$src"
    "${pip[@]}" install --pre --no-deps torchvision --index-url "${index_root}/nightly/${variant}"
else
    echo "install-torch: '$spec' is neither a release (2.14.1), a nightly date (20261121), a nightly version" \
         "(2.15.0.dev20261121) nor a commit sha" >&2
    exit 2
fi

[ "${INSTALL_TORCH_VERIFY:-1}" = 1 ] || exit 0
python "$spec_tool" check "$spec"
mkdir -p "$(dirname "$constraints")"
python - "$constraints" <<'PY'
import sys
from importlib import metadata

pins = [f"{name}=={metadata.version(name)}" for name in ("torch", "torchvision")]
with open(sys.argv[1], "w", encoding="utf-8") as out:
    out.write("# the torch under test (install-torch): later pip installs may not replace it\n")
    out.write("\n".join(pins) + "\n")
print("install-torch: pinned " + ", ".join(pins) + f" in {sys.argv[1]}")
PY
