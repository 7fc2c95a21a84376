"""``make run``: the whole system in one terminal.

Starts the embedded Temporal dev server (unless ``TEMPORAL_ADDRESS`` names one already
running) with the engine's search attributes registered, the worker and the gateway;
restarts the worker or gateway if either dies, as a process manager would; and on Ctrl-C
or SIGTERM stops them in order: gateway, worker, then Temporal, whose SQLite files (the
database and its ``-wal`` beside it) the next ``make run`` reads back with every thread.

The worker runs as a build of a Worker Deployment, from a copy of its code kept in
``.data/builds``: threads stay pinned to the code that ran them, and a start with changed
code deploys itself, moving the threads an earlier start left (:func:`move_to`).

Threads are encrypted in Temporal by default: without ``AGUI_PAYLOAD_KEYS`` the worker and
the gateway get the development key kept in ``.data/payload-keys``, and the Web UI reads
them through the gateway's codec server (:func:`web_ui_codec`).

Before it starts anything it checks that each port it is about to listen on is free, so a
second ``make run`` (or anything else on those ports) is one line, not a launcher that
reports another server's health as its own. The ports come from ``settings.Settings``:
``AGUI_TEMPORAL_PORT``, ``AGUI_TEMPORAL_UI_PORT`` and ``AGUI_GATEWAY_PORT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import (
    Client,
    WorkflowContinuedAsNewError,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.common import WorkerDeploymentVersion
from temporalio.envconfig import ClientConfig
from temporalio.service import RPCError

from gateway.tokens import (
    DEV_PAYLOAD_KEYS,
    DEV_SECRET,
    dev_payload_keys,
    dev_secret,
    dev_session_secret,
    mint,
)
from settings import (
    RUN_COMPRESS_FROM,
    Settings,
    embedded_server_flags,
    fit_embedded_visibility_indexes,
)
from worker import ensure_search_attributes, promote_build
from workflows.versioning import UPGRADE_SIGNAL

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / ".data"
TEMPORAL_CLI = Path(sys.executable).parent / "temporal"
TEMPORAL_HOST = "localhost"
"""Where the dev server listens: its default ``--ip``, for the frontend and the Web UI."""
WEB_UI_SUBJECT = "temporal-web-ui"
"""Whom the Web UI's codec token names."""
DEV_CODEC_GROUP = "agui-codec"
"""The codec group ``make run`` sets when ``AGUI_CODEC_GROUP`` is unset: the Web UI's
token is in it, so it may use the codec server and nothing an admin may."""
WEB_UI_TOKEN_TTL_SECONDS = 30 * 24 * 3600
"""The Web UI's codec token is minted at every start; this outlasts any one run."""
RESTART_DELAY_SECONDS = 1.0
STOP_TIMEOUT_SECONDS = 30.0
BUILDS = DATA / "builds"
"""A copy of each build's worker code, which its worker runs from, kept while workflows are
pinned to it."""
WORKER_CODE = (
    "worker.py",
    "settings.py",
    "logs.py",
    "tracing.py",
    "codec.py",
    "workflows",
    "activities",
)
"""What the worker imports of this tree: a build is a version of these."""
MOVE_POLL_SECONDS = 1.0
"""How often a move signals the next workflows (``MOVES_AT_ONCE``): a pace, so the
moves leave the machine room for the runs clients start meanwhile."""
MOVES_AT_ONCE = 16
"""The most workflows of an earlier build that are signalled to move and have not moved
yet: each move replays its thread on the earlier build and starts its next run on this
one, so signalling a thousand at once would queue a thousand workflow tasks ahead of the
runs clients start meanwhile."""
MOVE_SECONDS = 10.0
"""How long a signalled workflow counts as on its way (``MOVES_AT_ONCE``): a thread
moves at its next rest, so one busy with a long run moves after it, and is signalled
again on the next pass."""


