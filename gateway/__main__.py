"""``python -m gateway``: serve the gateway, for the example agents
(``workflows.agents.EXAMPLES``), with uvicorn on the configured address."""

from __future__ import annotations

import uvicorn

import logs
import tracing
from gateway.app import create_app
from settings import Settings
from workflows.agents import EXAMPLES

if __name__ == "__main__":
    settings = Settings()
    logs.configure(settings.log_format)
    tracing.configure("agui-gateway")
    # log_config=None: uvicorn's loggers go through the format configured above.
    uvicorn.run(
        create_app(EXAMPLES, settings),
        host=settings.gateway_host,
        port=settings.gateway_port,
        log_config=None,
    )
