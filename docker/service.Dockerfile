# perfdash service: FastAPI + SQLAlchemy + Postgres driver, no torch (the service never imports it).
#   docker build -f docker/service.Dockerfile -t perfdash-service .
# docker/compose.yaml runs it: `perfdash db upgrade` once, then `perfdash serve`.
FROM python:3.11.11-slim-bookworm

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    PERFDASH_SPOOL_DIR=/var/lib/perfdash/spool

WORKDIR /opt/perfdash
# Dependencies in a layer of their own (cached while only perfdash's code changes), then the tree.
COPY docker/requirements-of.py pyproject.toml ./
RUN python requirements-of.py pyproject.toml service > /tmp/requirements.txt \
    && python -m pip install -r /tmp/requirements.txt \
    && useradd --system --uid 10001 --home-dir /var/lib/perfdash --create-home perfdash
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
