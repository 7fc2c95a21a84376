"""A small orchestration of agents: a graph of nodes, each node an agent working as a
sub-agent run of the thread, in the spirit of Strands' ``GraphBuilder``.

Nodes run once all the nodes with an edge to them have run; nodes ready together run
concurrently, each a child workflow (``AgentContext.delegate``). An entry node's task is
the user's latest message, another's the answers of the nodes before it. Hooks before a
node (:data:`BeforeNode`) may ask a person, whose interrupts carry the node's
``subagentRunId``, change the node's task, or cancel the node, whose dependents then do
not run either. The graph's turn ends by saying :attr:`Graph.answer` of what ran.

A graph is an agent's turn: ``AgentDefinition(turn=graph, ...)``. Like every turn it
runs again from its top on resume, its hooks too, with their answers read back; nodes
that finished are not run again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.sdk.context import AgentContext

if TYPE_CHECKING:
    from workflows.sdk.agent import AgentDefinition


@dataclass
class NodeCall:
    """A node about to run, as the hooks before it see it."""

    node: str
    agent: str
    task: str
    """What its agent is asked to do: a hook may replace it."""
    results: dict[str, str]
    """The answers of the nodes that ran before it, by node."""
    subagent_run_id: str
    cancelled: str | None = None
    """Why it will not run, once a hook cancelled it."""

    def cancel(self, reason: str) -> None:
        """Do not run the node (nor the nodes after it); ``reason`` says why."""
        self.cancelled = reason


BeforeNode = Callable[[AgentContext, NodeCall], Awaitable[None]]
"""Runs before a node; may ask (``ctx.interrupt``), set ``call.task``, ``call.cancel``."""


@dataclass(frozen=True)
class Node:
    """One agent of a graph, under a name of its own in the graph."""

    name: str
    agent: AgentDefinition = field(repr=False)
    before: Sequence[BeforeNode] = ()


@dataclass(frozen=True)
class GraphResult:
    """What a graph's run came to: :attr:`Graph.answer` says it to the user."""

    task: str
    results: dict[str, str]
    """The answers of the nodes that ran, in the order they finished."""
    skipped: dict[str, str]
    """Why each node that did not run did not."""


def last_answer(result: GraphResult) -> str:
    """The last node's answer; why it did not run, if it did not."""
    if result.skipped:
        return "\n".join(result.skipped.values())
    return list(result.results.values())[-1] if result.results else ""


@dataclass(frozen=True)
class Graph:
    """Agents run in the order of the edges between them (see the module's docstring).

    Args:
        nodes: The nodes, names unique.
        edges: ``(before, after)`` pairs of node names; no cycles.
        answer: What the graph's turn says at the end; by default the last answer.

    Raises:
        ValueError: Two nodes of one name, an edge naming no node, or a cycle.
    """

    nodes: Sequence[Node]
    edges: Sequence[tuple[str, str]] = ()
    answer: Callable[[GraphResult], str] = last_answer
    levels: list[list[Node]] = field(init=False, repr=False, compare=False)
    """The nodes in the order they run: each level once the levels before it have."""

    def __post_init__(self) -> None:
        names = [node.name for node in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"A graph has several nodes of one name: {names}.")
        unknown = {name for edge in self.edges for name in edge} - set(names)
        if unknown:
            raise ValueError(f"The graph's edges name no node {sorted(unknown)}.")
        levels: list[list[Node]] = []
        placed: set[str] = set()
        while len(placed) < len(names):
            ready = [
                node
                for node in self.nodes
                if node.name not in placed
                and all(a in placed for a, b in self.edges if b == node.name)
            ]
            if not ready:
                raise ValueError("The graph's edges make a cycle.")
            levels.append(ready)
            placed |= {node.name for node in ready}
        # A frozen dataclass sets its derived fields this way.
        object.__setattr__(self, "levels", levels)

    @property
    def subagents(self) -> list[AgentDefinition]:
        """The agents of its nodes, which the worker runs as sub-agents."""
        return [node.agent for node in self.nodes]

    async def __call__(self, ctx: AgentContext) -> None:
        """The graph as an agent's turn."""
        task = ctx.latest_user_text()
        results: dict[str, str] = {}
        skipped: dict[str, str] = {}
        for level in self.levels:
            work = []
            for node in level:
                before = [a for a, b in self.edges if b == node.name]
                missing = [name for name in before if name in skipped]
                if missing:
                    skipped[node.name] = f"{node.name} did not run: {missing[0]} did not."
                    continue
                node_task = "\n\n".join(results[name] for name in before) if before else task
                work.append((node.name, self._node(node, node_task, dict(results))))
            outcomes = await ctx.gather(work)
            for (name, _), outcome in zip(work, outcomes, strict=True):
                if "result" in outcome:
                    results[name] = outcome["result"]
                else:
                    skipped[name] = outcome["skipped"]
        ctx.say(self.answer(GraphResult(task=task, results=results, skipped=skipped)))

    @staticmethod
    def _node(
        node: Node, task: str, results: dict[str, str]
    ) -> Callable[[AgentContext], Awaitable[dict[str, str]]]:
        """One node's work: its hooks, then its agent, in the node's own scope."""

        async def run(ctx: AgentContext) -> dict[str, str]:
            host = ctx.turn.host.subagents
            agent = node.agent
            recorded = ctx.scope.recorded("node")
            if recorded is None:
                run_id = host.new_id(agent.name)
                ctx.scope.record("node", run_id)
            else:
                run_id = recorded.value
            call = NodeCall(node.name, agent.name, task, results, run_id)
            if node.before:
                host.announce(run_id, agent.name, agent.description, None)
                asking = AgentContext(ctx.turn, ctx.scope, ctx.agent, subagent_run_id=run_id)
                for hook in node.before:
                    await hook(asking, call)
                    if call.cancelled is not None:
                        break
                if call.cancelled is not None:
                    host.finish(run_id, call.cancelled)
                    return {"skipped": call.cancelled}
            result = await ctx.delegate(agent, call.task, subagent_run_id=run_id)
            return {"result": result}

        return run
