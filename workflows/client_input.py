"""What a client may write to a thread: the ``state`` and ``forwardedProps`` an agent
declares it accepts, and the roles of the messages a client may add.

An agent declares each as a pydantic model or a JSON Schema (``AgentDefinition(state=...,
forwarded_props=..., client_roles=...)``), the way an ``Ask`` declares its answer. The
declaration is turned into a JSON Schema once, compiled once, advertised in the agent's
capabilities and checked against every run's input by ``workflows/admission.py``: the
schema a client reads is the one its input is held to.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast, get_args

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import jsonschema
    from ag_ui.core import Role

    from workflows.questions import json_schema

ClientRole = Role
"""A message role, as AG-UI names them."""

ROLES: frozenset[ClientRole] = frozenset(get_args(Role))
"""Every role a message can have."""

DEFAULT_ROLES: frozenset[ClientRole] = frozenset({"user", "tool"})
"""The roles AG-UI gives a client: what its user says, and the results of the tools
the client itself provides (``RunAgentInput.tools``)."""

ANY_OBJECT: dict[str, Any] = {"type": "object"}
"""The ``state`` an agent that declares none accepts: any JSON object."""

ANYTHING: dict[str, Any] = {}
"""The ``forwardedProps`` an agent that declares none accepts: any JSON value."""


class InputSchema:
    """A JSON Schema one part of a client's input is held to, compiled once.

    Args:
        shape: A pydantic model (or any type pydantic can describe), a JSON Schema, or
            ``None`` for ``default``.
        default: The schema when ``shape`` is ``None``.

    Raises:
        jsonschema.SchemaError: ``shape`` is not a valid JSON Schema; an agent with one
            is refused when it is defined, not when a client first meets it.
    """

    def __init__(self, shape: type[Any] | dict[str, Any] | None, default: dict[str, Any]):
        self.schema: dict[str, Any] = json_schema(shape) or default
        validator_class = jsonschema.validators.validator_for(
            self.schema, default=jsonschema.Draft202012Validator
        )
        validator_class.check_schema(self.schema)
        self._validator = validator_class(
            self.schema, format_checker=validator_class.FORMAT_CHECKER
        )

    def error(self, value: Any, where: str) -> str | None:
        """Why ``value`` fails the schema, as ``<where>/<path>: <reason>``; ``None`` when
        it fits.

        Args:
            value: The part of the input.
            where: The part's name (``state``), which the path starts from.
        """
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(value))
        if error is None:
            return None
        path = "".join(f"/{part}" for part in error.absolute_path)
        return f"{where}{path}: {error.message}"


@dataclass(frozen=True)
class ClientInput:
    """What an agent accepts from a client, compiled (see the module's docstring)."""

    state: InputSchema
    """The ``state`` a run may send (merged key by key into the thread's state)."""
    forwarded_props: InputSchema
    """The ``forwardedProps`` a run may send."""
    roles: frozenset[ClientRole]
    """The roles of the messages a client may add to the thread."""

    @classmethod
    def declared(
        cls,
        state: type[Any] | dict[str, Any] | None,
        forwarded_props: type[Any] | dict[str, Any] | None,
        roles: Iterable[str],
    ) -> ClientInput:
        """Compile an agent's declaration.

        Raises:
            ValueError: A role that is not a message role.
            jsonschema.SchemaError: A schema that is not one.
        """
        unknown = sorted(set(roles) - ROLES)
        if unknown:
            raise ValueError(f"{unknown} are not message roles; roles are {sorted(ROLES)}.")
        return cls(
            state=InputSchema(state, ANY_OBJECT),
            forwarded_props=InputSchema(forwarded_props, ANYTHING),
            roles=cast(frozenset[ClientRole], frozenset(roles)),
        )

    def advertised(self) -> dict[str, Any]:
        """The declaration as ``GET /agents`` shows it (in ``capabilities.custom``)."""
        return {
            "stateSchema": self.state.schema,
            "forwardedPropsSchema": self.forwarded_props.schema,
            "messageRoles": sorted(self.roles),
        }