@dataclass
class Service:
    """A child process that is restarted whenever it exits on its own."""

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path = ROOT
    process: asyncio.subprocess.Process | None = None
    restarts: int = 0
    stopping: bool = False
    supervisor: asyncio.Task[None] | None = field(default=None, repr=False)

    async def start(self) -> None:
        # A session of its own: Ctrl-C reaches only this launcher, which stops the
        # children in order instead of all at once.
        self.process = await asyncio.create_subprocess_exec(
            *self.argv, cwd=self.cwd, env=self.env, start_new_session=True
        )
        self.supervisor = asyncio.create_task(self._supervise())

    async def _supervise(self) -> None:
        assert self.process is not None
        while True:
            code = await self.process.wait()
            if self.stopping:
                return
            self.restarts += 1
            log(f"{self.name} exited with {code}; restarting (restart #{self.restarts})")
            await asyncio.sleep(RESTART_DELAY_SECONDS)
            self.process = await asyncio.create_subprocess_exec(
                *self.argv, cwd=self.cwd, env=self.env, start_new_session=True
            )

    async def stop(self) -> None:
        self.stopping = True
        process = self.process
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT_SECONDS)
        except TimeoutError:
            log(f"{self.name} did not stop in {STOP_TIMEOUT_SECONDS:.0f}s; killing it")
            process.kill()
            await process.wait()


def log(message: str) -> None:
    print(f"[run] {message}", flush=True)


@dataclass(frozen=True)
class Port:
    """A port the launcher is about to have a service listen on."""

    what: str
    host: str
    number: int
    variable: str
    """The environment variable that sets it."""


def ports_to_listen_on(settings: Settings, embedded: bool) -> list[Port]:
    """The ports ``make run`` listens on: Temporal's two when it starts its own server."""
    ports = []
    if embedded:
        ports += [
            Port("Temporal", TEMPORAL_HOST, settings.temporal_port, "AGUI_TEMPORAL_PORT"),
            Port(
                "Temporal Web UI", TEMPORAL_HOST, settings.temporal_ui_port, "AGUI_TEMPORAL_UI_PORT"
            ),
        ]
    ports.append(Port("gateway", settings.gateway_host, settings.gateway_port, "AGUI_GATEWAY_PORT"))
    return ports


def in_use(host: str, port: int) -> bool:
    """Whether a server could not listen on ``host:port`` now because something else does.

    Binds as the servers do (every address of ``host``, ``SO_REUSEADDR``, so a closed
    connection's ``TIME_WAIT`` does not count); any other error (say, a host that does not
    resolve) is left for the service itself to report.
    """
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        return False
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    return True
    return False


def port_problems(ports: list[Port]) -> list[str]:
    """One line for each port that is taken or given to two services."""
    problems = []
    variables: dict[int, str] = {}
    for port in ports:
        if port.number in variables:
            problems.append(
                f"[run] {variables[port.number]} and {port.variable} are both {port.number}; "
                "set one of them to another port"
            )
            continue
        variables[port.number] = port.variable
        if in_use(port.host, port.number):
            problems.append(
                f"[run] port {port.number} ({port.what}) is already in use; "
                f"set {port.variable} to another port"
            )
    return problems


