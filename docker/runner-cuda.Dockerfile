# perfdash runner for the GPU agents (label `gpu`): torch built for CUDA 13.0.
#   docker build -f docker/runner-cuda.Dockerfile --build-arg TORCH_SPEC=2.14.1 -t perfdash-runner-cuda .
#   docker run --gpus all ... (the NVIDIA container toolkit maps the host's driver into the container)
# Same Python base as the CPU image: PyTorch's CUDA wheels carry the CUDA runtime, cuDNN and NCCL as pip packages,
# so an nvidia/cuda base image would only add a second, unused CUDA. Triton compiles its launcher with gcc at run
# time, hence build-essential; the driver version is part of the machine fingerprint the runner records.
FROM python:3.11.11-slim-bookworm

ARG TORCH_SPEC=2.14.1
ARG CUDA_VARIANT=cu130
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

COPY docker/install-torch.sh /usr/local/bin/install-torch
RUN install-torch "${TORCH_SPEC}" "${CUDA_VARIANT}"

WORKDIR /opt/perfdash
COPY . .
# Then the backends of the weekly backend cells (perfdash run --backend onnxruntime|openvino|tensorrt).
RUN python -m pip install -e ".[runner]" \
    && python -m pip install -e ".[backends-cuda]"
# The spool of `perfdash ingest --url`: the Jenkinsfile mounts the node volume perfdash-spool here, and a fresh named
# volume takes this directory's owner and mode. Private to the user the cells run as (SPOOL_UID, the Jenkins agent's
# uid: the Jenkinsfile passes it), as whatever is spooled is posted with the real token (perfdash/spool.py).
ARG SPOOL_UID=1000
RUN install -d -m 0700 -o "${SPOOL_UID}" "${PERFDASH_SPOOL_DIR}"

WORKDIR /workspace
CMD ["perfdash", "--help"]
