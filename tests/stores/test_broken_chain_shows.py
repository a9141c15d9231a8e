"""A broken hash chain shows in the saga list, its filter and its counter, not only in verify.

PostgreSQL's and MariaDB's triggers note an UPDATE behind the library's back, so the next read
refolds and re-verifies the saga. SQLite refuses UPDATEs; someone who drops its triggers and edits
the file changes no rowid, so the index cannot notice until a verification reads the journal:
``verify``, ``view`` and ``doctor --full`` then write what they found into the index, and every
list and counter shows it from then on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from sagacity import Sagacity, SagaStatus, tool
from sagacity.doctor import FindingKind, diagnose
from sagacity.errors import InvalidValueError

_EDIT = "UPDATE side_effect_journal SET payload = 'charged 0' WHERE saga_id = 'forged' AND seq = 3"


@tool(name="bc_charge")
def charge(amount: int) -> str:
    return f"charged {amount}"


def _pay(amount: int) -> None:
    charge(amount)


@pytest.fixture
def sg(durable_url: str, behind_the_library: Callable[[str, str], int]) -> Iterator[Sagacity]:
    with Sagacity(durable_url) as sg:
        sg.run("forged", _pay, 7)
        sg.run("honest", _pay, 8)
        assert [s.chain_valid for s in sg.sagas()] == [True, True]  # the index has folded both
        assert sg.broken_chain_count() == 0
        assert behind_the_library(durable_url, _EDIT) == 1  # another program with write access
        yield sg


def _shows_broken(sg: Sagacity) -> None:
    listed = {s.saga_id: (s.status, s.chain_valid, s.chain_broken_at) for s in sg.sagas()}
    assert listed == {
        "forged": (SagaStatus.COMPLETED, False, 2),
        "honest": (SagaStatus.COMPLETED, True, None),
    }
    assert [s.saga_id for s in sg.sagas(broken_chain=True)] == ["forged"]
    assert [s.saga_id for s in sg.sagas(broken_chain=False)] == ["honest"]
    assert [s.saga_id for s in sg.sagas(broken_chain=True, status="COMPLETED", prefix="for")] == ["forged"]
    assert sg.sagas(broken_chain=True, prefix="hon") == []
    assert sg.broken_chain_count() == 1
    assert sg.saga_counts() == {SagaStatus.COMPLETED: 2}  # a status is what the journal says
    findings = diagnose(sg, older_than=timedelta(0)).findings  # without --full
    assert [(f.kind, f.saga_id) for f in findings] == [(FindingKind.BROKEN_CHAIN, "forged")]


@pytest.mark.parametrize("durable_url", ["postgres", "mysql"], indirect=True)
def test_a_server_store_shows_the_break_at_the_next_read(sg: Sagacity) -> None:
    _shows_broken(sg)


@pytest.mark.parametrize("durable_url", ["sqlite"], indirect=True)
def test_on_sqlite_a_verification_notes_the_break_for_every_list(sg: Sagacity) -> None:
    assert sg.broken_chain_count() == 0  # no rowid moved: nothing told the index
    verification = sg.verify("forged")
    assert (verification.valid, verification.break_at_index) == (False, 2)
    _shows_broken(sg)
    assert sg.verify("honest").valid


@pytest.mark.parametrize("durable_url", ["sqlite"], indirect=True)
def test_on_sqlite_a_view_notes_the_break(sg: Sagacity) -> None:
    assert not sg.view("forged").verification.valid
    _shows_broken(sg)


@pytest.mark.parametrize("durable_url", ["sqlite"], indirect=True)
def test_on_sqlite_doctor_full_notes_the_break(sg: Sagacity) -> None:
    assert diagnose(sg, older_than=timedelta(0)).findings == []  # the documented limit
    full = diagnose(sg, older_than=timedelta(0), full=True).findings
    assert [(f.kind, f.saga_id) for f in full] == [(FindingKind.BROKEN_CHAIN, "forged")]
    _shows_broken(sg)


@pytest.mark.parametrize("value", ["yes", 1, "true"])
def test_a_broken_chain_filter_that_is_not_a_bool_is_refused(value: Any) -> None:
    with Sagacity("memory://") as sg, pytest.raises(InvalidValueError, match="broken_chain must be True"):
        sg.sagas(broken_chain=value)