async def wait_until_up(url: str, what: str, timeout: float = 60.0) -> None:
    """Wait for ``url`` to answer 200, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2) as http:
        while True:
            try:
                if (await http.get(url)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{what} did not come up within {timeout:.0f}s ({url})")
            await asyncio.sleep(0.2)


def authentication(settings: Settings, env: dict[str, str]) -> list[str]:
    """Make sure the gateway can verify tokens, and say how to get one.

    With no way configured, the gateway verifies tokens signed with the development
    secret (made in ``.data/dev-secret`` on the first start), so ``make run`` needs no
    setup and still lets nobody in without a token; and the inbox page lets anyone sign
    in as any user and groups (``AGUI_INBOX_DEV_SIGNIN``), with sessions signed by a
    secret kept in ``.data/session-secret`` so they outlive a restart. Returns the lines
    to show.
    """
    configured = settings.auth_jwks_url or settings.auth_hs256_secret or settings.auth_anonymous
    if configured:
        return []
    env["AGUI_AUTH_HS256_SECRET"] = dev_secret()
    if not settings.oidc_issuer:
        env["AGUI_INBOX_DEV_SIGNIN"] = "true"
        if settings.session_secret is None:
            env["AGUI_SESSION_SECRET"] = dev_session_secret()
    return [
        f"  Auth            tokens signed with the development secret ({DEV_SECRET})",
        "  A token:        TOKEN=$(.venv/bin/python -m gateway.tokens --sub alice)",
        '                  curl -H "Authorization: Bearer $TOKEN" localhost:'
        f"{settings.gateway_port}/agents",
    ]


def encryption(settings: Settings, env: dict[str, str]) -> str:
    """Encrypt threads in Temporal unless told otherwise: with ``AGUI_PAYLOAD_KEYS``
    unset, the worker and the gateway get the development key, made in
    ``.data/payload-keys`` (owner-only) on the first start and kept, so the next start
    reads what this one wrote. Returns the line to show."""
    if settings.payload_keys is not None:
        return "  Encryption      payloads encrypted with AGUI_PAYLOAD_KEYS"
    env["AGUI_PAYLOAD_KEYS"] = dev_payload_keys()
    return f"  Encryption      payloads encrypted with the development key ({DEV_PAYLOAD_KEYS})"


def compression(
    settings: Settings, env: dict[str, str], version: WorkerDeploymentVersion | None
) -> str:
    """Compress large payloads (``codec.py``) unless told otherwise, once no earlier
    build runs beside this one: an earlier start's code may not read them, and a move
    runs its worker (:func:`move_to`). The start after the move compresses. Returns the
    line to show."""
    if settings.compress_payloads_from is not None:
        return (
            f"  Compression     payloads of {settings.compress_payloads_from} bytes or more "
            "(AGUI_COMPRESS_PAYLOADS_FROM)"
        )
    if version is None:
        return "  Compression     off (AGUI_COMPRESS_PAYLOADS_FROM unset)"
    if any(kept.name != version.build_id for kept in builds()):
        return "  Compression     off until an earlier build's threads have moved (next start)"
    env["AGUI_COMPRESS_PAYLOADS_FROM"] = str(RUN_COMPRESS_FROM)
    return f"  Compression     payloads of {RUN_COMPRESS_FROM // 1024} KiB or more"


def builds() -> list[Path]:
    """The builds kept in :data:`BUILDS`, oldest name first."""
    return [kept for kept in sorted(BUILDS.iterdir()) if not kept.name.startswith(".")]


def web_ui_codec(settings: Settings, env: dict[str, str]) -> tuple[str, str]:
    """The codec endpoint of the embedded Web UI, and what its line says.

    The UI of ``temporal server start-dev`` can be given a codec endpoint, nothing more:
    its page posts payloads there with neither a token nor cookies. So it gets the
    gateway's codec server at an address that carries a token, ``/codec/token/<JWT>``:
    a token of ``temporal-web-ui`` in the codec group alone (``AGUI_CODEC_GROUP``, set
    to ``agui-codec`` when unset), minted with the gateway's secret at every start. Who
    can reach the UI (on localhost only) can read it in the UI's settings; they could as
    well sign in with the development sign-in. The gateway answers the UI's origins on
    ``/codec`` (``AGUI_CODEC_ORIGINS``). Without a secret to sign with (tokens from a
    provider), the UI gets the plain endpoint and decodes nothing until given a way in
    (``docs/operations.md``, "The codec server and the Web UI").
    """
    ui_origins = [
        f"http://{host}:{settings.temporal_ui_port}" for host in ("localhost", "127.0.0.1")
    ]
    env["AGUI_CODEC_ORIGINS"] = ",".join([*settings.codec_origins, *ui_origins])
    endpoint = f"http://localhost:{settings.gateway_port}/codec"
    configured = settings.auth_hs256_secret
    secret = configured.get_secret_value() if configured else env.get("AGUI_AUTH_HS256_SECRET")
    if settings.auth_jwks_url or not secret:
        return endpoint, "(its codec server needs a token: docs/operations.md)"
    group = settings.codec_group or DEV_CODEC_GROUP
    env["AGUI_CODEC_GROUP"] = group
    token = mint(secret, WEB_UI_SUBJECT, [group], WEB_UI_TOKEN_TTL_SECONDS, settings)
    return f"{endpoint}/token/{token}", "(payloads decoded by the gateway's codec server)"


def inbox(settings: Settings, env: dict[str, str]) -> str:
    """The line saying where the inbox page is, and how people sign in to it."""
    address = f"{settings.public_url or f'http://localhost:{settings.gateway_port}'}/inbox"
    if settings.oidc_issuer:
        how = f"sign-in with {settings.oidc_issuer}"
    elif settings.inbox_dev_signin or env.get("AGUI_INBOX_DEV_SIGNIN") == "true":
        how = "development sign-in: any user and groups"
    else:
        how = "sign-in not configured: AGUI_OIDC_ISSUER, docs/operations.md"
    return f"  Inbox           {address}  ({how})"


def copy_worker_code(into: Path) -> None:
    """Copy the worker's code (``WORKER_CODE``) of this tree into ``into``, caches left out."""
    for name in WORKER_CODE:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, into / name)


