"""``make run``: its launcher (``scripts/run.py``) refuses a taken port before it starts
anything, sets up development sign-in and says where the inbox is, encrypts threads
with a development key and points the Web UI at the codec server, and the target
installs nothing from npm."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from types import ModuleType

import httpx
import jwt
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    SignalWorkflowInput,
    WorkflowExecutionStatus,
)
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkerDeploymentVersion,
)

import codec
from bench.reads import counted
from gateway import tokens
from gateway.streaming import thread_handle
from settings import (
    EMBEDDED_INDEXED_COLUMN,
    EMBEDDED_QUERIED_COLUMNS,
    RUN_COMPRESS_FROM,
    Settings,
    fit_embedded_visibility_indexes,
)
from tests.helpers import (
    TEST_SECRET,
    eventually,
    free_port,
    gateway_client,
    new_thread,
    post_run,
    run_input,
    serve_gateway,
    serve_stack,
    wait_until_healthy,
)
from tests.processes import DevServer, child_processes
from tests.test_deploys import approve
from tests.test_worker_versioning import pinned_to
from worker import ensure_search_attributes, register_search_attributes
from workflows import search_attributes
from workflows.thread_ids import workflow_id_for

ROOT = Path(__file__).resolve().parent.parent
PORT_VARIABLES = ("AGUI_TEMPORAL_PORT", "AGUI_TEMPORAL_UI_PORT", "AGUI_GATEWAY_PORT")
EXIT_TIMEOUT_SECONDS = 10.0
"""How long the launcher may take to refuse (it imports the settings, then checks)."""


@pytest.fixture
def launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``scripts/run.py`` as a module, keeping its development secrets in ``tmp_path``."""
    monkeypatch.setattr(tokens, "DEV_SECRET", tmp_path / "dev-secret")
    monkeypatch.setattr(tokens, "DEV_SESSION_SECRET", tmp_path / "session-secret")
    monkeypatch.setattr(tokens, "DEV_PAYLOAD_KEYS", tmp_path / "payload-keys")
    spec = importlib.util.spec_from_file_location("run_script", ROOT / "scripts" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered, as an imported module is: its dataclasses look themselves up there.
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


@contextmanager
def listening() -> Iterator[int]:
    """A loopback port that something listens on for the block."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port: int = sock.getsockname()[1]
        yield port


def accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.parametrize(
    ("taken", "embedded"),
    [
        ("AGUI_TEMPORAL_PORT", True),
        ("AGUI_TEMPORAL_UI_PORT", True),
        ("AGUI_GATEWAY_PORT", True),
        ("AGUI_GATEWAY_PORT", False),
    ],
)
def test_a_taken_port_is_one_line_and_nothing_starts(taken: str, embedded: bool) -> None:
    """With one of its ports taken, the launcher exits non-zero at once with one line on
    stderr naming that port and its variable, having started nothing."""
    env = {name: value for name, value in os.environ.items() if name != "TEMPORAL_ADDRESS"}
    others = [name for name in PORT_VARIABLES if name != taken]
    *ports, external = [free_port() for _ in range(len(others) + 1)]
    env.update({name: str(port) for name, port in zip(others, ports, strict=True)})
    if not embedded:
        # Nothing listens there: the launcher must not need it to refuse.
        env["TEMPORAL_ADDRESS"] = f"127.0.0.1:{external}"

    with listening() as port:
        env[taken] = str(port)
        launcher = subprocess.Popen(
            [sys.executable, "scripts/run.py"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            stdout, stderr = launcher.communicate(timeout=EXIT_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            # It started something: let it stop all it started before the test fails.
            launcher.send_signal(signal.SIGTERM)
            launcher.communicate(timeout=60)
            raise

    assert launcher.returncode != 0
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert f"port {port} " in lines[0]
    assert f"set {taken} to another port" in lines[0]
    # The launcher logs each start and stop on stdout: it said nothing, and nothing it
    # would have started listens on the ports it was given.
    assert stdout == ""
    assert not any(accepts_connections(other) for other in ports)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_run_installs_the_inbox_pages_libraries_and_nothing_else_of_node() -> None:
    """From a fresh clone (``--always-make``: every stamp out of date), ``make run``
    installs the inbox page's browser libraries and not the test client; the other
    Python-only targets run no npm; ``make test`` installs both."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    }

    def recipes(target: str) -> str:
        return subprocess.run(
            ["make", "--always-make", "--dry-run", target],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    run = recipes("run")
    assert "pip install" in run and "npm ci --prefix gateway/web" in run
    assert "tests/node" not in run, f"make run installs the test client:\n{run}"
    for target in ("bench", "bench-waiting", "lint", "histories"):
        commands = recipes(target)
        assert "pip install" in commands
        assert "npm" not in commands, f"make {target} runs npm:\n{commands}"
    test = recipes("test")
    assert "npm ci --prefix tests/node" in test and "npm ci --prefix gateway/web" in test


def test_with_the_development_secret_anyone_signs_in_to_the_inbox_across_restarts(
    launcher: ModuleType, tmp_path: Path
) -> None:
    settings = Settings(gateway_port=8123)
    env: dict[str, str] = {}
    launcher.authentication(settings, env)

    assert env["AGUI_INBOX_DEV_SIGNIN"] == "true"
    session_secret = env["AGUI_SESSION_SECRET"]
    assert len(session_secret) >= 32
    assert session_secret != env["AGUI_AUTH_HS256_SECRET"]
    assert (tmp_path / "session-secret").stat().st_mode & 0o077 == 0
    assert launcher.inbox(settings, env) == (
        "  Inbox           http://localhost:8123/inbox  (development sign-in: any user and groups)"
    )
    # The next start signs sessions with the same secret: nobody is signed out.
    again: dict[str, str] = {}
    launcher.authentication(settings, again)
    assert again["AGUI_SESSION_SECRET"] == session_secret


def test_with_a_provider_or_real_tokens_there_is_no_development_sign_in(
    launcher: ModuleType,
) -> None:
    oidc = Settings(oidc_issuer="https://idp.example", oidc_client_id="agui-inbox")
    env: dict[str, str] = {}
    launcher.authentication(oidc, env)
    assert "AGUI_INBOX_DEV_SIGNIN" not in env and "AGUI_SESSION_SECRET" not in env
    assert launcher.inbox(oidc, env).endswith("/inbox  (sign-in with https://idp.example)")

    tokens_only = Settings(auth_hs256_secret="a-secret-of-the-operators-0123456789")
    env = {}
    assert launcher.authentication(tokens_only, env) == []
    assert env == {}
    assert "sign-in not configured" in launcher.inbox(tokens_only, env)


def test_threads_are_encrypted_with_a_development_key_kept_across_restarts(
    launcher: ModuleType, tmp_path: Path
) -> None:
    env: dict[str, str] = {}
    line = launcher.encryption(Settings(payload_keys=None), env)
    keys = codec.PayloadKeys.parse(env["AGUI_PAYLOAD_KEYS"])
    assert keys.active == "dev"
    assert (tmp_path / "payload-keys").stat().st_mode & 0o077 == 0
    kept = tmp_path / "payload-keys"
    assert line == f"  Encryption      payloads encrypted with the development key ({kept})"
    again: dict[str, str] = {}
    launcher.encryption(Settings(payload_keys=None), again)
    assert again == env

    own = f"mine:{codec.new_key()}"
    env = {}
    assert launcher.encryption(Settings(payload_keys=own), env).endswith("with AGUI_PAYLOAD_KEYS")
    assert env == {}


async def test_the_web_ui_decodes_through_the_codec_server_with_a_codec_token(
    launcher: ModuleType,
) -> None:
    """The embedded UI's codec endpoint carries a token of the codec group alone, which the
    gateway ``make run`` starts accepts there, for the UI's origin."""
    settings = Settings(gateway_port=8123, temporal_ui_port=8124, payload_keys=None)
    env: dict[str, str] = {}
    launcher.authentication(settings, env)
    launcher.encryption(settings, env)
    endpoint, note = launcher.web_ui_codec(settings, env)
    assert note == "(payloads decoded by the gateway's codec server)"
    prefix = "http://localhost:8123/codec/token/"
    assert endpoint.startswith(prefix)
    token = endpoint.removeprefix(prefix)
    claims = jwt.decode(token, env["AGUI_AUTH_HS256_SECRET"], algorithms=["HS256"])
    assert (claims["sub"], claims["groups"]) == ("temporal-web-ui", ["agui-codec"])
    assert env["AGUI_CODEC_GROUP"] == "agui-codec"
    assert env["AGUI_CODEC_ORIGINS"] == "http://localhost:8124,http://127.0.0.1:8124"

    gateway = Settings(
        auth_hs256_secret=env["AGUI_AUTH_HS256_SECRET"],
        payload_keys=env["AGUI_PAYLOAD_KEYS"],
        codec_group=env["AGUI_CODEC_GROUP"],
        codec_origins=env["AGUI_CODEC_ORIGINS"],
    )
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'"hello"')
    body = json_format.MessageToDict(Payloads(payloads=[plain]))
    headers = {"Origin": "http://localhost:8124", "X-Namespace": "default"}
    # No Temporal needed: the codec server never calls it (the client connects lazily).
    async with serve_gateway(gateway, None) as url, httpx.AsyncClient(base_url=url) as http:
        sealed = await http.post(f"/codec/token/{token}/encode", json=body, headers=headers)
        assert sealed.status_code == 200, sealed.text
        assert sealed.headers["access-control-allow-origin"] == "http://localhost:8124"
        decoded = await http.post(f"/codec/token/{token}/decode", json=sealed.json())
        assert json_format.ParseDict(decoded.json(), Payloads()).payloads == [plain]


def test_without_a_secret_to_sign_with_the_web_ui_gets_the_plain_endpoint(
    launcher: ModuleType,
) -> None:
    provider = Settings(
        auth_jwks_url="https://idp.example/jwks",
        auth_issuer="https://idp.example",
        auth_audience="agui",
        temporal_ui_port=8124,
    )
    env: dict[str, str] = {}
    launcher.authentication(provider, env)
    endpoint, note = launcher.web_ui_codec(provider, env)
    assert endpoint == "http://localhost:8000/codec" and "needs a token" in note
    assert "AGUI_CODEC_GROUP" not in env


def test_the_embedded_server_keeps_its_sqlite_file_in_wal_mode_with_full_sync(
    launcher: ModuleType,
) -> None:
    """``make run``'s server journals to a write-ahead log and leaves ``synchronous`` at
    SQLite's default (FULL): no acknowledged decision is lost on power loss
    (``docs/operations.md``, "Storage settings of the embedded server")."""
    argv = launcher.temporal_argv(Settings(), "http://localhost:8000/codec")
    pragmas = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--sqlite-pragma"]
    assert pragmas == ["journal_mode=wal"]
    assert argv[argv.index("--db-filename") + 1] == str(ROOT / ".data" / "temporal.sqlite")


def indexed_columns(database: Path) -> set[str]:
    """The columns of the embedded server's visibility table that have an index."""
    with closing(sqlite3.connect(database)) as db:
        rows = db.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index'"
            " AND tbl_name = 'executions_visibility' AND sql IS NOT NULL"
        ).fetchall()
    return {found[1] for (sql,) in rows if (found := EMBEDDED_INDEXED_COLUMN.search(sql))}


