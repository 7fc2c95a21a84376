# The engine's image: the same image runs the worker (`python worker.py`, the default)
# and the gateway (`python -m gateway`).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md settings.py worker.py ./
COPY workflows ./workflows
COPY activities ./activities
COPY gateway ./gateway
RUN pip install --no-cache-dir . && useradd --create-home --uid 10001 agui
USER agui

ENV AGUI_GATEWAY_HOST=0.0.0.0
EXPOSE 8000
CMD ["python", "worker.py"]
