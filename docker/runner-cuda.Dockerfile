# perfdash runner for the GPU agents (label `gpu`): torch built for CUDA 13.0.
#   docker build -f docker/runner-cuda.Dockerfile --build-arg TORCH_SPEC=2.15.0.dev20261125@<sha> -t perfdash-runner-cuda .
#   docker run --gpus all ... (the NVIDIA container toolkit maps the host's driver into the container)
# Same Python base as the CPU image: PyTorch's CUDA wheels carry the CUDA runtime, cuDNN and NCCL as pip packages,
# so an nvidia/cuda base image would only add a second, unused CUDA. Triton compiles its launcher with gcc at run
# time, hence build-essential; the driver version is part of the machine fingerprint the runner records.
# TORCH_SPEC has no default and is pinned as in the CPU image (runner-cpu.Dockerfile says how).
# The Inductor and Triton caches below live on the node volume for what only speeds up set-up; a timed run with
# --cold-start (every Jenkins cell) compiles into fresh, empty ones of both (runner.api.cold_cache_env).
# The requirements of perfdash's core and extras, read from pyproject.toml in a stage of their own: the layer that
# installs them is keyed by the list's content, so editing pyproject.toml elsewhere (the version, a tool's settings,
# another extra) keeps that multi-minute layer cached.
FROM python:3.11.11-slim-bookworm AS requirements
COPY docker/requirements-of.py pyproject.toml /src/
RUN python /src/requirements-of.py /src/pyproject.toml runner > /requirements.txt \
    && python /src/requirements-of.py /src/pyproject.toml backends-cuda > /backends.txt

FROM python:3.11.11-slim-bookworm

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    TORCHINDUCTOR_CACHE_DIR=/cache/inductor \
    TRITON_CACHE_DIR=/cache/triton \
    HF_HOME=/cache/huggingface \
    TORCH_HOME=/cache/torch \
    PERFDASH_CACHE_DIR=/cache/perfdash \
    PERFDASH_SPOOL_DIR=/var/lib/perfdash/spool

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential git curl ca-certificates \
    && rm -rf /var/lib/apt/lists/*

COPY docker/install-torch.sh perfdash/torch_spec.py /usr/local/lib/perfdash-torch/
RUN ln -s /usr/local/lib/perfdash-torch/install-torch.sh /usr/local/bin/install-torch

# The CUDA variant of the wheels: the image's own, which perfbisect also uses for nightly wheels (PERFDASH_CUDA_VARIANT).
ARG CUDA_VARIANT=cu130
ARG TORCH_SPEC
ARG TORCH_INDEX_ROOT=https://download.pytorch.org/whl
RUN test -n "${TORCH_SPEC}" || { echo "build with --build-arg TORCH_SPEC=<release|date|version[@commit]|commit>" >&2; exit 2; } \
    && install-torch "${TORCH_SPEC}" "${CUDA_VARIANT}"
# The versions of everything else, locked (docker/runner.lock, made by scripts/lock-requirements), beside torch's pin.
COPY docker/runner.lock /etc/perfdash/runner.lock
ENV PIP_CONSTRAINT="/etc/perfdash/torch-constraints.txt /etc/perfdash/runner.lock" \
    PERFDASH_TORCH_SPEC=${TORCH_SPEC} \
    PERFDASH_CUDA_VARIANT=${CUDA_VARIANT}

WORKDIR /opt/perfdash
COPY --from=requirements /requirements.txt /tmp/requirements.txt
RUN python -m pip install -r /tmp/requirements.txt
# The backends of the weekly backend cells (perfdash run --backend onnxruntime|tensorrt). Their wheels are built for
# one torch release: beside a torch they were not built for, PIP_CONSTRAINT makes pip refuse them, and the image is
# still built for the Inductor cells, with the reason kept in /etc/perfdash/backends-unavailable (the backend cells
# then fail with their own clear error: runner/backends).
COPY --from=requirements /backends.txt /tmp/backends.txt
RUN { python -m pip install -r /tmp/backends.txt > /tmp/backends.log 2>&1 \
         || { tail -5 /tmp/backends.log > /etc/perfdash/backends-unavailable; cat /etc/perfdash/backends-unavailable; }; } \
    && rm -f /tmp/backends.log
# PyTorch's TorchBench for the torchbench suite, at the commit runner/torchbench_install.py pins, from
# PERFDASH_TORCHBENCH_SOURCE: unset, GitHub (with the listed models' input data); or a git archive of that commit by
# URL, for builders without GitHub. In /opt/torchbench (not under /cache, which the cells mount over), importable
# through a .pth; the requirements of the models of PyTorch's GPU list are added under pins of everything
# installed above (the torch under test, perfdash's transformers and timm), replacing none of it but the
# setuptools torch brought (below 81, as PyTorch's CI has it: ENVIRONMENT_REQUIREMENTS there says why).
ARG PERFDASH_TORCHBENCH_SOURCE
COPY runner/torchbench_install.py runner/suites/data/torchbench.gpu.toml /usr/local/lib/perfdash-torchbench/
RUN python /usr/local/lib/perfdash-torchbench/torchbench_install.py --dest /opt/torchbench \
        --list /usr/local/lib/perfdash-torchbench/torchbench.gpu.toml
COPY . .
RUN python -m pip install --no-deps -e . \
    && python -m perfdash.torch_spec check "${TORCH_SPEC}"
# The CUDA extras must be built for the CUDA major version of the torch wheel (read from the installed files, no GPU
# needed). A mismatch is printed here with the package and both versions and kept with the other reasons the backend
# cells cannot run; `perfdash run --backend onnxruntime|tensorrt --device cuda` refuses with the same message.
RUN python -m runner.cuda_extras --record /etc/perfdash/backends-unavailable
# The spool of `perfdash ingest --url`: the Jenkinsfile mounts the node volume perfdash-spool here, and a fresh named
# volume takes this directory's owner and mode. Private to the user the cells run as (SPOOL_UID, the Jenkins agent's
# uid: the Jenkinsfile passes it), as whatever is spooled is posted with the real token (perfdash/spool.py).
ARG SPOOL_UID=1000
RUN install -d -m 0700 -o "${SPOOL_UID}" "${PERFDASH_SPOOL_DIR}"

WORKDIR /workspace
CMD ["perfdash", "--help"]
