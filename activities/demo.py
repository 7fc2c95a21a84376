"""The ``demo`` agent's tool and scripted model.

``send_email`` stands in for a mail API. With a mail URL configured
(``AGUI_DEMO_MAIL_URL``) it posts each email there as JSON; without one it delivers
nothing. Either way it behaves as a side effect should: the call's idempotency key makes
a retried call a repeat the mail API recognises, never a second email.
"""

from __future__ import annotations

import hashlib
from typing import Annotated

from pydantic import Field

from activities.chat import ChatReply, ChatRequest, ScriptedModel, last_user_text
from activities.tooling import tool, tool_context
from activities.webhooks import post_json
from settings import process_settings
from workflows.sdk.tools import Approval

Address = Annotated[str, Field(json_schema_extra={"format": "email"})]


APPROVAL = Approval(
    edits=True,
    message=lambda call: (
        f"Send email to {call.arguments['to']} with subject 'Hi'? You can edit it first."
    ),
)


@tool(local=True, approval=APPROVAL)
async def send_email(to: Address, subject: str, body: str) -> dict[str, str]:
    """Send an email; the message id is a function of the call's idempotency key."""
    key = tool_context().idempotency_key
    settings = process_settings()
    if settings.demo_mail_url is not None:
        email = {"to": to, "subject": subject, "body": body}
        await post_json(settings.demo_mail_url, email, key, settings.webhook_timeout_seconds)
    return {"messageId": f"msg-{hashlib.sha256(key.encode()).hexdigest()[:12]}"}


def echo(request: ChatRequest) -> ChatReply:
    """A fixed, predictable reply to the newest user message."""
    prompt = last_user_text(request.messages).strip()
    return ChatReply(text=f"You said: {prompt}" if prompt else "Say something and I will answer.")


MODEL = ScriptedModel("demo", echo)
