"""``docs/agents.md`` works as written: its code, run as the module it names, serves an
agent whose small refunds go through and whose large ones wait for an approval."""

from __future__ import annotations

import json
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

from tests.helpers import new_thread, post_run, run_input, serve_stack

TUTORIAL = Path(__file__).parent.parent / "docs" / "agents.md"
BLOCK = re.compile(r"```python\n# (\S+\.py)[^\n]*\n(.*?)```", re.DOTALL)


def tutorial_modules() -> dict[str, str]:
    """The tutorial's code by module name, continued blocks appended in order."""
    sources: dict[str, str] = {}
    for path, code in BLOCK.findall(TUTORIAL.read_text()):
        module = path.removesuffix(".py").replace("/", ".")
        sources[module] = sources.get(module, "") + code
    return sources


@pytest.fixture
def tutorial() -> Iterator[dict[str, types.ModuleType]]:
    """The tutorial's modules, importable under their names for the test."""
    modules = {}
    for name, source in tutorial_modules().items():
        module = types.ModuleType(name)
        sys.modules[name] = module
        exec(compile(source, f"docs/agents.md:{name}", "exec"), module.__dict__)
        modules[name] = module
    try:
        yield modules
    finally:
        for name in modules:
            del sys.modules[name]


def test_the_tutorial_is_one_file() -> None:
    assert sorted(tutorial_modules()) == ["workflows.agents.support"]


async def test_the_tutorial_agent_refunds_and_asks_before_large_refunds(
    client: Client, tutorial: dict[str, types.ModuleType]
) -> None:
    support = tutorial["workflows.agents.support"].SUPPORT
    async with serve_stack(client, agents=[support]) as stack:
        small = await post_run(
            stack.http, "support", run_input(new_thread(), "r1", "refund 20 on A17")
        )
        assert small[-1]["outcome"] == {"type": "success"}

        thread_id = new_thread()
        paused = await post_run(
            stack.http, "support", run_input(thread_id, "r1", "refund 500 on B42")
        )
        [approval] = paused[-1]["outcome"]["interrupts"]
        assert approval["reason"] == "tool_call"
        assert approval["message"] == "Refund 500.0 on B42?"

        payload = {"approved": True, "editedArgs": {"order_id": "B42", "amount": 450}}
        entry = {"interruptId": approval["id"], "status": "resolved", "payload": payload}
        body = {"threadId": thread_id, "runId": "r2", "messages": [], "resume": [entry]}
        done = await post_run(stack.http, "support", body)

    [shown] = [json.loads(e["content"]) for e in done if e["type"] == "TOOL_CALL_RESULT"]
    assert shown["editedArgs"] == {"order_id": "B42", "amount": 450}
    result = shown["result"]
    assert result["orderId"] == "B42" and result["refunded"] == 450.0
    assert done[-1]["outcome"] == {"type": "success"}
