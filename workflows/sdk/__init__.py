"""The agent SDK: everything an agent author imports, from one place.

An agent is a definition (:class:`AgentDefinition`): a model, tools (each with its
approval and hooks, if any) and hooks; the engine runs its loop durably. Every question
for a person, wherever it is asked, is an :class:`Ask`. ``docs/agents.md`` is the tutorial.
"""

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.chat import (
        ChatModel,
        ChatReply,
        ChatRequest,
        ProposedCall,
        ScriptedModel,
        last_user_text,
        tool_results,
    )
    from activities.tooling import Tool, ToolContext, ToolInterrupt, tool, tool_context
    from workflows.approvers import Approvers, Escalation
    from workflows.questions import Ask, Reply
    from workflows.sdk.agent import AfterTool, AgentDefinition, BeforeBatch, BeforeTool
    from workflows.sdk.context import AgentContext
    from workflows.sdk.graph import BeforeNode, Graph, GraphResult, Node, NodeCall
    from workflows.sdk.subagents import SubagentTool, subagent_tool
    from workflows.sdk.tools import (
        Approval,
        Decision,
        InterruptTool,
        ToolCallView,
        interrupt_tool,
    )

__all__ = [
    "AfterTool",
    "AgentContext",
    "AgentDefinition",
    "Approval",
    "Approvers",
    "Ask",
    "BeforeBatch",
    "BeforeNode",
    "BeforeTool",
    "ChatModel",
    "ChatReply",
    "ChatRequest",
    "Decision",
    "Escalation",
    "Graph",
    "GraphResult",
    "InterruptTool",
    "Node",
    "NodeCall",
    "ProposedCall",
    "Reply",
    "ScriptedModel",
    "SubagentTool",
    "Tool",
    "ToolCallView",
    "ToolContext",
    "ToolInterrupt",
    "interrupt_tool",
    "last_user_text",
    "subagent_tool",
    "tool",
    "tool_context",
    "tool_results",
]
