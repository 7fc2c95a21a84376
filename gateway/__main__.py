"""``python -m gateway``: serve the gateway, for the example agents
(``workflows.agents.EXAMPLES``), with uvicorn on the configured address."""

from __future__ import annotations

import sys

import uvicorn

import logs
import tracing
from gateway import collector
from gateway.app import create_app
from gateway.auth import AuthConfigError
from settings import Settings
from workflows.agents import EXAMPLES

if __name__ == "__main__":
    settings = Settings()
    logs.configure(settings.log_format)
    collector.configure(settings.gateway_gc_threshold)
    tracing.configure("agui-gateway")
    try:
        app = create_app(EXAMPLES, settings)
    except AuthConfigError as error:
        sys.exit(f"gateway: {error}")
    # log_config=None: uvicorn's loggers go through the format configured above. uvloop
    # and httptools, not asyncio's loop and h11: less CPU for every request and every
    # event the gateway relays (docs/bench.md, "The event loop").
    uvicorn.run(
        app,
        host=settings.gateway_host,
        port=settings.gateway_port,
        log_config=None,
        loop="uvloop",
        http="httptools",
        timeout_graceful_shutdown=settings.gateway_shutdown_seconds,
    )
