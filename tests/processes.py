"""The engine as real processes, for tests that ``kill -9`` them.

Each worker is ``python worker.py`` and each gateway ``python -m gateway``, started as
``make run`` and ``docker-compose.yml`` start them; a Temporal dev server can run as the
``temporal`` CLI process with a SQLite file.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from temporalio.client import Client
from temporalio.service import RPCError

from settings import Settings, embedded_server_flags
from tests.helpers import (
    TEMPORAL_CLI,
    TEST_SECRET,
    eventually,
    free_port,
    gateway_client,
    wait_until_healthy,
)

ROOT = Path(__file__).resolve().parent.parent


def child_processes(parent: int) -> dict[int, list[bytes]]:
    """The command lines of ``parent``'s child processes, by pid."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (comm) state ppid ...": comm may hold spaces, so split after it.
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue  # exited while we looked
        if ppid == parent:
            found[int(stat.parent.name)] = argv
    return found


class Process:
    """A child process that a test can kill without warning."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self._popen = subprocess.Popen(argv, cwd=ROOT, env=env)

    @property
    def alive(self) -> bool:
        return self._popen.poll() is None

    async def kill(self) -> None:
        """``kill -9``: no shutdown handler runs, nothing is drained or flushed."""
        self._popen.kill()
        await asyncio.to_thread(self._popen.wait)

    async def stop(self, timeout: float) -> int:
        """SIGTERM, as a process manager stops it; its exit code, once it has exited
        (``subprocess.TimeoutExpired`` if not within ``timeout`` seconds)."""
        self._popen.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self._popen.wait, timeout)


@dataclass
class Gateway:
    """A gateway process and an HTTP client of it."""

    process: Process
    http: httpx.AsyncClient


@dataclass
class Engine:
    """Workers and gateways on one task queue of one Temporal server; whatever is still
    alive when the test ends is killed."""

    temporal_address: str
    task_queue: str = field(default_factory=lambda: f"tq-{uuid.uuid4()}")
    env: dict[str, str] = field(default_factory=dict)
    """Further environment for every process (``AGUI_*`` settings)."""
    processes: list[Process] = field(default_factory=list)
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    def _environment(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "TEMPORAL_ADDRESS": self.temporal_address,
            "AGUI_TASK_QUEUE": self.task_queue,
            "AGUI_AUTH_HS256_SECRET": TEST_SECRET,
            **self.env,
            **extra,
        }

    def start_worker(self, command: Sequence[str] = ("worker.py",)) -> Process:
        """A worker process: ``python worker.py``, or ``python <command>``."""
        worker = Process([sys.executable, *command], self._environment())
        self.processes.append(worker)
        return worker

    async def start_gateway(self) -> Gateway:
        """A gateway process, once its ``/healthz`` answers 200."""
        port = free_port()
        process = Process(
            [sys.executable, "-m", "gateway"], self._environment(AGUI_GATEWAY_PORT=str(port))
        )
        self.processes.append(process)
        http = gateway_client(f"http://127.0.0.1:{port}", timeout=60)
        self.clients.append(http)

        await wait_until_healthy(http, what="the gateway process")
        return Gateway(process, http)

    async def close(self) -> None:
        for http in self.clients:
            await http.aclose()
        for process in self.processes:
            if process.alive:
                await process.kill()


@asynccontextmanager
async def engine(temporal_address: str, **env: str) -> AsyncIterator[Engine]:
    """An :class:`Engine` against ``temporal_address``; ``env`` as ``AGUI_*`` variables."""
    running = Engine(temporal_address, env=env)
    try:
        yield running
    finally:
        await running.close()


class DevServer:
    """``temporal server start-dev`` on a SQLite file, as a process that can be killed.

    Args:
        database: The SQLite file.
        ui_codec_endpoint: Serve the Web UI (on ``ui_url``), pointed at this codec
            server; without it, the server is headless.
    """

    def __init__(self, database: Path, ui_codec_endpoint: str | None = None) -> None:
        self.database = database
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.process: Process | None = None
        self.ui_codec_endpoint = ui_codec_endpoint
        self.ui_port = free_port()
        self.ui_url = f"http://127.0.0.1:{self.ui_port}"

    def _ui_arguments(self) -> list[str]:
        if self.ui_codec_endpoint is None:
            return ["--headless"]
        return [
            "--ui-port",
            str(self.ui_port),
            "--ui-codec-endpoint",
            self.ui_codec_endpoint,
            # The machine's network is closed.
            "--ui-disable-news-fetch",
        ]

    async def start(self) -> Client:
        """Start the server (again) on the same port and file; its client once it serves."""
        self.process = Process(
            [
                str(TEMPORAL_CLI),
                "server",
                "start-dev",
                "--db-filename",
                str(self.database),
                *embedded_server_flags(),
                "--ip",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--http-port",
                str(free_port()),
                "--metrics-port",
                str(free_port()),
                *self._ui_arguments(),
                "--log-level",
                "error",
            ],
            dict(os.environ),
        )
        client: Client | None = None

        async def serving() -> bool:
            nonlocal client
            try:
                client = await Client.connect(
                    self.address, data_converter=Settings().data_converter()
                )
                await client.count_workflows()
                return True
            except (RuntimeError, RPCError):
                return False

        await eventually(serving, timeout=60, what="the Temporal dev server")
        assert client is not None
        return client

    async def kill(self) -> None:
        assert self.process is not None
        await self.process.kill()

    async def stop(self) -> None:
        """Kill the server if it runs: a test must not leave it behind."""
        if self.process is not None and self.process.alive:
            await self.process.kill()
