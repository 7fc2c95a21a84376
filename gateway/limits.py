"""What one request, and one principal, may ask of the gateway: how its JSON may nest,
what its ids may be, how many event streams it may hold open.

Pure and without I/O, so the unit tier checks them; the body's size and its content type
are checked where the body is read (``gateway.edge``, ``gateway.runs``).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Container, Iterator
from contextlib import contextmanager
from typing import Any

from ag_ui.core import AssistantMessage, Message, RunAgentInput, ToolMessage
from starlette.requests import Request

from gateway.errors import RETRY_AFTER_SECONDS, ApiError, GatewayErrorCode

MAX_JSON_DEPTH = 64
"""How deeply a body's arrays and objects may nest. AG-UI input nests a handful of
levels; state and tool arguments rarely a dozen. Deeper input would make the JSON parser,
pydantic and the data converter recurse (200,000 ``[`` exhaust Python's stack)."""

MAX_ID_LENGTH = 128
ID_PATTERN = rf"^[A-Za-z0-9_:@-][A-Za-z0-9_.:@-]{{0,{MAX_ID_LENGTH - 1}}}$"
"""Every id a client sends (thread, run, message, tool call, interrupt): 1 to 128 ASCII
letters, digits and ``_.:@-``, not starting with a dot. That covers uuids, OpenAI's
``call_…``, nanoids and the thread's own ``int-…``/``operator-…``/``expiry-…``, and
every such id is one URL path segment as it is (so ``GET /threads/{threadId}`` reads back
any thread a run started; ``.`` and ``..`` would be resolved away by clients)."""
ID_RULE = (
    f"An id is 1 to {MAX_ID_LENGTH} characters of A-Z, a-z, 0-9 and '_.:@-', not starting with '.'."
)
_ID = re.compile(ID_PATTERN)

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""Where a string may spell a UTF-16 surrogate: only a body holding one can hold a lone
one (raw surrogates are not UTF-8)."""
_NOT_BRACKETS_OR_QUOTES = bytes(set(range(256)) - set(b'"[]{}'))
_OPENERS = bytes.maketrans(b"{}", b"[]")


def parse_json(body: bytes) -> Any:
    """The body as JSON, once it is UTF-8 and nests at most :data:`MAX_JSON_DEPTH` deep.

    The depth is found before parsing, without recursion and at C speed
    (:func:`_brackets`): every bracket outside a string is kept, and innermost pairs
    are removed one level per pass. Brackets left after :data:`MAX_JSON_DEPTH` passes
    are too deep, or unbalanced; either way the body is refused before the parser sees
    it.

    Strict JSON only: no ``NaN``/``Infinity``, no number too large for a float, no
    string with a lone UTF-16 surrogate (``"\\ud800"``). Python's parser takes each,
    but nothing downstream can send them on (Temporal's converter, the JSON of an
    answer), so they are refused here, where the client can be told.

    Raises:
        ValueError: The body is not UTF-8, nests too deeply, or is not strict JSON; the
            message says which.
    """
    text = body.decode("utf-8-sig")
    brackets = _brackets(body)
    for _ in range(MAX_JSON_DEPTH):
        if not brackets:
            break
        brackets = brackets.replace(b"[]", b"")
    if brackets:
        raise ValueError(
            f"arrays and objects nest deeper than {MAX_JSON_DEPTH} levels, or do not close"
        )
    value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    if _SURROGATE_ESCAPE.search(body) is None:
        return value
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError as err:
        raise ValueError("a string holds a lone UTF-16 surrogate") from err
    return value


def _brackets(body: bytes) -> bytes:
    """The brackets of ``body`` outside its strings, each opener as ``[`` and each
    closer as ``]``, in order.

    In JSON a backslash appears only in a string, where it starts an escape: removing
    the escaped backslashes and then the escaped quotes leaves every quote a string's
    delimiter, so once all but quotes and brackets are gone, a string is what lies
    between a quote and the next. Every step is a pass of ``bytes`` methods over the
    body. For a body that is not JSON the result may be wrong, and the parser refuses
    that body anyway.
    """
    kept = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    quoted = kept.translate(_OPENERS, _NOT_BRACKETS_OR_QUOTES).split(b'"')
    return b"".join(quoted[::2])


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise ValueError(f"the number {literal[:20]} is too large")
    return number


def id_problems(
    run_input: RunAgentInput, checked: Container[int] = frozenset()
) -> list[dict[str, Any]]:
    """Every id in ``run_input`` that breaks :data:`ID_RULE`, as validation details
    (``loc`` in the body's camelCase, as pydantic's are).

    Args:
        checked: The positions of messages whose ids were checked before, as the same
            models (``gateway.sent_messages``): a resent conversation is checked once.
    """
    found: list[tuple[list[str | int], str | None]] = [
        (["threadId"], run_input.thread_id),
        (["runId"], run_input.run_id),
        (["parentRunId"], run_input.parent_run_id),
    ]
    for i, message in enumerate(run_input.messages):
        if i not in checked:
            found.extend(_message_ids(["messages", i], message))
    for i, entry in enumerate(run_input.resume or []):
        found.append((["resume", i, "interruptId"], entry.interrupt_id))
    return [
        {"type": "invalid_id", "loc": loc, "msg": ID_RULE}
        for loc, value in found
        if value is not None and not valid_id(value)
    ]


def message_ids_valid(message: Message) -> bool:
    """Whether every id ``message`` holds is as :data:`ID_RULE` says."""
    return all(value is None or valid_id(value) for _, value in _message_ids([], message))


def _message_ids(
    at: list[str | int], message: Message
) -> Iterator[tuple[list[str | int], str | None]]:
    """The ids ``message`` holds, each with where it is (under ``at``)."""
    yield [*at, "id"], message.id
    if isinstance(message, AssistantMessage):
        for j, call in enumerate(message.tool_calls or []):
            yield [*at, "toolCalls", j, "id"], call.id
    if isinstance(message, ToolMessage):
        yield [*at, "toolCallId"], message.tool_call_id


def valid_id(value: str) -> bool:
    """Whether ``value`` is an id as :data:`ID_RULE` says."""
    return _ID.fullmatch(value) is not None


def too_many(message: str) -> ApiError:
    """The 429 for a request over a cap, with ``Retry-After``."""
    return ApiError(
        429,
        GatewayErrorCode.TOO_MANY_REQUESTS,
        message,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


class StreamSlots:
    """How many event streams each principal holds open on this gateway process.

    In memory, per process: behind a load balancer each replica counts its own, so a
    principal may hold the cap on every replica.

    Args:
        limit: The most streams one principal may hold open at once.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._open: Counter[str] = Counter()

    def open(self, subject: str) -> int:
        """How many streams ``subject`` holds open now."""
        return self._open[subject]

    @contextmanager
    def hold(self, subject: str) -> Iterator[None]:
        """Hold one of ``subject``'s slots for the block.

        Raises:
            ApiError: 429 ``TOO_MANY_REQUESTS``: every slot is taken.
        """
        if self._open[subject] >= self._limit:
            raise too_many(
                f"This principal already has {self._limit} event streams open on this "
                "gateway (runs in flight or queued, and attached readers); close one, "
                "or wait for a run to end."
            )
        self._open[subject] += 1
        try:
            yield
        finally:
            self._open[subject] -= 1
            if not self._open[subject]:
                del self._open[subject]


JSON = "application/json"


def require_json(content_type: str | None) -> None:
    """A 415 unless ``content_type`` is JSON, in UTF-8 if it names a charset: a page on
    another site can send any body as ``text/plain`` without a CORS preflight, never as
    ``application/json``."""
    media_type, *parameters = (content_type or "").split(";")
    charsets = {
        value.strip().strip('"').lower()
        for name, _, value in (parameter.partition("=") for parameter in parameters)
        if name.strip().lower() == "charset"
    }
    if media_type.strip().lower() != JSON or not charsets <= {"utf-8"}:
        raise ApiError(
            415,
            GatewayErrorCode.UNSUPPORTED_MEDIA_TYPE,
            "The body must be UTF-8 JSON, sent with 'Content-Type: application/json'.",
        )


async def json_body(request: Request) -> Any:
    """The request's body as JSON: it must say it is (:func:`require_json`) and be strict
    JSON (:func:`parse_json`), else a 415 or 400. Its size is capped as it is read
    (``gateway.edge.BodyLimit``)."""
    return parse_body(await json_bytes(request))


async def json_bytes(request: Request) -> bytes:
    """The request's body, once its content type says JSON (:func:`require_json`)."""
    require_json(request.headers.get("content-type"))
    return await request.body()


def parse_body(body: bytes) -> Any:
    """``body`` as strict JSON (:func:`parse_json`), else a 400 saying what is wrong."""
    try:
        return parse_json(body)
    except ValueError as err:
        raise ApiError(
            400, GatewayErrorCode.MALFORMED_JSON, f"The body is not valid JSON: {err}."
        ) from err
