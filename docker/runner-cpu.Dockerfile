# perfdash runner for the Xeon agents (label `xeon`): CPU-only torch, jemalloc, Intel OpenMP, numactl.
#   docker build -f docker/runner-cpu.Dockerfile --build-arg TORCH_SPEC=2.14.1 -t perfdash-runner-cpu .
# TORCH_SPEC is what the nightly benchmarks: a release, a nightly date or a commit (docker/install-torch.sh).
# The CUDA image (runner-cuda.Dockerfile) differs only in the wheel index (cu130 instead of cpu: the CUDA runtime
# libraries come inside the wheels, the driver from the host through the NVIDIA container toolkit) and in carrying
# no jemalloc/OpenMP launcher.
FROM python:3.11.11-slim-bookworm

ARG TORCH_SPEC=2.14.1
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

COPY docker/install-torch.sh /usr/local/bin/install-torch
COPY docker/xeon-launch.sh /usr/local/bin/xeon-launch
RUN install-torch "${TORCH_SPEC}" cpu

WORKDIR /opt/perfdash
COPY . .
# Editable install: templates/, migrations/ and the suites' data files are read from this tree. The runner extra brings
# Intel's OpenMP (/usr/local/lib/libiomp5.so) for --allocator dashboard, with the jemalloc installed above.
# Then the backends of the weekly backend cells (perfdash run --backend onnxruntime|openvino|tensorrt).
RUN python -m pip install -e ".[runner]" \
    && python -m pip install -e ".[backends]"
# The spool of `perfdash ingest --url`: the Jenkinsfile mounts the node volume perfdash-spool here, and a fresh named
# volume takes this directory's owner and mode. Private to the user the cells run as (SPOOL_UID, the Jenkins agent's
# uid: the Jenkinsfile passes it), as whatever is spooled is posted with the real token (perfdash/spool.py).
ARG SPOOL_UID=1000
RUN install -d -m 0700 -o "${SPOOL_UID}" "${PERFDASH_SPOOL_DIR}"

ENV JEMALLOC_LIB=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
    IOMP_LIB=/usr/local/lib/libiomp5.so
WORKDIR /workspace
CMD ["perfdash", "--help"]
