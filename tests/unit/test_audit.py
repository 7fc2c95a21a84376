"""The audit trail keeps its newest records within its count and its bytes
(``workflows/audit.py``): what measuring each of its records says it must keep."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from workflows import audit, budgets
from workflows.models import AuditRecord

AT = datetime(2026, 11, 28, tzinfo=UTC)


def record(index: int, error_chars: int = 0) -> AuditRecord:
    return AuditRecord(
        at=AT, kind="decision", outcome="applied", run_id=f"r{index}", error="e" * error_chars
    )


def kept_by_each_size(records: list[AuditRecord]) -> list[AuditRecord]:
    """What the rule keeps, each record measured on its own."""
    sizes = [budgets.json_size(each) for each in records]
    drop = budgets.records_to_drop(sizes, budgets.AUDIT_KEPT, budgets.AUDIT_KEPT_BYTES)
    return records[drop:]


def test_a_trail_within_its_bytes_keeps_its_newest_records_by_count() -> None:
    trail: list[AuditRecord] = []
    for index in range(budgets.AUDIT_KEPT + 7):
        audit.append(trail, record(index))
    assert [each.run_id for each in trail] == [f"r{i}" for i in range(7, budgets.AUDIT_KEPT + 7)]


def test_a_trail_over_its_bytes_drops_its_oldest_and_keeps_the_newest_whatever_its_size() -> None:
    trail: list[AuditRecord] = []
    for index in range(6):
        audit.append(trail, record(index, error_chars=20_000))
    assert [each.run_id for each in trail] == ["r3", "r4", "r5"]
    assert budgets.json_size(trail) <= budgets.AUDIT_KEPT_BYTES
    audit.append(trail, record(6, error_chars=budgets.AUDIT_KEPT_BYTES))
    assert [each.run_id for each in trail] == ["r6"]


@given(st.lists(st.integers(min_value=0, max_value=budgets.AUDIT_KEPT_BYTES // 4), max_size=70))
def test_appending_keeps_what_measuring_each_record_would(error_sizes: list[int]) -> None:
    trail: list[AuditRecord] = []
    expected: list[AuditRecord] = []
    for index, chars in enumerate(error_sizes):
        added = record(index, chars)
        audit.append(trail, added)
        expected = kept_by_each_size([*expected, added])
        assert trail == expected
