"""What operators watch: ``GET /healthz`` for orchestrators (the one route without a
token), ``GET /metrics`` for Prometheus (with a bearer token, as its scrape config
can send)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.deps import AUTHENTICATED, ClientDep, MetricsDep, SettingsDep
from gateway.errors import TEMPORAL_ERRORS, temporal_error
from workflows.models import Model

router = APIRouter()


class Health(Model):
    """What ``GET /healthz`` answers, with 200 when ``ok`` and 503 when not."""

    status: Literal["ok", "unavailable"]
    temporal: str
    """``ok``, or why the gateway cannot use Temporal (with an error id for the log,
    never Temporal's own text: this route needs no token)."""


@router.get("/openapi.json", dependencies=AUTHENTICATED, include_in_schema=False)
async def openapi(request: Request) -> dict[str, Any]:
    """The gateway's OpenAPI description."""
    app: FastAPI = request.app
    return app.openapi()


@router.get("/metrics", dependencies=AUTHENTICATED)
async def prometheus(metrics: MetricsDep) -> Response:
    """Prometheus metrics: the gateway's (``agui_gateway_*``) and, when the gateway
    made its own Temporal client, the SDK's (``temporal_*``)."""
    return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


@router.get(
    "/healthz", responses={503: {"model": Health, "description": "Temporal is unavailable"}}
)
async def healthz(client: ClientDep, settings: SettingsDep, response: Response) -> Health:
    """Whether the gateway can reach Temporal."""
    timeout = timedelta(seconds=settings.healthz_timeout_seconds)
    try:
        healthy = await client.service_client.check_health(timeout=timeout)
        detail = "ok" if healthy else "Temporal reports its service as not serving"
    except TEMPORAL_ERRORS as err:
        healthy, detail = False, temporal_error(err).message
    if not healthy:
        response.status_code = 503
    return Health(status="ok" if healthy else "unavailable", temporal=detail)
