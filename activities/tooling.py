"""Tools: plain async Python functions an agent's model can call, run as activities.

``@tool`` turns a typed async function into a :class:`Tool`: its JSON Schema comes from
the type hints, its description from the docstring, and it runs as a Temporal activity
of the same name, with the activity's timeouts and retries. A tool may stop to ask a
person (:class:`ToolInterrupt`); whatever the answer, it never runs with arguments other
than those the model (or an approval's ``editedArgs``) gave it. A call an approval let
through carries the approval's :class:`~workflows.models.Permit`, and the activity refuses
to run it on any arguments but those the permit binds (``PERMIT_MISMATCH``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, get_type_hints, overload

from ag_ui.core import Tool as ToolSpec
from pydantic import BaseModel, ValidationError, create_model
from temporalio import activity
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from activities.heartbeats import heartbeating
from workflows.approvers import arguments_digest
from workflows.errors import ErrorCode
from workflows.models import Model, Permit
from workflows.questions import Ask, Question

if TYPE_CHECKING:
    from workflows.sdk.agent import AfterTool, BeforeTool
    from workflows.sdk.tools import Approval


class ToolInvocation(Model):
    """One run of a tool: the call's arguments and, on a restart, the answer."""

    tool_call_id: str
    thread_id: str
    arguments: dict[str, Any]
    resumed: Any = None
    """The payload of the interrupt this run restarts after (``None`` on a first run)."""
    permit: Permit | None = None
    """The permit of the approval that let the call through: the tool runs only on the
    arguments it binds. ``None``: no approval, or one given before the thread issued
    permits (the call runs unchecked, as it always has)."""


class ToolOutcome(Model):
    """What a run of a tool produced: a result, an error the model sees, or a question."""

    result: Any = None
    error: str | None = None
    interrupt: Question | None = None
    respond: bool = False
    """With ``interrupt``: whether its answer is the tool's result (see :class:`ToolInterrupt`)."""


class ToolInterrupt(Exception):  # noqa: N818 - it is a request, not an error
    """Raised by a tool to ask a person before it goes on (Genkit's tool interrupt).

    Args:
        ask: The question, with the options of any :class:`~workflows.questions.Ask`
            (its ``tool_call_id`` is the call's); a ``response`` type is sent as its
            JSON Schema, and the answer is checked against it before the tool sees it.
        respond: Whether the answer is the tool's result (``True``) or the tool runs
            again from the top, with the same arguments, and reads the answer from
            ``tool_context().resumed`` (``False``, the default).
    """

    def __init__(self, ask: Ask[Any], *, respond: bool = False) -> None:
        super().__init__(ask.message or ask.reason)
        self.question = ask.question(datetime.now(UTC))
        self.respond = respond


@dataclass(frozen=True)
class ToolContext:
    """What a running tool knows about its call (see :func:`tool_context`)."""

    tool_call_id: str
    thread_id: str
    resumed: Any
    """The answer this run restarts with, validated; ``None`` on the first run."""
    permit: Permit | None = None
    """The approval this call runs under, if one let it through: who approved
    (``permit.approvers``) exactly these arguments, e.g. to pass on to the system the
    tool calls. Checked against the arguments before the tool ran."""

    @property
    def idempotency_key(self) -> str:
        """Stable for the call across retries and restarts: pass it to side effects."""
        return f"{self.thread_id}/{self.tool_call_id}"


_CONTEXT: ContextVar[ToolContext] = ContextVar("tool_context")


def tool_context() -> ToolContext:
    """The call the running tool serves; only inside a tool."""
    return _CONTEXT.get()


DIGEST_SHOWN = 19
"""Characters of a digest an error shows: ``sha256:`` and 12 hex digits, enough to tell
two apart in a log, without the arguments themselves."""


def _check_permit(tool_name: str, invocation: ToolInvocation) -> None:
    """Refuse a call whose permit binds other arguments (or another call) than it carries.

    Raises:
        ApplicationError: ``PERMIT_MISMATCH``, not retryable: a retry would carry the
            same arguments. The message names the call and the digests, never the
            arguments (they may be anything a model or an approver wrote).
    """
    permit = invocation.permit
    if permit is None:
        return
    digest = arguments_digest(invocation.arguments)
    if permit.digest == digest and permit.tool_call_id == invocation.tool_call_id:
        return
    raise ApplicationError(
        f"Tool call {invocation.tool_call_id} ({tool_name}) did not run: its permit "
        f"(interrupt {permit.interrupt_id}, call {permit.tool_call_id}) binds arguments "
        f"{permit.digest[:DIGEST_SHOWN]}…, it carries {digest[:DIGEST_SHOWN]}….",
        type=ErrorCode.PERMIT_MISMATCH.value,
        non_retryable=True,
    )