async def attribute_columns(client: Client) -> dict[str, str]:
    """The namespace's custom search attributes, by the visibility column that holds each."""
    described = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=client.namespace)
    )
    return dict(described.config.custom_search_attribute_aliases)


async def test_the_embedded_server_indexes_the_visibility_columns_queries_use_and_no_other(
    tmp_path: Path,
) -> None:
    """``make run`` drops the indexes of the visibility columns that nothing queries, keeps
    those Temporal's views and features and the engine's attributes use, and gives an
    attribute registered later an index of its own; a restart brings nothing back, and a
    query on a column without an index still finds what it asks for (``docs/bench.md``,
    "The embedded server's visibility indexes")."""
    database = tmp_path / "temporal.sqlite"
    server = DevServer(database)
    try:
        client = await server.start()
        await ensure_search_attributes(client)
        every = indexed_columns(database)
        engines = {
            column
            for column in await attribute_columns(client)
            if not column.startswith(("KeywordList", "Text"))
        }
        assert engines and EMBEDDED_QUERIED_COLUMNS | engines < every

        dropped, created = await fit_embedded_visibility_indexes(client, database)
        fitted = indexed_columns(database)
        assert fitted == EMBEDDED_QUERIED_COLUMNS | engines
        assert {"history_length", "Bool01", "Int01", "Double01"}.isdisjoint(fitted)
        assert (len(dropped), created) == (len(every) - len(fitted), [])

        kind = f"NoWorker{uuid.uuid4().hex}"
        status = search_attributes.THREAD_STATUS
        handle = await client.start_workflow(
            kind,
            id=f"wf-{uuid.uuid4()}",
            task_queue=f"tq-{uuid.uuid4()}",
            search_attributes=TypedSearchAttributes([SearchAttributePair(status, "waiting")]),
        )
        await handle.terminate()
        found = [
            f'WorkflowType = "{kind}" AND {status.name} = "waiting"',
            f'WorkflowType = "{kind}" AND HistoryLength > 0',  # no index
        ]

        async def all_found() -> bool:
            return [(await client.count_workflows(q)).count for q in found] == [1, 1]

        await eventually(all_found, what="the workflow, by an indexed column and another")

        customer = SearchAttributeKey.for_keyword("TestCustomer")
        await register_search_attributes(client, [customer])

        async def registered() -> bool:
            return customer.name in (await attribute_columns(client)).values()

        await eventually(registered, what="the new attribute's column")
        await server.stop()
        client = await server.start()
        assert indexed_columns(database) == fitted

        dropped, created = await fit_embedded_visibility_indexes(client, database)
        [column] = [
            c for c, name in (await attribute_columns(client)).items() if name == customer.name
        ]
        assert (dropped, created) == ([], [f"by_{column.lower()}"])
        assert indexed_columns(database) == fitted | {column}
        await eventually(all_found, what="the workflow after the restart")
        assert (await client.count_workflows(f'{customer.name} = "x"')).count == 0
    finally:
        await server.stop()


