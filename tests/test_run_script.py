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
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import ModuleType

import httpx
import jwt
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

import codec
from gateway import tokens
from settings import Settings
from tests.helpers import serve_gateway

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


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports nothing listens on right now (held together while
    they are picked, so no two are the same)."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


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
    *ports, external = free_ports(len(others) + 1)
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
