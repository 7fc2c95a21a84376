# The engine's production image. One image runs every process:
#   worker   python worker.py      (the default command)
#   gateway  python -m gateway     (listens on AGUI_GATEWAY_HOST:AGUI_GATEWAY_PORT, 0.0.0.0:8000)
# Configuration comes from the environment only: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
# TEMPORAL_API_KEY, TEMPORAL_TLS* and the AGUI_* variables of settings.Settings.

# --- web: the inbox page's browser libraries, from npm as the lock file pins them
FROM node:20-slim AS web
WORKDIR /web
COPY gateway/web/package.json gateway/web/package-lock.json ./
RUN npm ci --no-audit --no-fund

# --- build: install the project and its runtime dependencies (no test extras) into a venv
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /src
COPY pyproject.toml README.md settings.py worker.py logs.py tracing.py codec.py ./
COPY workflows ./workflows
COPY activities ./activities
COPY gateway ./gateway
# Only the file the gateway serves (gateway/page.py VENDOR); pip installs it as package data.
COPY --from=web /web/node_modules/@json-editor/json-editor/dist/jsoneditor.js \
    ./gateway/web/node_modules/@json-editor/json-editor/dist/jsoneditor.js
RUN pip install . \
    && cd / && python -c "import settings, worker, gateway.app"

# --- runtime: the venv, the worker's entry script, and an unprivileged user
FROM python:3.11-slim AS runtime

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    AGUI_GATEWAY_HOST=0.0.0.0 \
    AGUI_GATEWAY_PORT=8000

RUN groupadd --system --gid 10001 agui \
    && useradd --system --uid 10001 --gid agui --create-home --home-dir /home/agui agui

COPY --from=build /opt/venv /opt/venv
WORKDIR /app
# `python worker.py` needs the script as a file; everything it imports is the installed package.
COPY worker.py ./

USER 10001:10001
# 8000: the gateway; 9464: the worker's metrics (AGUI_METRICS_BIND_ADDRESS in the compose file).
EXPOSE 8000 9464
STOPSIGNAL SIGTERM
CMD ["python", "worker.py"]
