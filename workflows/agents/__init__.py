"""The example agents, which ``make run`` serves: one module each, holding the agent's
tools and model (its activities) with its definition.

``worker.py`` and ``python -m gateway`` hand :data:`EXAMPLES` to the worker
(``worker.build_worker``) and to the gateway (``gateway.app.create_app``). Each serves
exactly the agents it is handed, so serving another agent is handing it to both.
"""

from __future__ import annotations

from workflows.agents.clarify import CLARIFY
from workflows.agents.demo import DEMO
from workflows.agents.files import FILES
from workflows.agents.ops import OPS
from workflows.agents.payments import PAYMENTS
from workflows.agents.transfer import TRANSFER
from workflows.sdk import AgentDefinition

EXAMPLES: tuple[AgentDefinition, ...] = (DEMO, FILES, TRANSFER, CLARIFY, PAYMENTS, OPS)