def arguments_model(function: Callable[..., Any], name: str) -> type[BaseModel]:
    """A pydantic model of ``function``'s parameters, from its type hints and defaults."""
    hints = get_type_hints(function)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (hints.get(parameter.name, Any), default)
    return create_model(f"{name}_arguments", **fields)


def tool_spec(function: Callable[..., Any], name: str, arguments: type[BaseModel]) -> ToolSpec:
    """What a model is told about a tool: name, the docstring's first paragraph, schema."""
    description = inspect.getdoc(function) or name
    schema = arguments.model_json_schema()
    schema.pop("title", None)
    return ToolSpec(name=name, description=description.split("\n\n")[0], parameters=schema)


@dataclass(frozen=True)
class Tool:
    """A tool the model can call, run as the activity ``tool:<name>`` (see :func:`tool`)."""

    name: str
    spec: ToolSpec
    timeout: timedelta
    retry: RetryPolicy
    local: bool
    activity: Callable[[ToolInvocation], Awaitable[ToolOutcome]] = field(repr=False)
    heartbeat: timedelta | None = None
    """The activity's heartbeat timeout (see :func:`tool`); ``None``, none."""
    approval: Approval | None = None
    """The approval a person gives each call (that it applies to) before it runs."""
    before: Sequence[BeforeTool] = ()
    """Hooks before each call of this tool, after the agent's ``before_tool`` hooks."""
    after: Sequence[AfterTool] = ()
    """Hooks after each call of this tool ran, before the agent's ``after_tool`` hooks."""


ToolFunction = Callable[..., Awaitable[Any]]


@overload
def tool(function: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    timeout: timedelta = ...,
    retry: RetryPolicy | None = None,
    local: bool = False,
    heartbeat: timedelta | None = None,
    approval: Approval | None = None,
    before: Sequence[BeforeTool] = (),
    after: Sequence[AfterTool] = (),
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    timeout: timedelta = timedelta(seconds=30),
    retry: RetryPolicy | None = None,
    local: bool = False,
    heartbeat: timedelta | None = None,
    approval: Approval | None = None,
    before: Sequence[BeforeTool] = (),
    after: Sequence[AfterTool] = (),
) -> Tool | Callable[[ToolFunction], Tool]:
    """Make an async function a :class:`Tool` (usable as ``@tool`` or ``@tool(...)``).

    Args:
        function: The tool; its parameters must have type hints, its result must be
            JSON-serialisable (or a pydantic model).
        name: The name the model calls it by; the function's name by default.
        timeout: How long one attempt may take (the activity's start-to-close timeout).
        retry: Retries of a failing attempt; five with backoff by default. Invalid
            arguments from the model are not retried: the model is told what is wrong.
        local: Run as a local activity: in the worker that runs the turn, inside the
            workflow task, without a round trip through the task queue. For short
            calls (seconds) without side effects: a local activity runs again whenever
            the workflow task that ran it is retried (a crashed worker, a deploy), so a
            tool with an ``approval`` may not be local.
        approval: Each call (that the approval applies to) waits for a person's
            approval first; declared here, it cannot fall away from an agent.
        before: Hooks before each call of this tool (``BeforeTool``).
        after: Hooks after each call of this tool ran (``AfterTool``).

    Raises:
        ValueError: ``local`` together with ``approval``.
    """

    def make(function: Callable[..., Awaitable[Any]]) -> Tool:
        tool_name = name or function.__name__
        if local and approval is not None:
            raise ValueError(
                f"Tool {tool_name!r} needs approval, so it has an effect worth asking "
                "about: it may not be local (a local activity runs again whenever its "
                "workflow task is retried)."
            )
        arguments = arguments_model(function, tool_name)

        async def run(invocation: ToolInvocation) -> ToolOutcome:
            _check_permit(tool_name, invocation)
            try:
                parsed = arguments.model_validate(invocation.arguments)
            except ValidationError as error:
                return ToolOutcome(error=f"Invalid arguments for {tool_name}: {error}")
            token = _CONTEXT.set(
                ToolContext(
                    invocation.tool_call_id,
                    invocation.thread_id,
                    invocation.resumed,
                    invocation.permit,
                )
            )
            try:
                result = await heartbeating(function(**dict(parsed)))
            except ToolInterrupt as asked:
                return ToolOutcome(interrupt=asked.question, respond=asked.respond)
            finally:
                _CONTEXT.reset(token)
            if isinstance(result, BaseModel):
                result = result.model_dump(mode="json", by_alias=True)
            return ToolOutcome(result=json.loads(json.dumps(result)))

        run.__doc__ = function.__doc__
        return Tool(
            name=tool_name,
            spec=tool_spec(function, tool_name, arguments),
            timeout=timeout,
            retry=retry or RetryPolicy(maximum_attempts=5),
            local=local,
            activity=activity.defn(name=f"tool:{tool_name}")(run),
            heartbeat=None if local else heartbeat,
            approval=approval,
            before=before,
            after=after,
        )

    return make(function) if function is not None else make
