"""Distributed tracing: one trace per AG-UI run, across gateway, workflow and activities.

Temporal's OpenTelemetry plugin (its ``OpenTelemetryInterceptor``) sits on every client
the engine makes (``settings.connect``) and so on every worker, so the trace context
travels in Temporal headers from the gateway's span, through the run's update, into the
workflow's handling of it and its activities: each run is a trace of its own, although
the thread's workflow lives on.

Tracing is on when the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; spans are then
exported over OTLP (``OTEL_SERVICE_NAME``, ``OTEL_EXPORTER_OTLP_HEADERS`` etc. are
honoured). Without it there is no tracing and no cost.
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from temporalio.client import Plugin
from temporalio.contrib.opentelemetry import OpenTelemetryPlugin, create_tracer_provider


def enabled() -> bool:
    """Whether this process traces: ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set."""
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def configure(service_name: str) -> None:
    """Export this process's spans over OTLP, if :func:`enabled`."""
    if not enabled():
        return
    name = os.environ.get("OTEL_SERVICE_NAME", service_name)
    # Replay-safe: a workflow replaying on another worker does not emit its spans again.
    provider = create_tracer_provider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)


def plugin() -> Plugin:
    """The client (and so worker) plugin that carries traces through Temporal. It needs
    the replay-safe tracer provider that :func:`configure` installs."""
    return OpenTelemetryPlugin(add_temporal_spans=True)