def keep_build() -> str:
    """Copy the worker's code (``WORKER_CODE``) into ``BUILDS``, named by its digest, and
    return that name: the build's id.

    The worker runs from the copy, so editing the tree while ``make run`` runs changes
    nothing until the next start (a restarted worker included); and the next start can
    run this build again, beside its own, until the workflows pinned to it have moved.
    A copy an earlier start left half made (stopped while copying) is deleted first.
    """
    BUILDS.mkdir(parents=True, exist_ok=True)
    for unfinished in BUILDS.glob(".copy-*"):
        shutil.rmtree(unfinished)
    copy = Path(tempfile.mkdtemp(prefix=".copy-", dir=BUILDS))
    copy_worker_code(copy)
    digest = hashlib.sha256()
    for path in sorted(p for p in copy.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(copy)}\0".encode())
        digest.update(path.read_bytes())
    build = digest.hexdigest()[:12]
    if (BUILDS / build).exists():
        shutil.rmtree(copy)
    else:
        copy.rename(BUILDS / build)
    return build


def versioning(settings: Settings, env: dict[str, str]) -> WorkerDeploymentVersion | None:
    """Run the worker as a build (:func:`keep_build`) of a Worker Deployment named after
    its task queue: each thread keeps its runs in one workflow run pinned to the build's
    code, instead of continuing as new after every run (``docs/operations.md``,
    "Deploying with Worker Versioning"). Returns the build, or ``None`` when
    ``AGUI_WORKER_DEPLOYMENT`` is set: its builds and deploys are the operator's."""
    if settings.worker_deployment is not None:
        return None
    version = WorkerDeploymentVersion(settings.task_queue, keep_build())
    env["AGUI_WORKER_DEPLOYMENT"] = version.deployment_name
    env["AGUI_WORKER_BUILD_ID"] = version.build_id
    return version


