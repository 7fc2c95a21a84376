"""The agents each task queue's worker serves: where a thread workflow finds its agent.

A workflow is handed only its serialised input, and Temporal's sandbox runs workflow code
against fresh imports of its modules, so neither can carry the agents a worker was built
with. ``worker.build_worker`` records them here under its task queue (:func:`serve`); the
thread workflow looks its agent up by its own task queue (``workflow.info().task_queue``)
and the thread's agent name (:func:`agent`). Workflow modules import this one inside
``workflow.unsafe.imports_passed_through()``, so a process holds one table, shared by its
workers and the workflows they run; workers on different task queues (as tests run them)
each see their own agents.

Temporal hands any task of a queue to any of its workers, so all the workers of a task
queue must serve the same agents. Serving a task queue again therefore replaces its
agents: in one process that is a redeploy (the worker before has stopped, as in
``tests/test_deploys.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.exceptions import ApplicationError

    from workflows.errors import ErrorCode, rejection
    from workflows.sdk import AgentContext, AgentDefinition, ChatReply, ScriptedModel

_SERVED: dict[str, Mapping[str, AgentDefinition]] = {}
"""The agents of each task queue served in this process, by name."""

_NO_MODEL = ScriptedModel("unserved", lambda request: ChatReply())
"""The model of :func:`agent`'s stand-in, whose turn fails before it asks any."""


def by_name(agents: Iterable[AgentDefinition]) -> dict[str, AgentDefinition]:
    """``agents`` by name, in their order.

    Raises:
        ValueError: Two agents share a name: runs for it would reach either.
    """
    named: dict[str, AgentDefinition] = {}
    for definition in agents:
        if named.setdefault(definition.name, definition) is not definition:
            raise ValueError(f"Two agents are named {definition.name!r}.")
    return named


def with_subagents(agents: Iterable[AgentDefinition]) -> list[AgentDefinition]:
    """``agents`` and the agents they hand work to (``AgentDefinition.subagents``), which
    a worker runs too (``workflows/subagent.py``), each once."""
    found: list[AgentDefinition] = []
    pending = list(agents)
    while pending:
        agent = pending.pop(0)
        if all(agent is not known for known in found):
            found.append(agent)
            pending.extend(agent.subagents())
    return found


def serve(task_queue: str, agents: Iterable[AgentDefinition]) -> Mapping[str, AgentDefinition]:
    """Make ``agents`` (and their sub-agents), and only them, the agents of
    ``task_queue``'s workflows in this process, in place of any served there before;
    returns them by name.

    Raises:
        ValueError: Two agents share a name.
    """
    named = _SERVED[task_queue] = by_name(with_subagents(agents))
    return named


def find(task_queue: str, name: str) -> AgentDefinition | None:
    """Agent ``name`` as ``task_queue``'s worker serves it; ``None`` if it does not."""
    return _SERVED.get(task_queue, {}).get(name)


def check_served(task_queue: str, name: str) -> None:
    """Reject a run of agent ``name`` if ``task_queue``'s worker does not serve it, with
    the code the gateway answers for an agent it does not serve."""
    if find(task_queue, name) is None:
        raise not_served(name)


def not_served(name: str) -> ApplicationError:
    """The rejection of a run of agent ``name`` where no agent by that name is served."""
    return rejection(ErrorCode.UNKNOWN_AGENT, _not_served(name))


def agent(task_queue: str, name: str) -> AgentDefinition:
    """Agent ``name`` as ``task_queue``'s worker serves it.

    A client's run never meets an agent the worker does not serve (the run's validator
    rejects it with :func:`check_served`), but a run nobody sent can: an expiry, after a
    deploy dropped the agent of a thread that was waiting. That run gets a stand-in whose
    turn fails, saying so, so it ends with ``RUN_ERROR`` and the thread stays usable;
    raising here would leave the run open.
    """
    served = find(task_queue, name)
    return served if served is not None else _unserved(task_queue, name)


def _unserved(task_queue: str, name: str) -> AgentDefinition:
    message = _not_served(name)

    async def refuse(_: AgentContext) -> None:
        raise rejection(ErrorCode.UNKNOWN_AGENT, message)

    return AgentDefinition(name=name, description=message, model=_NO_MODEL, turn=refuse)


def _not_served(name: str) -> str:
    # Clients read this: it names the agent, not the deployment (task queue, agents).
    return f"No agent named {name!r} is served."
