"""The engine as deployed, each part a process of its own, all on loopback.

``make run``'s layout: the embedded Temporal dev server on a SQLite file in WAL mode
(``settings.EMBEDDED_SQLITE_PRAGMAS``, as ``scripts/run.py`` starts it), its visibility
indexes fitted (``settings.fit_embedded_visibility_indexes``), ``worker.py``
and ``python -m gateway``, serving the example agents. Unlike ``bench/stack.py``, which
runs worker and gateway in the bench's own process, this lets a bench read each
process's memory and CPU. Nothing of the environment's Temporal or engine settings leaks
in: the processes get a fresh database in a directory of the caller's, free ports, a
fresh task queue and a fresh token secret, large payloads compressed as ``make run``
compresses them, and payload encryption and Worker Versioning only as the caller asks.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import SecretStr
from temporalio.client import Client
from temporalio.converter import DataConverter

from bench.stack import TEMPORAL_CLI, free_port
from settings import (
    RUN_COMPRESS_FROM,
    Settings,
    embedded_server_flags,
    fit_embedded_visibility_indexes,
)
from worker import ensure_search_attributes, promote_first_build

ROOT = Path(__file__).resolve().parent.parent
STARTUP_SECONDS = 60.0
STOP_SECONDS = 30.0


@dataclass(frozen=True)
class Deployed:
    """What a bench talks to, and the processes it may watch."""

    client: Client
    """A client of the dev server, with the engine's data converter."""
    settings: Settings
    """The engine's settings: its task queue, the gateway's token secret."""
    base_url: str
    """The gateway's ``http://127.0.0.1:<port>``."""
    server_pid: int
    worker_pid: int
    gateway_pid: int
    database: Path
    """The dev server's SQLite file (its ``-wal`` beside it)."""

    def database_bytes(self) -> int:
        """The size of the dev server's database: its file, its WAL and its shared
        memory."""
        return sum(
            path.stat().st_size
            for path in self.database.parent.glob(f"{self.database.name}*")
            if path.is_file()
        )


MB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    """The resident memory of process ``pid`` (``VmRSS``, Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"process {pid} reports no VmRSS")


@asynccontextmanager
async def deployed(
    directory: Path,
    clients: int,
    *,
    payload_keys: SecretStr | None = None,
    versioned: bool = False,
) -> AsyncIterator[Deployed]:
    """Start the dev server on ``directory/temporal.sqlite``, then the worker and the
    gateway, for one principal's ``clients`` clients at once; stop them in the reverse
    order on exit.

    The gateway lets the principal hold twice as many streams: a client that has read a
    stream to its end may send its next run before the gateway has let go of the last
    one, which at exactly ``clients`` it would answer with 429.

    Args:
        payload_keys: The keys worker and gateway encrypt payloads with; none without.
        versioned: Run the worker as the first build of a Worker Deployment of its own,
            current from the start, as ``make run`` does.

    Raises:
        RuntimeError: A process did not come up within ``STARTUP_SECONDS``.
    """
    database = directory / "temporal.sqlite"
    temporal_port, gateway_port = free_port(), free_port()
    address = f"127.0.0.1:{temporal_port}"
    settings = Settings(
        task_queue=f"bench-waiting-{uuid.uuid4()}",
        auth_hs256_secret=SecretStr(secrets.token_urlsafe(32)),
        max_streams_per_principal=2 * clients,
        payload_keys=payload_keys,
        compress_payloads_from=RUN_COMPRESS_FROM,
        worker_deployment=f"bench-{uuid.uuid4()}" if versioned else None,
        worker_build_id="bench" if versioned else None,
    )
    secret = settings.auth_hs256_secret
    assert secret is not None
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TEMPORAL_", "AGUI_"))
    } | {
        "TEMPORAL_ADDRESS": address,
        "AGUI_TASK_QUEUE": settings.task_queue,
        "AGUI_AUTH_HS256_SECRET": secret.get_secret_value(),
        "AGUI_MAX_STREAMS_PER_PRINCIPAL": str(settings.max_streams_per_principal),
        "AGUI_GATEWAY_HOST": "127.0.0.1",
        "AGUI_GATEWAY_PORT": str(gateway_port),
        "AGUI_COMPRESS_PAYLOADS_FROM": str(settings.compress_payloads_from),
    }
    if payload_keys is not None:
        env["AGUI_PAYLOAD_KEYS"] = payload_keys.get_secret_value()
    if settings.worker_deployment is not None and settings.worker_build_id is not None:
        env["AGUI_WORKER_DEPLOYMENT"] = settings.worker_deployment
        env["AGUI_WORKER_BUILD_ID"] = settings.worker_build_id
    logs = (directory / "processes.log").open("ab")
    started: list[asyncio.subprocess.Process] = []

    async def start(*argv: str) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=ROOT, env=env, stdout=logs, stderr=logs, start_new_session=True
        )
        started.append(process)
        return process

    try:
        server = await start(*server_argv(database, temporal_port))
        client = await connected(address, settings.data_converter())
        # Usable before the first run, its indexes fitted, as ``make run`` does
        # (``scripts/run.py``).
        await ensure_search_attributes(client)
        await fit_embedded_visibility_indexes(client, database)
        worker = await start(sys.executable, "worker.py")
        if versioned:
            await promote_first_build(client, settings)
        gateway = await start(sys.executable, "-m", "gateway")
        base_url = f"http://127.0.0.1:{gateway_port}"
        await healthy(base_url, started)
        yield Deployed(client, settings, base_url, server.pid, worker.pid, gateway.pid, database)
    finally:
        for process in reversed(started):
            await stop(process)
        logs.close()


def server_argv(database: Path, port: int) -> list[str]:
    """The dev server's command line as ``make run`` starts it (its SQLite file on
    ``database``, the embedded server's settings), headless, on loopback ``port``."""
    return [
        str(TEMPORAL_CLI),
        *("server", "start-dev", "--headless", "--log-level", "warn"),
        *("--db-filename", str(database)),
        *("--ip", "127.0.0.1", "--port", str(port)),
        *embedded_server_flags(),
    ]


async def connected(address: str, data_converter: DataConverter) -> Client:
    """A client of the dev server at ``address``, once it answers."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        try:
            return await Client.connect(address, data_converter=data_converter)
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def healthy(base_url: str, started: list[asyncio.subprocess.Process]) -> None:
    """Wait until the gateway answers ``/healthz`` with 200: it sees Temporal.

    Raises:
        RuntimeError: A process exited, or the deadline passed.
    """
    deadline = time.monotonic() + STARTUP_SECONDS
    async with httpx.AsyncClient(base_url=base_url, timeout=5) as http:
        while True:
            for process in started:
                if process.returncode is not None:
                    raise RuntimeError(f"process {process.pid} exited with {process.returncode}")
            try:
                if (await http.get("/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the gateway did not become healthy")
            await asyncio.sleep(0.2)


async def stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, then SIGKILL after ``STOP_SECONDS``."""
    if process.returncode is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), STOP_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
