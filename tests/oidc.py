"""A real OIDC provider for the sign-in tests: ``tests/node/oidc_provider.mjs``
(npm ``oidc-provider``) as a child process on a free loopback port.

Its accounts: ``carol`` and ``dave`` in ``finance``, ``erin`` in ``ops``, ``alice`` in
no group; any password. ID tokens carry ``groups`` when the scope ``groups`` is asked.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.helpers import eventually, free_port

SCRIPT = Path(__file__).resolve().parent / "node" / "oidc_provider.mjs"
CLIENT_ID = "agui-inbox"
CLIENT_SECRET = "agui-inbox-test-client-secret"
SCOPES = "openid profile groups"
STOP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class RunningProvider:
    """A running provider: its issuer, and the client the gateway signs in as."""

    issuer: str
    client_id: str = CLIENT_ID
    client_secret: str = CLIENT_SECRET


def issuer_on(port: int) -> str:
    """The issuer of a provider on ``port``."""
    return f"http://127.0.0.1:{port}"


@asynccontextmanager
async def oidc_provider(
    gateway_url: str, port: int | None = None, timeout: float = 30.0
) -> AsyncIterator[RunningProvider]:
    """The provider, with the gateway at ``gateway_url`` as its one client, until exit.

    Args:
        gateway_url: Its callback and post-logout addresses are the client's.
        port: Where it listens (its issuer's port); a free one by default.
        timeout: How long it may take to answer its discovery document.
    """
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("No node on PATH: the sign-in tests need Node >= 20 (make test).")
    port = port or free_port()
    client = {
        "clientId": CLIENT_ID,
        "clientSecret": CLIENT_SECRET,
        "redirectUri": f"{gateway_url}/inbox/auth/callback",
        "postLogoutRedirectUri": f"{gateway_url}/inbox/auth/signed-out",
    }
    process = await asyncio.create_subprocess_exec(
        node, str(SCRIPT), str(port), json.dumps(client), stdout=asyncio.subprocess.DEVNULL
    )
    issuer = issuer_on(port)
    try:
        async with httpx.AsyncClient(timeout=2) as http:

            async def discovered() -> bool:
                if process.returncode is not None:
                    raise RuntimeError(f"the OIDC provider exited with {process.returncode}")
                try:
                    response = await http.get(f"{issuer}/.well-known/openid-configuration")
                except httpx.TransportError:
                    return False
                return response.status_code == 200

            await eventually(discovered, timeout=timeout, what="the OIDC provider to answer")
        yield RunningProvider(issuer)
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_SECONDS)
            except TimeoutError:
                process.kill()
                await process.wait()
