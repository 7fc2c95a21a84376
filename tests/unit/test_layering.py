"""Guards the layering of the tree (README, "Layout"): who may import whom.

Imports are read from the source with ``ast``, so nothing is imported to check them, and
those inside ``imports_passed_through()`` blocks and functions count like any other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PROJECT = {p.stem for p in ROOT.glob("*.py")} | {p.parent.name for p in ROOT.glob("*/__init__.py")}

LEAVES = {
    "workflows/thread_ids.py": set(),
    "workflows/wire.py": set(),
    # The thread's state keeps each open interrupt's ballot (``approvers.Ballot``).
    "workflows/models.py": {"workflows.wire", "workflows.approvers"},
    "tracing.py": set(),
    # A query's answer (``wire.QueryAnswer``) is never compressed.
    "codec.py": {"workflows.wire"},
    "logs.py": {"workflows.thread_ids"},
    "settings.py": {"codec", "logs", "tracing"},
    "workflows/errors.py": set(),
    "workflows/budgets.py": {"workflows.errors", "workflows.models"},
    "workflows/approvers.py": {"workflows.wire"},
    "workflows/questions.py": {
        "workflows.approvers",
        "workflows.budgets",
        "workflows.errors",
        "workflows.models",
    },
}
"""Modules at the bottom of the tree, with the project modules each may import."""

BOUNDARY = {
    "workflows.models",
    "workflows.questions",
    "workflows.errors",
    "workflows.approvers",
    "workflows.wire",
    "workflows.thread_ids",
    "workflows.search_attributes",
}
"""What activities may take from ``workflows/``: the data that crosses the boundary (a
tool's question among it, a permit's digest), the error codes, and what threads are
found by in Temporal (their workflow ids and search attributes: erasure's)."""

ENGINE_TO_ACTIVITIES = {
    "workflows/deadlines.py": {"activities.reminders"},
    "workflows/thread.py": {"activities.identity"},
    "workflows/retention.py": {"activities.erasure"},
}
"""The engine imports activities only for what it calls: its deadlines the ``send_reminder``
activity it schedules, the thread ``caller_identity``, the retention sweep
``sweep_idle_threads``. Data that crosses the boundary comes from ``BOUNDARY``."""


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports(path: str) -> set[str]:
    """The project modules the file at ``path`` imports (``from a import b`` is ``a.b``
    when ``b`` is a module); imports for type checking only do not count."""
    found: set[str] = set()
    tree = ast.parse((ROOT / path).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            submodules = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [name for name in submodules if _is_module(name)] or [node.module]
        else:
            continue
        found.update(name for name in names if name.split(".")[0] in PROJECT)
    return found


def files(pattern: str) -> list[str]:
    return sorted(str(path.relative_to(ROOT)) for path in ROOT.glob(pattern))


def test_the_checks_read_imports() -> None:
    assert imports("workflows/thread.py") >= {"workflows.models", "workflows.metrics"}


@pytest.mark.parametrize(("path", "allowed"), LEAVES.items(), ids=list(LEAVES))
def test_leaves_import_only_other_leaves(path: str, allowed: set[str]) -> None:
    assert imports(path) <= allowed


@pytest.mark.parametrize("path", files("activities/*.py"))
def test_activities_import_only_the_boundary_of_workflows(path: str) -> None:
    above = {name for name in imports(path) if name.startswith(("workflows", "gateway", "worker"))}
    assert above <= BOUNDARY


@pytest.mark.parametrize("path", files("workflows/*.py"))
def test_the_engine_imports_activities_only_to_call_them(path: str) -> None:
    reached = {name for name in imports(path) if name.startswith("activities")}
    assert reached <= ENGINE_TO_ACTIVITIES.get(path, set())


@pytest.mark.parametrize("path", files("workflows/sdk/*.py"))
def test_the_sdk_knows_neither_the_thread_nor_the_examples(path: str) -> None:
    reached = imports(path)
    assert "workflows.thread" not in reached
    assert not {name for name in reached if name.startswith("workflows.agents")}


@pytest.mark.parametrize("path", files("workflows/agents/*.py"))
def test_examples_reach_the_engine_only_through_the_sdk(path: str) -> None:
    engine = {name for name in imports(path) if name.startswith("workflows")}
    assert {name for name in engine if not name.startswith("workflows.agents")} <= {"workflows.sdk"}