async def move_to(
    version: WorkerDeploymentVersion, env: dict[str, str], services: list[Service]
) -> None:
    """Deploy ``version``, as ``docs/operations.md`` says an operator does: make it current,
    then for each earlier build that workflows are still pinned to, run its kept code
    beside it, signal those workflows to move, and once none is left stop its worker and
    forget it. A thread moves at its next rest (a waiting one at once), so nothing an
    earlier start left waits on code that no longer runs. If Temporal fails it meanwhile,
    the builds stay kept, and the next start moves them."""
    try:
        client = await Client.connect(
            **ClientConfig.load_client_connect_config(override_env_vars=env)
        )
        deployment, build = version.deployment_name, version.build_id
        await promote_build(client, deployment, build, over_current=True, timeout=60)
        for kept in builds():
            if kept.name != build:
                await retire(client, kept, version, env, services)
    except (RPCError, RuntimeError) as error:  # RuntimeError: Temporal unreachable
        log(f"could not deploy build {version.build_id} over the earlier ones: {error}")


async def retire(
    client: Client,
    kept: Path,
    version: WorkerDeploymentVersion,
    env: dict[str, str],
    services: list[Service],
) -> None:
    """Move the workflows pinned to build ``kept`` to ``version``, running ``kept``'s
    worker while any is left, then delete ``kept``."""
    build = version.build_id
    pinned = (
        f'TemporalWorkerDeploymentVersion="{version.deployment_name}:{kept.name}" '
        'AND ExecutionStatus="Running"'
    )
    if (await client.count_workflows(pinned)).count:
        worker = Service(
            f"worker {kept.name}",
            [sys.executable, "worker.py"],
            {**env, "AGUI_WORKER_BUILD_ID": kept.name},
            kept,
        )
        services.append(worker)
        await worker.start()
        log(f"moving the workflows of build {kept.name} (an earlier start's code) to {build}")
        while (await client.count_workflows(pinned)).count:
            await move(client, pinned)
        await worker.stop()
        services.remove(worker)
        log(f"build {kept.name}: every workflow moved to {build}")
    shutil.rmtree(kept)


async def move(client: Client, pinned: str) -> None:
    """Signal the workflow runs the query ``pinned`` lists to move to the current build:
    every ``MOVE_POLL_SECONDS``, as many as keep ``MOVES_AT_ONCE`` on their way. The list
    is read once, as the moves go: read whole at each look, it cost the server and this
    process more the more threads were left (``docs/bench.md``)."""
    on_their_way: list[asyncio.Task[None]] = []
    try:
        async for execution in client.list_workflows(pinned):
            while len(on_their_way) >= MOVES_AT_ONCE:
                await asyncio.sleep(MOVE_POLL_SECONDS)
                on_their_way = still_moving(on_their_way)
            handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
            on_their_way.append(asyncio.create_task(move_one(handle)))
        await asyncio.gather(*on_their_way)
    finally:
        for task in on_their_way:
            task.cancel()


def still_moving(moves: list[asyncio.Task[None]]) -> list[asyncio.Task[None]]:
    """Those of ``moves`` not done yet; raises what a done one raised."""
    for done in (task for task in moves if task.done()):
        done.result()
    return [task for task in moves if not task.done()]


async def move_one(handle: WorkflowHandle[Any, Any]) -> None:
    """Signal ``handle``'s workflow run to move; return once it has (the run closed, as
    it continued as new on the current build), or after ``MOVE_SECONDS`` while it is
    busy with a run, which it moves after."""
    with contextlib.suppress(RPCError):  # It ended meanwhile.
        await handle.signal(UPGRADE_SIGNAL)
    with contextlib.suppress(
        WorkflowContinuedAsNewError, WorkflowFailureError, RPCError, TimeoutError
    ):
        async with asyncio.timeout(MOVE_SECONDS):
            await handle.result(follow_runs=False)


async def search_attributes_ready(env: dict[str, str]) -> None:
    """Register the engine's search attributes on the embedded server, and wait until it
    takes them, before the worker and the gateway start: a run the gateway took before
    then would be refused (``worker.ensure_search_attributes``). Then fit the server's
    visibility indexes to them (``settings.fit_embedded_visibility_indexes``)."""
    client = await Client.connect(**ClientConfig.load_client_connect_config(override_env_vars=env))
    await ensure_search_attributes(client)
    dropped, created = await fit_embedded_visibility_indexes(client, DATA / "temporal.sqlite")
    if dropped or created:
        log(
            f"visibility indexes: dropped {len(dropped)} no query uses,"
            f" created {len(created)} for search attributes"
        )


