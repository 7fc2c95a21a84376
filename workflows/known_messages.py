"""Runs that carry only the messages their thread does not have yet.

AG-UI clients resend the whole conversation on every run, and each run's
``MESSAGES_SNAPSHOT`` sends it back; recorded as they are, a run's update would hold the
conversation twice or three times, so a long thread's every run would cost more than
the one before. So the gateway sends a thread only the messages after the prefix it
expects the thread to have, with that prefix's digest (``KnownMessages``). The thread
takes such a run only if its conversation begins with exactly those messages; otherwise
it rejects the update before recording anything (``RESEND``) and the gateway sends the
whole conversation instead. The run's reply then leaves that prefix out of its
``MESSAGES_SNAPSHOT`` events (``RunReply.snapshot_prefix``), and the gateway puts the
client's own copies of those messages back.

The digest is over each message's JSON as the data converter writes it, so the gateway
and the worker, parsing the same JSON into the same ``ag_ui`` models, compute the same
one; where they would not, the run is only sent again in full.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import Message

    from workflows.models import KnownMessages

RESEND = "RESEND_MESSAGES"
"""The ``type`` of the thread's rejection of a run whose known prefix it does not have:
the gateway's signal to send the whole conversation; never a client's to see."""


def message_digest(encoded: bytes) -> bytes:
    """The digest of one message, from its JSON (``budgets.to_json``)."""
    return hashlib.sha256(encoded).digest()


def prefix_digest(digests: Sequence[bytes]) -> str:
    """The digest of a conversation's first messages, from theirs, in order."""
    return hashlib.sha256(b"".join(digests)).hexdigest()


def split(
    messages: Sequence[Message], digests: Sequence[bytes]
) -> tuple[KnownMessages | None, list[Message]]:
    """What the gateway expects the thread to know of ``messages`` (each one's
    :func:`message_digest` in ``digests``), and the rest to send.

    The thread's last ``MESSAGES_SNAPSHOT`` ends with its agent's reply, and what a
    client adds comes after it; so the known prefix ends at the last ``assistant``
    message. A guess: a wrong one costs the run a second send, never a message.
    """
    known = next(
        (i + 1 for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), 0
    )
    if known == 0:
        return None, list(messages)
    digest = prefix_digest(digests[:known])
    return KnownMessages(count=known, digest=digest), list(messages[known:])
