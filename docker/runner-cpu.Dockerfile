# perfdash runner for the Xeon agents (label `xeon`): CPU-only torch, jemalloc, Intel OpenMP, numactl.
#   docker build -f docker/runner-cpu.Dockerfile --build-arg TORCH_SPEC=2.15.0.dev20261125@<sha> -t perfdash-runner-cpu .
# TORCH_SPEC is what the image benchmarks and has no default: a release, a nightly date or version, a commit, or
# version@commit as the nightly pipeline resolves it (perfdash/torch_spec.py). install-torch installs it first and pins
# it (PIP_CONSTRAINT), so perfdash's own install cannot replace it; the image's last step checks it is still there,
# and every `perfdash run` in the container checks it again (PERFDASH_TORCH_SPEC) before any model.
# The CUDA image (runner-cuda.Dockerfile) differs in the wheel index (a CUDA variant instead of cpu: the CUDA runtime
# libraries come inside the wheels, the driver from the host through the NVIDIA container toolkit) and in carrying
# no jemalloc/OpenMP launcher.
# The requirements of perfdash's core and extras, read from pyproject.toml in a stage of their own: the layer that
# installs them is keyed by the list's content, so editing pyproject.toml elsewhere (the version, a tool's settings,
# another extra) keeps that multi-minute layer cached.
FROM python:3.11.11-slim-bookworm AS requirements
COPY docker/requirements-of.py pyproject.toml /src/
RUN python /src/requirements-of.py /src/pyproject.toml runner backends > /requirements.txt

FROM python:3.11.11-slim-bookworm

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    TORCHINDUCTOR_CACHE_DIR=/cache/inductor \
    HF_HOME=/cache/huggingface \
    TORCH_HOME=/cache/torch \
    PERFDASH_CACHE_DIR=/cache/perfdash \
    PERFDASH_SPOOL_DIR=/var/lib/perfdash/spool

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# g++ compiles Inductor's C++ kernels; jemalloc, numactl and util-linux (lscpu, taskset) serve xeon-launch; git is
# for building torch from a commit and for perfdash bisect.
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ git libjemalloc2 numactl util-linux curl ca-certificates \
    && rm -rf /var/lib/apt/lists/*

COPY docker/install-torch.sh perfdash/torch_spec.py /usr/local/lib/perfdash-torch/
COPY docker/xeon-launch.sh /usr/local/bin/xeon-launch
RUN ln -s /usr/local/lib/perfdash-torch/install-torch.sh /usr/local/bin/install-torch

# The torch under test, first and pinned. TORCH_INDEX_ROOT: PyTorch's wheel server, or a mirror of it.
ARG TORCH_SPEC
ARG TORCH_INDEX_ROOT=https://download.pytorch.org/whl
RUN test -n "${TORCH_SPEC}" || { echo "build with --build-arg TORCH_SPEC=<release|date|version[@commit]|commit>" >&2; exit 2; } \
    && install-torch "${TORCH_SPEC}" cpu
# The versions of everything else, locked (docker/runner.lock, made by scripts/lock-requirements), beside torch's pin.
COPY docker/runner.lock /etc/perfdash/runner.lock
ENV PIP_CONSTRAINT="/etc/perfdash/torch-constraints.txt /etc/perfdash/runner.lock" \
    PERFDASH_TORCH_SPEC=${TORCH_SPEC}

# perfdash's dependencies in a layer of their own (cached while only perfdash's code changes). The runner extra brings
# Intel's OpenMP (/usr/local/lib/libiomp5.so) for --allocator dashboard, with the jemalloc installed above; the
# backends extra the other backends of the weekly backend cells (perfdash run --backend onnxruntime|openvino).
WORKDIR /opt/perfdash
COPY --from=requirements /requirements.txt /tmp/requirements.txt
RUN python -m pip install -r /tmp/requirements.txt
# PyTorch's TorchBench for the torchbench suite, at the commit runner/torchbench_install.py pins, from
# PERFDASH_TORCHBENCH_SOURCE: unset, GitHub (with the listed models' input data); or a git archive of that commit by
# URL, for builders without GitHub. In /opt/torchbench (not under /cache, which the cells mount over), importable
# through a .pth; the requirements of the models of PyTorch's CPU list are added under pins of everything
# installed above (the torch under test, perfdash's transformers and timm), replacing none of it but the
# setuptools torch brought (below 81, as PyTorch's CI has it: ENVIRONMENT_REQUIREMENTS there says why).
ARG PERFDASH_TORCHBENCH_SOURCE
COPY runner/torchbench_install.py runner/suites/data/torchbench.toml /usr/local/lib/perfdash-torchbench/
RUN python /usr/local/lib/perfdash-torchbench/torchbench_install.py --dest /opt/torchbench \
        --list /usr/local/lib/perfdash-torchbench/torchbench.toml
# Editable install: templates/, migrations/ and the suites' data files are read from this tree. Then the torch is
# still the one asked for, or the build fails naming both.
COPY . .
RUN python -m pip install --no-deps -e . \
    && python -m perfdash.torch_spec check "${TORCH_SPEC}"
# The spool of `perfdash ingest --url`: the Jenkinsfile mounts the node volume perfdash-spool here, and a fresh named
# volume takes this directory's owner and mode. Private to the user the cells run as (SPOOL_UID, the Jenkins agent's
# uid: the Jenkinsfile passes it), as whatever is spooled is posted with the real token (perfdash/spool.py).
ARG SPOOL_UID=1000
RUN install -d -m 0700 -o "${SPOOL_UID}" "${PERFDASH_SPOOL_DIR}"

ENV JEMALLOC_LIB=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
    IOMP_LIB=/usr/local/lib/libiomp5.so
WORKDIR /workspace
CMD ["perfdash", "--help"]
