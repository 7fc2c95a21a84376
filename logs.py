"""How every process logs: plain lines for a terminal, or one JSON object per line.

With ``AGUI_LOG_FORMAT=json`` (the compose file sets it) each record is a JSON object
with its time, level, logger and message, and with the thread and run it concerns:
``threadId`` (from the workflow id, in workflow and activity logs too), ``runId`` (the
AG-UI run), and the Temporal ids when Temporal's loggers add them. A log pipeline can
then show one thread's story across the gateway, the worker and its activities.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Literal

from workflows.thread_ids import thread_id_of

LogFormat = Literal["text", "json"]

CONTEXT_FIELDS = ("thread_id", "run_id", "agent", "outcome", "code")
"""``extra=`` fields the engine's own log calls set, copied into the JSON as camelCase."""


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        # Temporal's workflow and activity loggers attach the execution they run in.
        temporal = getattr(record, "temporal_workflow", None) or getattr(
            record, "temporal_activity", None
        )
        if isinstance(temporal, dict):
            thread_id = thread_id_of(str(temporal.get("workflow_id", "")))
            if thread_id is not None:
                entry["threadId"] = thread_id
            entry["temporal"] = temporal
        for field in CONTEXT_FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                head, *rest = field.split("_")
                entry[head + "".join(part.title() for part in rest)] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(log_format: LogFormat) -> None:
    """Send every logger's INFO and above to stderr in ``log_format``."""
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter()
        if log_format == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    )
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
