# perfdash service: FastAPI + SQLAlchemy + Postgres driver, no torch (the service never imports it).
#   docker build -f docker/service.Dockerfile -t perfdash-service .
# docker/compose.yaml runs it: `perfdash db upgrade` once, then `perfdash serve`.
# Its Python packages are docker/service.lock's, exactly: versions and sha256 (scripts/lock-requirements makes it).

# Build stage: the locked packages in a virtual environment, psycopg2 compiled against Debian's libpq (not
# psycopg2-binary, whose bundled libpq its maintainers advise against in production). The compiler stays here.
FROM python:3.11.11-slim-bookworm AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev libpq-dev \
    && rm -rf /var/lib/apt/lists/*
COPY docker/service.lock /tmp/service.lock
RUN python -m venv /opt/venv \
    && /opt/venv/bin/python -m pip install --require-hashes --no-deps -r /tmp/service.lock

FROM python:3.11.11-slim-bookworm

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:${PATH} \
    PERFDASH_SPOOL_DIR=/var/lib/perfdash/spool

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# libpq5: the library psycopg2, built above, links to
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpq5 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/perfdash --create-home perfdash

WORKDIR /opt/perfdash
# Dependencies in a layer of their own (cached while only perfdash's code changes), then the tree.
COPY --from=build /opt/venv /opt/venv
# Editable install: the app reads templates/, static assets and migrations/ from this tree.
COPY . .
RUN python -m pip install --no-deps -e .

USER 10001
# 8000: plain HTTP (this CMD, behind a TLS proxy); 8443: HTTPS with PERFDASH_TLS_CERT_FILE/KEY_FILE (docker/compose.yaml)
EXPOSE 8000
EXPOSE 8443
# Readiness: /healthz/ready answers 503 while the database is unreachable (/healthz/live only says the process runs).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz/ready', timeout=4)"]
CMD ["perfdash", "serve", "--host", "0.0.0.0", "--port", "8000"]
