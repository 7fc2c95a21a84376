"""The base of the engine's own models: camelCase on the wire, like AG-UI's.

A leaf of its own, so that both ``workflows/approvers.py`` (the policies) and
``workflows/models.py`` (the thread's state, which keeps each open interrupt's
``approvers.Ballot``) build on it without importing each other in a circle.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Model(BaseModel):
    """Base for the engine's own models: camelCase on the wire, like AG-UI's."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class QueryAnswer(Model):
    """A query's answer: sent to its reader and never stored in history, so the payload
    codec does not compress it (``codec.py``)."""
