"""docker-compose.yml and the image it builds agree with the project, checked without Docker.

The file is read as data (PyYAML) and its ``${VAR:-default}`` / ``${VAR:?error}``
interpolation is resolved here the way Compose does, so every check is on the values a
container would really get. Two checks use outside tools when they are installed and skip
otherwise: JSON Schema validation against the Compose Specification schema that
docker-compose ships, and ``docker-compose config`` itself (Debian's ``docker-compose``
package; it parses, validates and interpolates without a Docker engine).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import shutil
import subprocess
import tomllib
from collections.abc import Mapping
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from settings import Settings
from workflows import search_attributes

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"

ENGINE_SERVICES = ("worker", "gateway")
WORKER_COMMAND = ["python", "worker.py"]
GATEWAY_COMMAND = ["python", "-m", "gateway"]
# What the stack needs from whoever runs it: everything else must have a default.
# (The gateway's secret may come as a file, so the gateway, not Compose, requires it.)
REQUIRED_VARIABLES = {"POSTGRES_PASSWORD"}
TEST_ENV = {
    "POSTGRES_PASSWORD": "compose-test-password",
    "AGUI_AUTH_HS256_SECRET": "compose-test-secret-0123456789abcdef",
}
SECRET_NAME = re.compile(
    r"PASSWORD|PWD|SECRET(?!S_DIR)|(?<!PASS_ACCESS_)TOKEN|API_KEY|PAYLOAD_KEYS", re.IGNORECASE
)
SECRETS_DIR = "/run/secrets"
ENGINE_SECRETS = ("auth_hs256_secret", "payload_keys", "session_secret", "oidc_client_secret")
"""The engine's secret settings: files in ``AGUI_SECRETS_DIR`` or variables."""
TOP_LEVEL_KEYS = {"version", "name", "services", "networks", "volumes", "secrets", "configs"}
# `temporal operator search-attribute create --type` values.
CLI_SEARCH_ATTRIBUTE_TYPES = {"Text", "Keyword", "Int", "Double", "Bool", "Datetime", "KeywordList"}
# Where an installed docker-compose 1.x keeps the Compose Specification's JSON Schema: the
# PyPI wheel (importable package `compose`) or Debian's package (system dist-packages).
DEBIAN_COMPOSE_SCHEMA = Path("/usr/lib/python3/dist-packages/compose/config/compose_spec.json")


# --- Compose interpolation ---------------------------------------------------------------

_INTERPOLATION = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<invalid>))"
)


class MissingVariableError(Exception):
    """A ``${VAR:?message}`` variable is unset (or empty)."""