def temporal_argv(settings: Settings, codec_endpoint: str) -> list[str]:
    """The embedded dev server's command line, with its SQLite pragmas.

    ``journal_mode=wal`` lets the server commit by appending to ``temporal.sqlite-wal``
    instead of rewriting pages through a rollback journal: less CPU and I/O per interrupt
    cycle. ``synchronous`` is left at SQLite's default (FULL), so every acknowledged
    commit is on disk before it is acknowledged, as before: an approval the engine
    acknowledged survives even a power loss.
    """
    return [
        str(TEMPORAL_CLI),
        "server",
        "start-dev",
        "--db-filename",
        str(DATA / "temporal.sqlite"),
        *embedded_server_flags(),
        "--port",
        str(settings.temporal_port),
        "--ui-port",
        str(settings.temporal_ui_port),
        "--ui-codec-endpoint",
        codec_endpoint,
        "--log-level",
        "warn",
    ]


async def main(settings: Settings, embedded: bool) -> None:
    env = dict(os.environ)
    auth_lines = authentication(settings, env)
    inbox_line = inbox(settings, env)
    encryption_line = encryption(settings, env)
    services: list[Service] = []
    if embedded:
        DATA.mkdir(exist_ok=True)
        codec_endpoint, ui_note = web_ui_codec(settings, env)
        env["TEMPORAL_ADDRESS"] = f"{TEMPORAL_HOST}:{settings.temporal_port}"
        services.append(Service("temporal", temporal_argv(settings, codec_endpoint), env))
    gateway_port = settings.gateway_port
    version = versioning(settings, env)
    compression_line = compression(settings, env, version)
    worker_code = BUILDS / version.build_id if version else ROOT
    services += [
        Service("worker", [sys.executable, "worker.py"], env, worker_code),
        Service("gateway", [sys.executable, "-m", "gateway"], env),
    ]
    moving: asyncio.Task[None] | None = None

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)

    try:
        for service in services:
            await service.start()
            if service.name == "temporal":
                # The dev server's metrics-free health check: its Web UI answers once the
                # frontend is serving.
                await wait_until_up(
                    f"http://{TEMPORAL_HOST}:{settings.temporal_ui_port}", "Temporal"
                )
                await search_attributes_ready(env)
        await wait_until_up(f"http://127.0.0.1:{gateway_port}/healthz", "The gateway")
        log("up:")
        if embedded:
            log(f"  Temporal        {env['TEMPORAL_ADDRESS']} (data in {DATA / 'temporal.sqlite'})")
            log(f"  Temporal Web UI http://{TEMPORAL_HOST}:{settings.temporal_ui_port}  {ui_note}")
        else:
            log(f"  Temporal        {env['TEMPORAL_ADDRESS']} (external)")
        log(f"  Gateway         http://localhost:{gateway_port}  (agents: GET /agents)")
        if version:
            log(
                f"  Worker          build {version.build_id} of deployment "
                f"{version.deployment_name} (its code: {worker_code})"
            )
            moving = asyncio.create_task(move_to(version, env, services))
        log(inbox_line)
        log(encryption_line)
        log(compression_line)
        for line in auth_lines:
            log(line)
        log("Ctrl-C stops everything.")
        await stop.wait()
    finally:
        log("stopping")
        if moving is not None:
            moving.cancel()
        for service in reversed(services):
            await service.stop()
        log("stopped")


if __name__ == "__main__":
    settings = Settings()
    embedded = "TEMPORAL_ADDRESS" not in os.environ
    problems = port_problems(ports_to_listen_on(settings, embedded))
    if problems:
        raise SystemExit("\n".join(problems))
    asyncio.run(main(settings, embedded))
