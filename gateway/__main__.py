"""``python -m gateway``: serve the gateway with uvicorn on the configured address."""

from __future__ import annotations

import uvicorn

from gateway.app import create_app
from settings import Settings

if __name__ == "__main__":
    settings = Settings()
    uvicorn.run(create_app(settings), host=settings.gateway_host, port=settings.gateway_port)
