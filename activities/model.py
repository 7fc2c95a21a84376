"""The legacy demo agent's model (``workflows/agents/legacy_demo.py``): a deterministic
stand-in for an LLM call. Registered while turns begun on the legacy demo may remain;
the current demo's model is ``activities/demo.py``'s.
"""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import activity


class GenerateReplyInput(BaseModel):
    """The text the model answers."""

    prompt: str


class GenerateReplyOutput(BaseModel):
    """The reply, already split into the deltas a streaming model would send."""

    chunks: list[str]


@activity.defn
async def generate_reply(request: GenerateReplyInput) -> GenerateReplyOutput:
    """Answer ``prompt`` with a fixed, predictable reply, word by word."""
    prompt = request.prompt.strip()
    reply = f"You said: {prompt}" if prompt else "Say something and I will answer."
    words = reply.split(" ")
    return GenerateReplyOutput(chunks=[words[0], *(f" {word}" for word in words[1:])])
