"""The tamper matrix: each edit made with raw SQL is caught by checkpoint verification and named.

Every case starts from sagas a, b and c (five entries each), signs a checkpoint, tampers with
saga b behind the library's back, and asserts the exact set of (saga, finding) pairs: the tampered
saga is named with the right kind, and no untouched saga is accused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from datetime import timedelta

import pytest

from sagacity import Entry, Phase, Sagacity
from sagacity.checkpoints import (
    Checkpoint,
    CheckpointReport,
    FindingKind,
    SigningKey,
    create_checkpoint,
    verify_against_checkpoint,
)
from sagacity.errors import JournalIntegrityError

from .conftest import RawSQL, rechain, stored_timestamp

Rows = Callable[[Iterable[Entry]], None]


@pytest.fixture
def checkpoint(sg: Sagacity, key: SigningKey) -> Checkpoint:
    return create_checkpoint(sg, key, "test.example/journal")


def _found(report: CheckpointReport) -> set[tuple[str, FindingKind]]:
    return {(f.saga_id, f.kind) for f in report.findings}


def test_untouched_journal_that_grew_verifies_clean(sg: Sagacity, checkpoint: Checkpoint) -> None:
    """Appends to an attested saga and a brand-new saga after the checkpoint are not findings."""
    sg.journal.append("a", "tool", Phase.INTENT, "{}")
    sg.journal.append("d", "tool", Phase.INTENT, "{}")
    report = verify_against_checkpoint(sg, checkpoint)
    assert report.ok, report.findings
    assert (report.added, report.grown, report.sagas, report.entries) == (("d",), 1, 4, 17)


def test_edited_field_is_broken_at_its_index(sg: Sagacity, checkpoint: Checkpoint, raw_sql: RawSQL) -> None:
    """A payload edited in seq 3 of saga b is BROKEN at index 2, and only that."""
    edit = "UPDATE side_effect_journal SET payload = %s WHERE saga_id = %s AND seq = 3"
    assert raw_sql(edit, ("forged", "b")) == 1
    report = verify_against_checkpoint(sg, checkpoint)
    assert _found(report) == {("b", FindingKind.BROKEN)}
    assert report.findings[0].index == 2


def test_deleted_middle_row_is_broken_and_shortened(
    sg: Sagacity, checkpoint: Checkpoint, raw_sql: RawSQL
) -> None:
    """Deleting seq 3 of saga b breaks its chain at index 2 and leaves it shorter than attested."""
    assert raw_sql("DELETE FROM side_effect_journal WHERE saga_id = %s AND seq = 3", ("b",)) == 1
    report = verify_against_checkpoint(sg, checkpoint)
    assert _found(report) == {("b", FindingKind.BROKEN), ("b", FindingKind.SHORTENED)}
    broken = next(f for f in report.findings if f.kind is FindingKind.BROKEN)
    assert broken.index == 2


def test_swapped_rows_are_broken(
    sg: Sagacity, checkpoint: Checkpoint, write_rows: Rows, journal_url: str
) -> None:
    """Swapping the content of seq 2 and seq 3 of saga b (hashes included) breaks it at index 1."""
    second, third = sg.entries("b")[1:3]
    write_rows([dataclasses.replace(third, seq=2), dataclasses.replace(second, seq=3)])
    report = verify_against_checkpoint(sg, checkpoint)
    assert _found(report) == {("b", FindingKind.BROKEN)}
    assert report.findings[0].index == 1


def test_truncated_tail_is_shortened(sg: Sagacity, checkpoint: Checkpoint, raw_sql: RawSQL) -> None:
    """Deleting the last two entries of saga b leaves a valid chain the checkpoint calls SHORTENED."""
    assert raw_sql("DELETE FROM side_effect_journal WHERE saga_id = %s AND seq > 3", ("b",)) == 2
    assert sg.verify("b").valid  # the chain alone cannot tell
    report = verify_against_checkpoint(sg, checkpoint)
    assert _found(report) == {("b", FindingKind.SHORTENED)}
    assert (report.findings[0].attested, report.findings[0].current) == (5, 3)


def test_deleted_saga_is_missing(sg: Sagacity, checkpoint: Checkpoint, raw_sql: RawSQL) -> None:
    """Deleting every row of saga b is reported as MISSING b."""
    assert raw_sql("DELETE FROM side_effect_journal WHERE saga_id = %s", ("b",)) == 5
    report = verify_against_checkpoint(sg, checkpoint)
    assert _found(report) == {("b", FindingKind.MISSING)}


def test_recomputed_chain_is_rewritten(sg: Sagacity, checkpoint: Checkpoint, write_rows: Rows) -> None:
    """Saga b's payload changed and its whole chain recomputed with the public rule is REWRITTEN."""
    entries = sg.entries("b")
    entries[1] = dataclasses.replace(entries[1], payload="a different result")
    write_rows(rechain(entries))
    assert sg.verify("b").valid  # the chain alone cannot tell
    report = verify_against_checkpoint(sg, checkpoint)
    assert _found(report) == {("b", FindingKind.REWRITTEN)}
    assert report.findings[0].index == 4


