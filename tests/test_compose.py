"""docker-compose.yml agrees with the project (Docker does not run here: checked as data)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from settings import Settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    result: dict[str, Any] = compose["services"]
    return result


def test_worker_and_gateway_run_the_project_commands(services: dict[str, Any]) -> None:
    assert services["worker"]["command"] == ["python", "worker.py"]
    assert services["gateway"]["command"] == ["python", "-m", "gateway"]
    assert "container_name" not in services["worker"], "the worker must scale"


def test_every_engine_variable_is_a_setting(services: dict[str, Any]) -> None:
    fields = {f"AGUI_{name.upper()}" for name in Settings.model_fields}
    for name in ("worker", "gateway"):
        environment = services[name]["environment"]
        assert environment["TEMPORAL_ADDRESS"] == "temporal:7233"
        assert {key for key in environment if key.startswith("AGUI_")} <= fields
    assert (
        services["worker"]["environment"]["AGUI_TASK_QUEUE"]
        == services["gateway"]["environment"]["AGUI_TASK_QUEUE"]
    )


def test_the_gateway_port_is_the_one_it_listens_on(services: dict[str, Any]) -> None:
    port = services["gateway"]["environment"]["AGUI_GATEWAY_PORT"]
    assert f"{port}:{port}" in services["gateway"]["ports"]


def test_dependencies_wait_for_health_checks(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for dependency, condition in service.get("depends_on", {}).items():
            assert condition == {"condition": "service_healthy"}, name
            assert "healthcheck" in services[dependency], f"{name} waits on {dependency}"
