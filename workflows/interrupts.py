"""The interrupt contract: which resumes a thread accepts, checked without side effects.

Pure functions over the thread's open interrupts and its ledger of applied answers, so the
``run_agent`` validator can reject a bad resume before anything is written, and the
handler can check again under the run lock with the same code.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import jsonschema
    from ag_ui.core import Interrupt, ResumeEntry

    from workflows.errors import ErrorCode, rejection
    from workflows.models import AppliedAnswer


def parse_expiry(interrupt: Interrupt) -> datetime | None:
    """The interrupt's ``expiresAt`` as a datetime (``None`` when it never expires)."""
    if interrupt.expires_at is None:
        return None
    return datetime.fromisoformat(interrupt.expires_at.replace("Z", "+00:00"))


def answer_key(entry: ResumeEntry) -> str:
    """``(interruptId, status, payload)`` as one short comparable string, for
    idempotency: a digest, so the ledger's size does not grow with payloads."""
    digest = hashlib.sha256(_canonical(entry).encode()).hexdigest()
    return f"sha256:{digest}"


def same_answer(done: AppliedAnswer, entry: ResumeEntry) -> bool:
    """Whether ``entry`` is exactly the answer ``done`` applied (a ledger carried from
    before keys were digests holds the canonical string itself)."""
    if done.key.startswith("sha256:"):
        return done.key == answer_key(entry)
    return done.key == _canonical(entry)


def _canonical(entry: ResumeEntry) -> str:
    return json.dumps([entry.interrupt_id, entry.status, entry.payload], sort_keys=True)


def is_replay(resume: list[ResumeEntry], applied: dict[str, AppliedAnswer]) -> str | None:
    """The run key that already applied exactly this resume, if any (contract rule 5)."""
    runs = set()
    for entry in resume:
        done = applied.get(entry.interrupt_id)
        if done is None or not same_answer(done, entry):
            return None
        runs.add(done.run_key)
    return runs.pop() if len(runs) == 1 else None


EntryCheck = Callable[[str, ResumeEntry, Interrupt], None]
"""A further check of a resume entry for an open interrupt, which passed the contract's
(``where`` it is, the entry, the interrupt): who may decide it (``workflows/decisions.py``)."""


def check_resume(
    open_interrupts: list[Interrupt],
    resume: list[ResumeEntry] | None,
    applied: dict[str, AppliedAnswer],
    now: datetime,
    decider: EntryCheck | None = None,
) -> None:
    """Raise the rejection for a resume the thread must not apply (contract rules 2-8).

    Args:
        open_interrupts: The thread's open interrupts.
        resume: The input's resume entries (``None`` when the input has none).
        applied: Answers already applied, by interrupt id (expired ones included).
        now: The workflow's current time, for expiry.
        decider: Checks the sender may give each entry's answer (the owner's resume);
            ``None``: anyone may (an operator's, which bypasses approver policies).
    """
    if not resume:
        if open_interrupts:
            ids = ", ".join(i.id for i in open_interrupts)
            raise rejection(
                ErrorCode.INTERRUPTS_PENDING,
                f"The thread is waiting on interrupts {ids}; send a resume that answers "
                "every one of them.",
            )
        return
    by_id = {interrupt.id: interrupt for interrupt in open_interrupts}
    seen: set[str] = set()
    for index, entry in enumerate(resume):
        if entry.interrupt_id in seen:
            raise rejection(
                ErrorCode.DUPLICATE_RESUME_ENTRY,
                f"resume[{index}] answers interrupt {entry.interrupt_id} a second time.",
            )
        seen.add(entry.interrupt_id)
        interrupt = by_id.get(entry.interrupt_id)
        if interrupt is None:
            _check_closed(index, entry, applied)
            continue
        check_answer(f"resume[{index}]", entry, interrupt, now)
        if decider is not None:
            decider(f"resume[{index}]", entry, interrupt)
    missing = [interrupt.id for interrupt in open_interrupts if interrupt.id not in seen]
    if missing:
        raise rejection(
            ErrorCode.INCOMPLETE_RESUME,
            f"The resume leaves interrupts {', '.join(missing)} unanswered; one resume must "
            "answer every open interrupt.",
        )


def _check_closed(index: int, entry: ResumeEntry, applied: dict[str, AppliedAnswer]) -> None:
    """An entry for an interrupt that is not open: a cancel of an expired one, or the
    exact answer it already got (a replay, contract rule 5), passes."""
    done = applied.get(entry.interrupt_id)
    if done is not None and same_answer(done, entry):
        return
    if done is not None and done.status == "expired":
        if entry.status == "cancelled":
            return
        raise rejection(
            ErrorCode.INTERRUPT_EXPIRED,
            f"resume[{index}]: interrupt {entry.interrupt_id} expired at {done.expires_at}; "
            "it can no longer be resolved.",
        )
    if done is not None:
        raise rejection(
            ErrorCode.INTERRUPT_ALREADY_ANSWERED,
            f"resume[{index}]: interrupt {entry.interrupt_id} was already answered differently.",
        )
    raise rejection(
        ErrorCode.UNKNOWN_INTERRUPT,
        f"resume[{index}]: {entry.interrupt_id!r} is not an interrupt of this thread.",
    )


def check_answer(where: str, entry: ResumeEntry, interrupt: Interrupt, now: datetime) -> None:
    """Raise the rejection of an answer to the open ``interrupt``: expiry, then the
    payload against its schema (a resume's entry, or a decision, named ``where``)."""
    expires_at = parse_expiry(interrupt)
    if entry.status == "cancelled":
        return
    if expires_at is not None and now >= expires_at:
        raise rejection(
            ErrorCode.INTERRUPT_EXPIRED,
            f"{where}: interrupt {interrupt.id} expired at {interrupt.expires_at}.",
        )
    schema = interrupt.response_schema
    if schema is None:
        return
    if "payload" not in entry.model_fields_set:
        raise rejection(
            ErrorCode.MISSING_PAYLOAD,
            f"{where}: interrupt {interrupt.id} was resolved without a payload; "
            "it expects one matching its responseSchema.",
        )
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    error = jsonschema.exceptions.best_match(validator.iter_errors(entry.payload))
    if error is not None:
        path = "/".join(str(part) for part in error.absolute_path)
        raise rejection(
            ErrorCode.INVALID_PAYLOAD,
            f"{where}.payload/{path}: {error.message} (interrupt {interrupt.id}'s responseSchema)",
        )