def test_recomputed_and_extended_chain_is_rewritten(
    sg: Sagacity, checkpoint: Checkpoint, write_rows: Rows
) -> None:
    """A recomputed chain padded with an extra entry (longer than attested) is still REWRITTEN."""
    entries = sg.entries("b")
    entries[0] = dataclasses.replace(entries[0], input='{"i":99}')
    entries.append(dataclasses.replace(entries[-1], seq=6))
    write_rows(rechain(entries))
    report = verify_against_checkpoint(sg, checkpoint)
    assert _found(report) == {("b", FindingKind.REWRITTEN)}


def test_forged_backdated_saga_is_reported(sg: Sagacity, checkpoint: Checkpoint, write_rows: Rows) -> None:
    """A new saga with a valid chain whose entries claim to predate the checkpoint is BACKDATED."""
    when = checkpoint.time - timedelta(hours=1)
    forged = [
        Entry("forged", seq, "tool", "EXECUTED", "{}", "ok", when + timedelta(seconds=seq), "")
        for seq in (1, 2)
    ]
    write_rows(rechain(forged))
    report = verify_against_checkpoint(sg, checkpoint)
    assert _found(report) == {("forged", FindingKind.BACKDATED)}
    assert report.added == ()


def test_backdated_entries_appended_to_attested_saga_are_reported(
    sg: Sagacity, checkpoint: Checkpoint, write_rows: Rows
) -> None:
    """Forged entries chained onto saga b but dated before the checkpoint are BACKDATED at their index."""
    entries = sg.entries("b")
    extra = dataclasses.replace(entries[-1], seq=6, timestamp=checkpoint.time - timedelta(hours=1))
    write_rows(rechain([*entries, extra])[-1:])
    report = verify_against_checkpoint(sg, checkpoint)
    assert _found(report) == {("b", FindingKind.BACKDATED)}
    assert report.findings[0].index == 5


def test_forged_saga_with_bad_chain_is_broken(
    sg: Sagacity, checkpoint: Checkpoint, raw_sql: RawSQL, journal_url: str
) -> None:
    """A saga inserted after the checkpoint without a valid chain is BROKEN, not merely added."""
    raw_sql(
        "INSERT INTO side_effect_journal (saga_id, seq, tool_name, phase, input, payload, timestamp, hash) "
        "VALUES (%s, 1, 'tool', 'EXECUTED', '{}', 'ok', %s, %s)",
        ("late", stored_timestamp(journal_url, checkpoint.time + timedelta(hours=1)), "f" * 64),
    )
    report = verify_against_checkpoint(sg, checkpoint)
    assert _found(report) == {("late", FindingKind.BROKEN)}


def test_forged_saga_dated_after_checkpoint_is_only_added(
    sg: Sagacity, checkpoint: Checkpoint, write_rows: Rows
) -> None:
    """The documented limit: a valid forged saga dated after the checkpoint looks legitimately new."""
    forged = [Entry("later", 1, "tool", "EXECUTED", "{}", "ok", checkpoint.time + timedelta(hours=1), "")]
    write_rows(rechain(forged))
    report = verify_against_checkpoint(sg, checkpoint)
    assert report.ok
    assert report.added == ("later",)


def test_refuses_to_sign_a_broken_chain(sg: Sagacity, key: SigningKey, raw_sql: RawSQL) -> None:
    """create_checkpoint raises naming the saga and index instead of signing an edited journal."""
    raw_sql("UPDATE side_effect_journal SET payload = 'x' WHERE saga_id = 'c' AND seq = 4", ())
    with pytest.raises(JournalIntegrityError, match=r"saga 'c' BROKEN at seq 4") as caught:
        create_checkpoint(sg, key, "test.example/journal")
    assert caught.value.report is not None
    assert _found(caught.value.report) == {("c", FindingKind.BROKEN)}


def test_refuses_to_sign_over_a_truncation(
    sg: Sagacity, key: SigningKey, checkpoint: Checkpoint, raw_sql: RawSQL
) -> None:
    """Given the previous checkpoint, a truncated saga is refused rather than laundered into a new one."""
    raw_sql("DELETE FROM side_effect_journal WHERE saga_id = 'a' AND seq = 5", ())
    with pytest.raises(JournalIntegrityError, match=r"saga 'a' SHORTENED"):
        create_checkpoint(sg, key, "test.example/journal", previous=checkpoint)
    sg.journal.append("c", "tool", Phase.INTENT, "{}")  # an honest journal extends it
    raw_sql("DELETE FROM side_effect_journal WHERE saga_id = 'a'", ())
    with pytest.raises(JournalIntegrityError, match=r"saga 'a' MISSING"):
        create_checkpoint(sg, key, "test.example/journal", previous=checkpoint)


def test_next_checkpoint_extends_previous(sg: Sagacity, key: SigningKey, checkpoint: Checkpoint) -> None:
    """An honest journal that grew gets a new checkpoint that records the growth."""
    sg.journal.append("a", "tool", Phase.INTENT, "{}")
    later = create_checkpoint(sg, key, "test.example/journal", previous=checkpoint)
    assert (later.size, later.entries) == (3, 16)
    assert later.root != checkpoint.root
