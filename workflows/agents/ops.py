"""The ``ops`` agent: cleans up old cloud resources with two sub-agents.

``clean up old resources`` runs a graph of two agents, each a sub-agent run of the
thread (a child workflow): ``inspector`` lists the resources older than five days,
then ``cleanup`` deletes them. Before ``cleanup`` runs, a hook asks for approval of the
list found; the approver may shorten it (the answer's schema allows only names from the
list). Approved, ``cleanup``'s ``delete_resources`` runs on exactly the approved list
and the agent answers with what was deleted; denied or cancelled, nothing is deleted and
the agent says so.

The inventory is simulated, so the example runs anywhere and deletes nothing.
"""

from __future__ import annotations

import json

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.sdk import (
        AgentContext,
        AgentDefinition,
        ChatReply,
        ChatRequest,
        Graph,
        GraphResult,
        Node,
        NodeCall,
        ProposedCall,
        ScriptedModel,
        last_user_text,
        tool,
        tool_results,
    )

OLDER_THAN_DAYS = 5
INVENTORY = {
    "vm-build-runner-7": 12,
    "disk-scratch-2024": 41,
    "snapshot-db-nightly-03": 9,
    "bucket-tmp-uploads": 6,
    "vm-web-frontend-1": 2,
    "ip-staging-lb": 1,
}
"""The simulated account: each resource's age in days."""


@tool
async def list_old_resources(older_than_days: int) -> list[dict[str, object]]:
    """List the resources older than ``older_than_days`` days, oldest first."""
    old = [(name, age) for name, age in INVENTORY.items() if age > older_than_days]
    return [{"name": name, "ageDays": age} for name, age in sorted(old, key=lambda r: -r[1])]


@tool
async def delete_resources(names: list[str]) -> dict[str, list[str]]:
    """Delete the resources named (simulated: nothing is touched)."""
    unknown = [name for name in names if name not in INVENTORY]
    if unknown:
        raise ValueError(f"No such resources: {', '.join(unknown)}")
    return {"deleted": names}


def inspect(request: ChatRequest) -> ChatReply:
    """List the old resources, then answer with their names as JSON."""
    results = tool_results(request.messages)
    if not results:
        arguments = {"older_than_days": OLDER_THAN_DAYS}
        return ChatReply(tool_calls=[ProposedCall(name="list_old_resources", arguments=arguments)])
    found = [resource["name"] for resource in json.loads(results[-1][1])]
    return ChatReply(text=json.dumps({"resources": found}))


def clean_up(request: ChatRequest) -> ChatReply:
    """Delete the resources its task lists; report what was deleted."""
    results = tool_results(request.messages)
    if not results:
        names = json.loads(last_user_text(request.messages))["resources"]
        return ChatReply(
            tool_calls=[ProposedCall(name="delete_resources", arguments={"names": names})]
        )
    deleted = json.loads(results[-1][1]).get("deleted", [])
    noun = "resource" if len(deleted) == 1 else "resources"
    return ChatReply(text=f"Deleted {len(deleted)} {noun}: {', '.join(deleted)}.")


INSPECTOR = AgentDefinition(
    name="inspector",
    description=f"Lists the resources older than {OLDER_THAN_DAYS} days.",
    model=ScriptedModel("ops-inspector", inspect),
    tools=[list_old_resources],
)
CLEANUP = AgentDefinition(
    name="cleanup",
    description="Deletes the resources it is given.",
    model=ScriptedModel("ops-cleanup", clean_up),
    tools=[delete_resources],
)


async def approve_cleanup(ctx: AgentContext, call: NodeCall) -> None:
    """Ask a person to approve the list found (they may shorten it); cancel the cleanup
    unless they approve."""
    found: list[str] = json.loads(call.task)["resources"]
    if not found:
        call.cancel(f"Nothing was deleted: no resource is older than {OLDER_THAN_DAYS} days.")
        return
    reply = await ctx.interrupt(
        "confirmation",
        message=f"Delete {len(found)} resources older than {OLDER_THAN_DAYS} days: "
        f"{', '.join(found)}? You may approve fewer (resources).",
        response={
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "resources": {
                    "type": "array",
                    "items": {"enum": found},
                    "uniqueItems": True,
                    "description": "The resources to delete, if fewer than found.",
                },
            },
            "required": ["approved"],
            "additionalProperties": False,
        },
        metadata={"resources": found},
    )
    if not reply.resolved:
        call.cancel(f"Nothing was deleted: the approval was {reply.status}.")
        return
    decision = reply.value or {}
    chosen = decision.get("resources", found)
    if not decision.get("approved") or not chosen:
        call.cancel("Nothing was deleted: the cleanup was not approved.")
        return
    call.task = json.dumps({"resources": chosen})


def report(result: GraphResult) -> str:
    """What the cleanup did, or why it did not run."""
    return result.results.get("cleanup") or result.skipped.get("cleanup", "Nothing was deleted.")


OPS = AgentDefinition(
    name="ops",
    description="Cleans up resources older than five days, after you approve the list.",
    turn=Graph(
        nodes=[Node("inspector", INSPECTOR), Node("cleanup", CLEANUP, before=[approve_cleanup])],
        edges=[("inspector", "cleanup")],
        answer=report,
    ),
)
