"""The thread's audit trail (``ThreadState.audit``): what operators and approvers did to
the thread, and the permits it issued, oldest first.

Each kind of record is made here from what the thread knows when it happens, and the
trail is kept within its budget (``budgets.AUDIT_KEPT``, ``budgets.AUDIT_KEPT_BYTES``)
as records are added. Pure functions of their arguments; :func:`append` and
:func:`supersede` change the trail they are given.

Only what happened is recorded: a decision the thread rejects is rejected by its
validator and leaves no record, so a caller who may not decide cannot grow the trail.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ag_ui.core import ResumeEntry

    from workflows import budgets
    from workflows.approvers import Ballot
    from workflows.decisions import approved, approved_digest
    from workflows.errors import ErrorCode
    from workflows.models import AuditOutcome, AuditRecord, OperatorResume, Permit


def append(audit: list[AuditRecord], record: AuditRecord) -> None:
    """Append ``record``, then drop the oldest records past the trail's budget.

    The trail is measured whole, in one pass: its JSON is longer than its records'
    together, so a trail within its bytes, as it mostly is, drops records by their count
    alone. Only a trail over its bytes has each record measured.
    """
    audit.append(record)
    del audit[: max(len(audit) - budgets.AUDIT_KEPT, 0)]
    if budgets.json_size(audit) <= budgets.AUDIT_KEPT_BYTES:
        return
    sizes = [budgets.json_size(kept) for kept in audit]
    del audit[: budgets.records_to_drop(sizes, budgets.AUDIT_KEPT, budgets.AUDIT_KEPT_BYTES)]


def operator_resume(
    request: OperatorResume,
    outcome: AuditOutcome,
    at: datetime,
    run_id: str | None = None,
    error: ApplicationError | None = None,
) -> AuditRecord:
    """An ``operator_resume``, applied, repeated or rejected (with the error)."""
    too_large = error is not None and error.type == ErrorCode.INPUT_TOO_LARGE
    return AuditRecord(
        at=at,
        operator=_cut(request.operator),
        # A resume refused for its size is not kept: the audit trail is carried.
        resume=[] if too_large else request.resume,
        outcome=outcome,
        run_id=run_id,
        error_code=error.type if error else None,
        error=_cut(error.message) if error else None,
    )


def decision(
    principal: str, entry: ResumeEntry, ballot: Ballot, at: datetime, run_id: str | None
) -> AuditRecord:
    """A decision that counted (from the decisions endpoint, or an entry of the owner's
    resume): who, on which interrupt, and, for an approval of a tool call, the
    arguments it approves (their digest)."""
    resolved = entry.status == "resolved"
    verdict = approved(entry.payload) if resolved else None
    approving = resolved and verdict is not False
    return AuditRecord(
        at=at,
        kind="decision",
        outcome="applied",
        principal=_cut(principal),
        interrupt_id=entry.interrupt_id,
        status=entry.status,
        approved=verdict,
        digest=approved_digest(ballot, entry.payload) if approving else None,
        run_id=run_id,
    )


def supersede(audit: list[AuditRecord], interrupt_id: str, principals: Sequence[str]) -> None:
    """Mark the approvals of ``principals`` on the interrupt as no longer counting: an
    approval of other arguments restarted the count."""
    for record in audit:
        if (
            record.kind == "decision"
            and record.interrupt_id == interrupt_id
            and record.outcome == "applied"
            and record.principal in principals
        ):
            record.outcome = "superseded"


def permit(issued: Permit, run_id: str | None) -> AuditRecord:
    """A permit issued to an approved tool call."""
    return AuditRecord(
        at=issued.at,
        kind="permit",
        outcome="applied",
        interrupt_id=issued.interrupt_id,
        digest=issued.digest,
        approvers=issued.approvers,
        run_id=run_id,
    )


def refused_permit(held: Sequence[Permit], message: str, at: datetime, run_id: str) -> AuditRecord:
    """A tool that refused to run under its permit (``PERMIT_MISMATCH``), in the run
    whose turn ``held`` those permits: the permit, when there was only one (the error
    does not say which), and the tool's message in any case."""
    refused = held[0] if len(held) == 1 else None
    return AuditRecord(
        at=at,
        kind="permit",
        outcome="rejected",
        interrupt_id=refused.interrupt_id if refused else None,
        digest=refused.digest if refused else None,
        approvers=refused.approvers if refused else [],
        run_id=run_id,
        error_code=ErrorCode.PERMIT_MISMATCH,
        error=_cut(message),
    )


def _cut(text: str) -> str:
    """``text`` within ``budgets.AUDIT_TEXT_CHARS``: names and messages come from outside."""
    length = budgets.AUDIT_TEXT_CHARS
    return text if len(text) <= length else text[: length - 1] + "…"