def test_a_build_is_a_kept_copy_of_the_workers_code_named_by_its_digest(
    launcher: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make run``'s worker runs from a copy of its code: the same code is the same build,
    any change a new one, the tree's caches are not part of it, and a copy an earlier
    start left half made is not kept."""
    tree = tmp_path / "tree"
    for name in launcher.WORKER_CODE:
        if name.endswith(".py"):
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_text(f"# {name}\n")
        else:
            (tree / name / "__pycache__").mkdir(parents=True)
            (tree / name / "__init__.py").write_text("")
            (tree / name / "__pycache__" / "cached.pyc").write_bytes(b"\0")
    monkeypatch.setattr(launcher, "ROOT", tree)
    monkeypatch.setattr(launcher, "BUILDS", tmp_path / "builds")
    # A copy a start stopped while copying left behind.
    (tmp_path / "builds" / ".copy-interrupted" / "workflows").mkdir(parents=True)

    first = launcher.keep_build()
    assert launcher.keep_build() == first
    kept = tmp_path / "builds" / first
    assert (kept / "workflows" / "__init__.py").exists()
    assert not (kept / "workflows" / "__pycache__").exists()
    (tree / "workflows" / "__pycache__" / "cached.pyc").write_bytes(b"\1")
    assert launcher.keep_build() == first

    (tree / "activities" / "__init__.py").write_text("# changed\n")
    second = launcher.keep_build()
    assert second != first
    assert sorted(p.name for p in (tmp_path / "builds").iterdir()) == sorted([first, second])
    changed = tmp_path / "builds" / second / "activities" / "__init__.py"
    assert changed.read_text() == "# changed\n"


def test_make_run_versions_its_worker_unless_a_deployment_is_configured(
    launcher: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launcher, "BUILDS", tmp_path / "builds")
    env: dict[str, str] = {}
    version = launcher.versioning(Settings(task_queue="tq-mine"), env)
    assert (version.deployment_name, env["AGUI_WORKER_DEPLOYMENT"]) == ("tq-mine", "tq-mine")
    assert env["AGUI_WORKER_BUILD_ID"] == version.build_id
    assert (tmp_path / "builds" / version.build_id / "worker.py").exists()

    env = {}
    operated = Settings(worker_deployment="agui", worker_build_id="b1")
    assert launcher.versioning(operated, env) is None
    assert env == {}


@contextmanager
def launched(tree: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """``scripts/run.py`` of ``tree`` running for the block, then stopped as Ctrl-C does."""
    process = subprocess.Popen([sys.executable, "scripts/run.py"], cwd=tree, env=env)
    try:
        yield process
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0


async def test_a_start_with_changed_code_moves_the_threads_of_the_earlier_build(
    launcher: ModuleType, client: Client, tmp_path: Path
) -> None:
    """A thread waits on build 1's code; ``make run`` is stopped, the worker's code edited,
    and started again: build 2 runs, build 1's worker runs beside it from the kept copy
    until the thread has moved, then is stopped and its copy deleted; the approval is
    taken on build 2. Against an existing Temporal server, as the tests share one."""
    tree = tmp_path / "engine"
    (tree / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "run.py", tree / "scripts")
    launcher.copy_worker_code(tree)
    port = free_port()
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "AGUI_TASK_QUEUE": f"tq-{uuid.uuid4()}",
        "AGUI_GATEWAY_PORT": str(port),
        "AGUI_AUTH_HS256_SECRET": TEST_SECRET,
        "AGUI_PAYLOAD_KEYS": f"test:{codec.new_key()}",
    }
    builds = tree / ".data" / "builds"
    thread_id = new_thread()
    async with gateway_client(f"http://127.0.0.1:{port}") as http:
        with launched(tree, env):
            await wait_until_healthy(http, timeout=60, what="make run's gateway")
            events = await post_run(http, "demo", run_input(thread_id, "r1", "mail a@example.com"))
            interrupts = events[-1]["outcome"]["interrupts"]
            [first] = [kept.name for kept in builds.iterdir()]
            assert (await pinned_to(client, thread_id))[0] == first

        agents = tree / "workflows" / "agents" / "__init__.py"
        agents.write_text(agents.read_text() + "# changed\n")
        with launched(tree, env) as process:
            await wait_until_healthy(http, timeout=60, what="make run's gateway again")

            async def moved() -> bool:
                kept = [kept.name for kept in builds.iterdir()]
                pinned = (await pinned_to(client, thread_id))[0]
                return len(kept) == 1 and kept[0] != first and pinned == kept[0]

            await eventually(moved, timeout=60, what="the thread to move to the new build")

            async def one_worker() -> bool:
                workers = child_processes(process.pid).values()
                return sum(b"worker.py" in argv for argv in workers) == 1

            await eventually(one_worker, what="the earlier build's worker to stop")
            events = await post_run(http, "demo", approve(thread_id, interrupts[0]))
            assert events[-1]["outcome"] == {"type": "success"}


async def test_an_earlier_builds_workflows_move_a_few_at_a_time(
    launcher: ModuleType, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every workflow run listed is signalled and moves (continues as new), and the next
    is signalled only once one on its way has moved: the runs clients start meanwhile
    queue behind a few moves, never behind all of them."""
    monkeypatch.setattr(launcher, "MOVES_AT_ONCE", 2)
    signalled: dict[str, float] = {}
    recording = counted(client, SignalTimes(signalled))
    async with serve_stack(client) as stack:
        threads = [new_thread() for _ in range(5)]
        for thread_id in threads:
            await post_run(stack.http, "demo", run_input(thread_id, "r1", "mail a@example.com"))
        # Each thread rests in the workflow run it continued as new into after its run.
        runs = [(await thread_handle(client, t).describe()).run_id for t in threads]
        quoted = ", ".join(f"'{run}'" for run in runs)
        listed = f"RunId IN ({quoted})"

        async def all_listed() -> bool:
            return (await client.count_workflows(listed)).count == len(runs)

        await eventually(all_listed, what="the threads' workflow runs in visibility")
        await launcher.move(recording, f'{listed} AND ExecutionStatus="Running"')

    closed: dict[str, float] = {}
    for thread_id, run in zip(threads, runs, strict=True):
        handle = client.get_workflow_handle(workflow_id_for(thread_id), run_id=run)
        described = await handle.describe()
        assert described.status == WorkflowExecutionStatus.CONTINUED_AS_NEW
        assert described.close_time is not None
        closed[run] = described.close_time.timestamp()
    assert set(signalled) == set(runs)
    for run, at in signalled.items():
        on_their_way = [other for other in runs if signalled[other] <= at < closed[other]]
        assert run in on_their_way and len(on_their_way) <= 2


class SignalTimes(Interceptor):
    """Notes when each workflow run was signalled, by run id."""

    def __init__(self, times: dict[str, float]) -> None:
        self.times = times

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _SignalTimes(next, self.times)


class _SignalTimes(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, times: dict[str, float]) -> None:
        super().__init__(next)
        self.times = times

    async def signal_workflow(self, input: SignalWorkflowInput) -> None:
        assert input.run_id is not None
        self.times[input.run_id] = time.time()
        await self.next.signal_workflow(input)


def test_large_payloads_are_compressed_once_no_earlier_build_runs(
    launcher: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An earlier start's code may not read them, and a move runs it beside this one."""
    monkeypatch.delenv("AGUI_COMPRESS_PAYLOADS_FROM", raising=False)
    monkeypatch.setattr(launcher, "BUILDS", tmp_path)
    version = WorkerDeploymentVersion("agui-threads", "current")
    (tmp_path / "current").mkdir()
    (tmp_path / ".copying").mkdir()

    def compressing(
        settings: Settings, deployed: WorkerDeploymentVersion | None = version
    ) -> tuple[str | None, str]:
        env: dict[str, str] = {}
        line = launcher.compression(settings, env, deployed)
        return env.get("AGUI_COMPRESS_PAYLOADS_FROM"), line

    assert compressing(Settings()) == (
        str(RUN_COMPRESS_FROM),
        "  Compression     payloads of 16 KiB or more",
    )
    own, line = compressing(Settings(compress_payloads_from=1000))
    assert own is None and "1000 bytes or more" in line, "the operator's own, as it is"
    own, line = compressing(Settings(), None)
    assert own is None and "off" in line, "an operator's deployment: its builds are theirs"
    (tmp_path / "earlier").mkdir()
    own, line = compressing(Settings())
    assert own is None and "off until an earlier build's threads have moved" in line