def interpolate_str(text: str, env: Mapping[str, str]) -> str:
    """Resolve Compose's ``$VAR``, ``${VAR}``, ``${VAR[:]-default}``, ``${VAR[:]?err}``, ``$$``."""

    def replace(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        if match["invalid"] is not None:
            raise ValueError(f"invalid interpolation format in {text!r}")
        name = match["braced"] or match["named"]
        value = env.get(name)
        op, arg = match["op"], match["arg"] or ""
        unset = value is None or (value == "" and op is not None and op.startswith(":"))
        if op is not None and op.endswith("?") and unset:
            raise MissingVariableError(f"{name}: {arg}")
        if op is not None and op.endswith("-") and unset:
            return arg
        return value or ""

    return _INTERPOLATION.sub(replace, text)


def interpolate(node: Any, env: Mapping[str, str]) -> Any:
    """Interpolate every string value (not keys) of a parsed compose document."""
    if isinstance(node, str):
        return interpolate_str(node, env)
    if isinstance(node, dict):
        return {key: interpolate(value, env) for key, value in node.items()}
    if isinstance(node, list):
        return [interpolate(value, env) for value in node]
    return node


def variables(node: Any) -> dict[str, set[str]]:
    """Every interpolated variable of a document, by its operator ('' for none)."""
    found: dict[str, set[str]] = {}
    if isinstance(node, str):
        for match in _INTERPOLATION.finditer(node):
            name = match["braced"] or match["named"]
            if name:
                found.setdefault(name, set()).add(match["op"] or "")
    elif isinstance(node, dict | list):
        for value in node.values() if isinstance(node, dict) else node:
            for name, ops in variables(value).items():
                found.setdefault(name, set()).update(ops)
    return found


# --- helpers --------------------------------------------------------------------------------


def load_raw() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(document, dict), "docker-compose.yml must be a mapping"
    return document


def environment(service: Mapping[str, Any]) -> dict[str, str]:
    """A service's environment as a dict of strings (mapping or list syntax)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def depends_on(service: Mapping[str, Any]) -> dict[str, str]:
    """A service's dependencies and their conditions (list syntax means service_started)."""
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def port_mappings(service: Mapping[str, Any]) -> list[tuple[str | None, int | None, int]]:
    """``(host_ip, published, target)`` for each port of a service (short or long syntax)."""
    result: list[tuple[str | None, int | None, int]] = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            published = port.get("published")
            result.append(
                (
                    port.get("host_ip"),
                    None if published is None else int(published),
                    int(port["target"]),
                )
            )
            continue
        spec = str(port).split("/", 1)[0]
        parts = spec.rsplit(":", 2)
        host_ip = parts[0] if len(parts) == 3 else None
        published = int(parts[-2]) if len(parts) >= 2 and parts[-2] else None
        result.append((host_ip, published, int(parts[-1])))
    return result


def seconds(duration: str | int | float) -> float:
    """A Compose duration ('1m30s', '45s', '500ms') in seconds."""
    if isinstance(duration, int | float):
        return float(duration)
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, f"bad duration {duration!r}"
    return sum(float(number) * units[unit] for number, unit in parts)


def one_shot_services(services: Mapping[str, Any]) -> set[str]:
    """Services others wait on to *finish* (service_completed_successfully)."""
    return {
        dependency
        for service in services.values()
        for dependency, condition in depends_on(service).items()
        if condition == "service_completed_successfully"
    }


def compose_schema_path() -> Path | None:
    """The Compose Specification JSON Schema of an installed docker-compose, if any."""
    spec = importlib.util.find_spec("compose")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "config" / "compose_spec.json"
            if candidate.is_file():
                return candidate
    return DEBIAN_COMPOSE_SCHEMA if DEBIAN_COMPOSE_SCHEMA.is_file() else None


def settings_from(env: Mapping[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The Settings a process started with exactly these AGUI_* variables would read."""
    for name in Settings.model_fields:
        monkeypatch.delenv(f"AGUI_{name.upper()}", raising=False)
    for key, value in env.items():
        if key.startswith("AGUI_"):
            monkeypatch.setenv(key, value)
    return Settings()


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    """docker-compose.yml as written (interpolation unresolved)."""
    return load_raw()


@pytest.fixture(scope="module")
def compose(raw: dict[str, Any]) -> dict[str, Any]:
    """docker-compose.yml as Compose resolves it with only the required variables set."""
    resolved: dict[str, Any] = interpolate(raw, TEST_ENV)
    return resolved


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = compose["services"]
    return result


# --- the file's shape -----------------------------------------------------------------------


def test_the_file_is_well_formed(compose: dict[str, Any], services: dict[str, Any]) -> None:
    unknown = {key for key in compose if key not in TOP_LEVEL_KEYS and not key.startswith("x-")}
    assert not unknown, f"unknown top-level keys {unknown}"
    declared_volumes = set(compose.get("volumes") or {})
    for name, service in services.items():
        assert re.fullmatch(r"[a-zA-Z0-9._-]+", name), name
        assert "image" in service or "build" in service, f"{name} has neither image nor build"
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0] if isinstance(volume, str) else volume.get("source")
            if source and not source.startswith((".", "/", "~")):
                assert source in declared_volumes, f"{name} mounts undeclared volume {source}"
        for dependency in depends_on(service):
            assert dependency in services, f"{name} depends on unknown service {dependency}"


def test_third_party_images_are_pinned(services: dict[str, Any]) -> None:
    for name, service in services.items():
        if "build" in service:
            continue
        image = service["image"]
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
        assert tag and tag != "latest" and re.search(r"\d", tag), f"{name}: pin {image}"


def test_against_the_compose_specification_schema(compose: dict[str, Any]) -> None:
    path = compose_schema_path()
    if path is None:
        pytest.skip(
            "no Compose Specification JSON Schema installed (it ships with docker-compose: "
            "`apt-get install docker-compose`); the structure is checked by hand above"
        )
    schema = json.loads(path.read_text())
    # docker-compose 1.29's schema names draft 2019-09 by a URL jsonschema does not know.
    if "2019-09" in schema.get("$schema", ""):
        validator_class: Any = jsonschema.Draft201909Validator
    else:
        validator_class = jsonschema.validators.validator_for(schema)
    errors = sorted(validator_class(schema).iter_errors(compose), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    executable = shutil.which("docker-compose")
    if executable is None:
        pytest.skip(
            "docker-compose is not installed (Debian: `apt-get install docker-compose`); "
            "`docker-compose config` validates and interpolates the file without an engine"
        )
    env_file = tmp_path / "empty.env"  # a developer's .env must not change the outcome
    env_file.write_text("")
    command = [executable, "--env-file", str(env_file), "-f", str(COMPOSE_FILE), "config", "-q"]
    base_env = {"PATH": "/usr/bin:/bin"}
    ok = subprocess.run(
        command, env={**base_env, **TEST_ENV}, capture_output=True, text=True, timeout=30
    )
    assert ok.returncode == 0, ok.stderr
    missing = subprocess.run(command, env=base_env, capture_output=True, text=True, timeout=30)
    assert missing.returncode != 0, "POSTGRES_PASSWORD must be required"


# --- configuration from the environment ---------------------------------------------------


def test_only_the_secrets_are_required(raw: dict[str, Any]) -> None:
    required = {name for name, ops in variables(raw).items() if ops & {":?", "?"}}
    assert required == REQUIRED_VARIABLES
    for name, ops in variables(raw).items():
        assert ops <= {":-", "-", ":?", "?"}, f"${{{name}}} needs a default or :? error"
    with pytest.raises(MissingVariableError):
        interpolate(raw, {})
    with pytest.raises(MissingVariableError):
        interpolate(raw, {"POSTGRES_PASSWORD": ""})


def test_secrets_are_never_written_in_the_file(raw: dict[str, Any]) -> None:
    for name, service in raw["services"].items():
        for key, value in environment(service).items():
            if SECRET_NAME.search(key):
                assert re.fullmatch(r"\$\{[A-Za-z_][A-Za-z0-9_]*(:?\?[^}]*|:-)\}", value), (
                    f"{name}.{key} must come from a variable (${{VAR:?...}} or ${{VAR:-}})"
                )


def test_every_engine_variable_is_a_setting(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Settings.model_config.get("env_prefix") == "AGUI_"
    # AGUI_SECRETS_DIR is read by settings.py itself: it says where Settings' files are.
    fields = {f"AGUI_{name.upper()}" for name in Settings.model_fields} | {"AGUI_SECRETS_DIR"}
    for name, service in services.items():
        unknown = {key for key in environment(service) if key.startswith("AGUI_")} - fields
        assert not unknown, f"{name} sets {unknown}, which settings.Settings does not read"
    for name in ENGINE_SERVICES:
        settings_from(environment(services[name]), monkeypatch)  # values parse as Settings


def test_worker_and_gateway_share_temporal_and_the_task_queue(
    raw: dict[str, Any], services: dict[str, Any]
) -> None:
    raw_envs = [environment(raw["services"][name]) for name in ENGINE_SERVICES]
    for key in ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "AGUI_TASK_QUEUE"):
        values = {env.get(key) for env in raw_envs}
        assert len(values) == 1 and None not in values, f"{key} differs: {values}"
    env = environment(services["worker"])
    assert env["AGUI_TASK_QUEUE"] == Settings.model_fields["task_queue"].default
    overridden = interpolate(raw, {**TEST_ENV, "AGUI_TASK_QUEUE": "q", "TEMPORAL_NAMESPACE": "n"})
    for name in ENGINE_SERVICES:
        assert environment(overridden["services"][name])["AGUI_TASK_QUEUE"] == "q"
    # Every process that talks to Temporal uses the namespace the server creates.
    temporal_env = environment(overridden["services"]["temporal"])
    assert temporal_env["DEFAULT_NAMESPACE"] == "n"
    for name, service in overridden["services"].items():
        if "TEMPORAL_NAMESPACE" in environment(service):
            assert environment(service)["TEMPORAL_NAMESPACE"] == "n", name


def test_temporal_address_points_at_the_temporal_service(services: dict[str, Any]) -> None:
    temporal_ports = {target for _, _, target in port_mappings(services["temporal"])}
    assert services["temporal"]["image"].startswith(
        ("temporalio/auto-setup:", "temporalio/server:")
    )
    assert "postgres" in environment(services["temporal"]).get("DB", "")
    users = [
        name for name, service in services.items() if "TEMPORAL_ADDRESS" in environment(service)
    ]
    assert set(ENGINE_SERVICES) <= set(users)
    for name in users:
        host, _, port = environment(services[name])["TEMPORAL_ADDRESS"].rpartition(":")
        assert host == "temporal" and int(port) in temporal_ports | {7233}, name
        if name != "temporal":
            assert depends_on(services[name]).get("temporal") == "service_healthy", name


# --- the engine's processes ---------------------------------------------------------------


def test_worker_and_gateway_run_the_project_commands(services: dict[str, Any]) -> None:
    assert services["worker"]["command"] == WORKER_COMMAND
    assert services["gateway"]["command"] == GATEWAY_COMMAND
    assert (ROOT / "worker.py").is_file() and (ROOT / "gateway" / "__main__.py").is_file()
    for name in ENGINE_SERVICES:
        assert "build" in services[name] and "entrypoint" not in services[name], name
        assert services[name].get("image") == services["worker"].get("image"), "one image"


def test_the_worker_scales(services: dict[str, Any]) -> None:
    worker = services["worker"]
    assert "container_name" not in worker and "hostname" not in worker
    assert all(published is None for _, published, _ in port_mappings(worker))


def test_the_worker_drains_before_it_is_killed(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_from(environment(services["worker"]), monkeypatch)
    grace = seconds(services["worker"].get("stop_grace_period", "10s"))
    assert grace > settings.worker_shutdown_seconds


def test_the_gateway_port_is_the_one_it_listens_on(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway = services["gateway"]
    settings = settings_from(environment(gateway), monkeypatch)
    assert settings.gateway_host == "0.0.0.0", "a mapped port needs the gateway on 0.0.0.0"
    assert port_mappings(gateway) == [(None, 8000, settings.gateway_port)]
    probe = " ".join(gateway["healthcheck"]["test"])
    assert "/healthz" in probe
    assert "AGUI_GATEWAY_PORT" in probe or f":{settings.gateway_port}/" in probe


def test_published_ports(raw: dict[str, Any], services: dict[str, Any]) -> None:
    # The Web UI on this host only, unless its operator publishes it on purpose.
    assert port_mappings(services["temporal-ui"]) == [("127.0.0.1", 8233, 8080)]
    published = interpolate(raw, {**TEST_ENV, "TEMPORAL_UI_BIND": "0.0.0.0"})
    assert port_mappings(published["services"]["temporal-ui"]) == [("0.0.0.0", 8233, 8080)]
    assert port_mappings(services["temporal"]) == [("127.0.0.1", 7233, 7233)]
    assert "ports" not in services["postgresql"], "the database stays on the compose network"


# --- search attributes ----------------------------------------------------------------------


def test_the_registered_search_attributes_are_the_engines(services: dict[str, Any]) -> None:
    [name] = [n for n, s in services.items() if "SEARCH_ATTRIBUTES" in environment(s)]
    service = services[name]
    assert service["image"].startswith("temporalio/admin-tools:")
    pairs = dict(pair.split("=", 1) for pair in environment(service)["SEARCH_ATTRIBUTES"].split())
    assert set(pairs.values()) <= CLI_SEARCH_ATTRIBUTE_TYPES
    expected = {key.name: key.indexed_value_type.name for key in search_attributes.ALL}
    registered = {attr: kind.upper() for attr, kind in pairs.items()}
    assert registered == {attr: kind.replace("_", "") for attr, kind in expected.items()}
    script = " ".join(service.get("entrypoint") or []) + " " + " ".join(service["command"])
    assert "$SEARCH_ATTRIBUTES" in script and "temporal operator search-attribute" in script
    assert re.search(r"\bcreate --name\b", script)
    assert service.get("restart", "no") == "no", "a one-shot must not restart"
    for engine in ENGINE_SERVICES:
        assert depends_on(services[engine]).get(name) == "service_completed_successfully"


# --- health -----------------------------------------------------------------------------------


def test_long_running_services_have_health_checks(services: dict[str, Any]) -> None:
    one_shots = one_shot_services(services)
    for name, service in services.items():
        if name in one_shots:
            continue
        check = service.get("healthcheck")
        assert check and not check.get("disable"), f"{name} has no health check"
        test = check["test"]
        assert (isinstance(test, str) and test) or test[0] in ("CMD", "CMD-SHELL"), name
        for key in ("interval", "timeout", "start_period"):
            if key in check:
                seconds(check[key])


def test_dependencies_wait_for_health_checks(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for dependency, condition in depends_on(service).items():
            assert condition in ("service_healthy", "service_completed_successfully"), (
                f"{name} starts before {dependency} is ready ({condition})"
            )
            if condition == "service_healthy":
                check = services[dependency].get("healthcheck")
                assert check and not check.get("disable"), f"{name} waits on {dependency}"


# --- the image --------------------------------------------------------------------------------


def dockerignore_excludes(path: str) -> bool:
    """Whether .dockerignore keeps ``path`` out of the build context (last match wins)."""
    excluded = False
    for line in DOCKERIGNORE.read_text().splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negated = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        if fnmatch(path, pattern) or fnmatch(path.split("/", 1)[0], pattern):
            excluded = not negated
    return excluded


def test_the_image_installs_the_whole_project() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = project["tool"]["setuptools"]
    needed = {package.split(".", 1)[0] for package in setuptools["packages"]}
    needed |= {f"{module}.py" for module in setuptools["py-modules"]}
    needed |= {"pyproject.toml", project["project"]["readme"]}
    dockerfile = DOCKERFILE.read_text()
    copied = {
        Path(source).as_posix().strip("/")
        for line in re.findall(r"^COPY (?!--from)(?:--\S+ )*(.+)$", dockerfile, re.MULTILINE)
        for source in line.split()[:-1]
    }
    assert needed <= copied, f"the Dockerfile does not copy {needed - copied}"
    assert not [path for path in needed if dockerignore_excludes(path)], ".dockerignore"
    assert dockerignore_excludes(".venv") and dockerignore_excludes(".git")


def test_the_image_runs_both_processes_as_a_user() -> None:
    dockerfile = DOCKERFILE.read_text()
    stages = dict(re.findall(r"^FROM (\S+) AS (\S+)", dockerfile, re.MULTILINE))
    # Python everywhere but the stage that installs the inbox page's npm packages.
    assert stages.pop("node:20-slim") == "web"
    assert stages and all(image == "python:3.11-slim" for image in stages)
    assert re.search(r"^RUN .*pip install \.(\s|$)", dockerfile, re.MULTILINE), "pip install ."
    assert "[test]" not in dockerfile
    users = re.findall(r"^USER (\S+)", dockerfile, re.MULTILINE)
    assert users and users[-1].split(":")[0] not in ("root", "0")
    [cmd] = re.findall(r"^CMD (.+)$", dockerfile, re.MULTILINE)
    assert json.loads(cmd) == WORKER_COMMAND
    env = dict(re.findall(r"\b(AGUI_[A-Z_]+)=(\S+)", dockerfile))
    assert env.get("AGUI_GATEWAY_HOST") == "0.0.0.0"
    fields = {f"AGUI_{name.upper()}" for name in Settings.model_fields}
    assert set(env) <= fields


# --- secrets, encryption and the Web UI -----------------------------------------------------


def test_engine_secrets_come_from_files_or_the_environment(
    raw: dict[str, Any], services: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both processes read secrets from files in a read-only ``/run/secrets`` (a host
    folder) or from variables left empty unless given; the files' names are the ones
    ``settings.Settings`` reads there."""
    for name in ENGINE_SERVICES:
        env = environment(services[name])
        assert env["AGUI_SECRETS_DIR"] == SECRETS_DIR, name
        [mount] = [
            volume for volume in services[name]["volumes"] if volume["target"] == SECRETS_DIR
        ]
        assert mount["type"] == "bind" and mount["read_only"] is True, name
        assert mount["source"] == "./secrets"
        # The same keys for both: the gateway decodes what the worker encrypts.
        assert environment(raw["services"][name])["AGUI_PAYLOAD_KEYS"] == "${AGUI_PAYLOAD_KEYS:-}"
    gateway = environment(raw["services"]["gateway"])
    for field in ENGINE_SECRETS:
        assert gateway[f"AGUI_{field.upper()}"] == f"${{AGUI_{field.upper()}:-}}", field

    values = {
        "auth_hs256_secret": "a-secret-from-a-file-0123456789abcdef",
        "payload_keys": f"k1:{base64.b64encode(bytes(32)).decode()}",
        "session_secret": "a-session-secret-from-a-file-0123456789",
        "oidc_client_secret": "a-client-secret",
    }
    for field, value in values.items():
        (tmp_path / f"agui_{field}").write_text(value)
        # The environment wins over files (the suite sets AGUI_PAYLOAD_KEYS).
        monkeypatch.delenv(f"AGUI_{field.upper()}", raising=False)
    read = Settings(_secrets_dir=tmp_path)  # type: ignore[call-arg]
    for field, value in values.items():
        assert getattr(read, field).get_secret_value() == value, field


def test_the_web_ui_decodes_through_the_gateway_and_is_read_only(
    raw: dict[str, Any], services: dict[str, Any]
) -> None:
    ui = environment(services["temporal-ui"])
    gateway = environment(services["gateway"])
    for key in (
        "TEMPORAL_AUTH_ENABLED",
        "TEMPORAL_AUTH_PROVIDER_URL",
        "TEMPORAL_AUTH_ISSUER_URL",
        "TEMPORAL_AUTH_CLIENT_ID",
        "TEMPORAL_AUTH_CLIENT_SECRET",
        "TEMPORAL_AUTH_CALLBACK_URL",
        "TEMPORAL_AUTH_SCOPES",
        "TEMPORAL_CODEC_PASS_ACCESS_TOKEN",
        "TEMPORAL_CODEC_INCLUDE_CREDENTIALS",
    ):
        assert key in ui, key
        assert environment(raw["services"]["temporal-ui"])[key].startswith(f"${{{key}:-"), key
    assert ui["TEMPORAL_AUTH_ENABLED"] == "false" and ui["TEMPORAL_AUTH_CLIENT_SECRET"] == ""
    assert ui["TEMPORAL_DISABLE_WRITE_ACTIONS"] == "true"
    # The UI's page calls the gateway's codec server where this host publishes it, and
    # the gateway answers that page's origin on /codec.
    [(_, published, _)] = port_mappings(services["gateway"])
    assert ui["TEMPORAL_CODEC_ENDPOINT"] == f"http://localhost:{published}/codec"
    assert ui["TEMPORAL_CORS_ORIGINS"] in gateway["AGUI_CODEC_ORIGINS"].split(",")
    origin = "https://temporal.example.com"
    overridden = environment(
        interpolate(raw, {**TEST_ENV, "AGUI_CODEC_ORIGINS": origin})["services"]["gateway"]
    )
    assert overridden["AGUI_CODEC_ORIGINS"] == origin


def test_the_inboxs_sign_in_is_configurable(
    services: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway = environment(services["gateway"])
    for key in ("AGUI_OIDC_ISSUER", "AGUI_OIDC_CLIENT_ID", "AGUI_PUBLIC_URL"):
        assert key in gateway, key
    settings = settings_from(gateway, monkeypatch)
    assert settings.oidc_issuer is None and settings.payload_keys is None


def test_the_worker_health_check_uses_the_engines_connection(services: dict[str, Any]) -> None:
    probe = "\n".join(services["worker"]["healthcheck"]["test"])
    assert "connect(Settings())" in probe and "Client.connect" not in probe


def test_local_state_and_secrets_never_reach_the_image() -> None:
    for path in (".data", ".data/payload-keys", ".env", "secrets", "secrets/agui_payload_keys"):
        assert dockerignore_excludes(path), path
    copied = re.findall(r"^COPY (?!--from)(?:--\S+ )*(.+)$", DOCKERFILE.read_text(), re.MULTILINE)
    sources = [source for line in copied for source in line.split()[:-1]]
    assert not [s for s in sources if s in (".", "./") or s.startswith((".data", "secrets"))]
