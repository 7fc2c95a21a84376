"""Which runs a thread admits: every rule a client's run is checked against, in one pure
function.

The ``run_agent`` update's validator calls :func:`check_run` so that a bad run is
rejected before anything is written, and the handler calls it again under the run lock
(the thread may have changed while the run waited its turn). The gateway calls it too,
against an empty thread, before a thread's first run starts the thread's workflow: a
run the thread would reject then creates nothing, not even the workflow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import AssistantMessage, Message, RunAgentInput, ToolMessage

    from workflows import budgets
    from workflows.decisions import owner_decides
    from workflows.errors import ErrorCode, rejection
    from workflows.event_log import known
    from workflows.interrupts import check_resume
    from workflows.models import RunRequest, ThreadState
    from workflows.sdk.agent import AgentDefinition
    from workflows.served import not_served


def check_run(
    thread: ThreadState,
    request: RunRequest,
    agent: AgentDefinition | None,
    now: datetime,
    *,
    repeat: bool = False,
    knows: Callable[[str], bool] | None = None,
) -> None:
    """Raise the rejection (``ApplicationError`` with a stable code) of a run ``thread``
    must not execute; change nothing.

    Args:
        thread: The thread as it is (for a thread's first run, a new ``ThreadState``
            of the thread's id, the agent named and the requesting principal).
        request: The run.
        agent: The thread's agent as this process serves it; ``None`` when it serves no
            agent by that name.
        now: The current time (the workflow's), for interrupts' deadlines.
        repeat: The run repeats one the thread already executed (the same update, or a
            resume exactly like one applied), whose events answer it again: it is not
            checked against the interrupts again.
        knows: Whether the thread has, or had and dropped, the message of an id: the
            thread's own index of them (``EventLog.knows``); by default read from
            ``thread`` (:func:`knows_of`).
    """
    run_input = request.input
    if request.principal != thread.owner:
        # Anyone but the owner is told what they would be told of no thread at all.
        raise rejection(ErrorCode.UNKNOWN_THREAD, f"No thread {run_input.thread_id!r}.")
    if run_input.thread_id != thread.thread_id:
        raise rejection(
            ErrorCode.THREAD_MISMATCH,
            f"This is thread {thread.thread_id!r}; the input names thread {run_input.thread_id!r}.",
        )
    if request.agent != thread.agent:
        raise rejection(
            ErrorCode.AGENT_MISMATCH,
            f"Thread {thread.thread_id!r} belongs to agent {thread.agent!r}, "
            f"not {request.agent!r}.",
        )
    if agent is None:
        raise not_served(thread.agent)
    budgets.check_run_input(run_input, thread)
    _check_client_input(thread, run_input, agent, knows or knows_of(thread))
    if not repeat:
        # The owner answers only what their one decision may settle (``decisions.py``).
        decider = owner_decides(thread, agent, now)
        check_resume(thread.open_interrupts, run_input.resume, thread.applied, now, decider)


def knows_of(thread: ThreadState) -> Callable[[str], bool]:
    """Whether ``thread`` has, or had and dropped, the message of an id, read from the
    thread as it is (``EventLog.knows`` keeps the same as it goes)."""
    kept = {message.id for message in thread.messages}
    dropped = set(thread.dropped_message_ids)
    return lambda message_id: known(message_id, kept, dropped)


def _check_client_input(
    thread: ThreadState,
    run_input: RunAgentInput,
    agent: AgentDefinition,
    knows: Callable[[str], bool],
) -> None:
    """Raise the rejection of input the client may not write: ``state`` or
    ``forwardedProps`` outside what ``agent`` declares, or a new message it may not add
    to ``thread``."""
    accepts = agent.accepts
    state = run_input.state
    if state is not None:
        if not isinstance(state, dict):
            raise rejection(ErrorCode.INVALID_STATE, "The input's state must be a JSON object.")
        error = accepts.state.error(state, "state")
        if error is not None:
            raise rejection(ErrorCode.INVALID_STATE, f"{error} (the {agent.name!r} agent's state)")
    props = run_input.forwarded_props
    if props is not None:
        error = accepts.forwarded_props.error(props, "forwardedProps")
        if error is not None:
            raise rejection(
                ErrorCode.INVALID_FORWARDED_PROPS,
                f"{error} (the {agent.name!r} agent's forwardedProps)",
            )
    _check_messages(thread.messages, run_input, agent, knows)


def _check_messages(
    kept: Sequence[Message],
    run_input: RunAgentInput,
    agent: AgentDefinition,
    knows: Callable[[str], bool],
) -> None:
    """Check each message the run would add: those whose ids the thread does not know,
    kept or dropped (clients resend the whole conversation; the thread skips what it
    has and what it had), each id once."""
    seen: set[str] = set()
    new: list[tuple[int, Message]] = []
    for index, message in enumerate(run_input.messages):
        if message.id not in seen and not knows(message.id):
            seen.add(message.id)
            new.append((index, message))
    roles = agent.accepts.roles
    for index, message in new:
        if message.role not in roles:
            raise rejection(
                ErrorCode.MESSAGE_NOT_ALLOWED,
                f"messages[{index}] ({message.id!r}): the {agent.name!r} agent takes no "
                f"{message.role} messages from clients (only {', '.join(sorted(roles))}).",
            )
    answers = [(i, m) for i, m in new if isinstance(m, ToolMessage)]
    if answers:
        _check_tool_results(answers, kept, [m for _, m in new], run_input, agent)


def _check_tool_results(
    answers: list[tuple[int, ToolMessage]],
    kept: Sequence[Message],
    new: Sequence[Message],
    run_input: RunAgentInput,
    agent: AgentDefinition,
) -> None:
    """A client's ``tool`` message answers a call, not yet answered, that an assistant
    message (of the thread, or new in this input) made to a tool the client provides
    (``input.tools``): the results of the agent's own tools come from the agent."""
    calls = {
        call.id: call.function.name
        for message in (*kept, *new)
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls or ()
    }
    answered = {message.tool_call_id for message in kept if isinstance(message, ToolMessage)}
    provided = {tool.name for tool in run_input.tools or ()}
    for index, message in answers:
        where = f"messages[{index}] ({message.id!r})"
        name = calls.get(message.tool_call_id)
        if name is None:
            why = f"answers {message.tool_call_id!r}, which is no tool call of the thread."
        elif agent.tool(name) is not None:
            why = f"answers a call of the agent's own tool {name!r}, whose results it makes."
        elif name not in provided:
            why = f"answers a call of {name!r}, which is not a tool the input provides."
        elif message.tool_call_id in answered:
            why = f"answers {message.tool_call_id!r}, which already has its result."
        else:
            answered.add(message.tool_call_id)
            continue
        raise rejection(ErrorCode.MESSAGE_NOT_ALLOWED, f"{where} {why}")
