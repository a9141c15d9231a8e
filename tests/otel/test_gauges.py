"""The gauges read the store when a metric reader collects: pending approvals, the age of the
oldest, in-doubt calls. And verification failures are counted."""

from __future__ import annotations

import sqlite3
from datetime import timedelta

import pytest

from sagacity import Phase, Reversibility, Sagacity, tool
from sagacity.stores import safe_url
from sagacity.stores.sqlite import path_from_url

from .conftest import Otel


def test_pending_approvals_and_the_age_of_the_oldest(otel: Otel, store_url: str) -> None:
    """Two gates pending: the gauge says 2 and the oldest's age; once decided, 0 and 0."""

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def wire(amount: str) -> str:
        return "sent"

    with Sagacity(store_url) as sg:
        sg.run("gauge-1", lambda: wire("1.00"))
        sg.run("gauge-2", lambda: wire("2.00"))
        store = {"sagacity.store": safe_url(sg.url)}
        assert otel.value("sagacity.approvals.pending", **store) == 2
        oldest = sg.pending_approvals()[0]
        age = otel.value("sagacity.approvals.oldest_age", **store)
        assert 0.0 <= age < 60.0
        assert age >= (sg.pending_approvals()[1].created_at - oldest.created_at).total_seconds()
        sg.reject("gauge-1", 2, "bob@example.com", "no")
        sg.approve("gauge-2", 2, "alice@example.com")
        sg.resume("gauge-2", 2, '{"amount":"2.00"}')
        assert otel.value("sagacity.approvals.pending", **store) == 0
        assert otel.value("sagacity.approvals.oldest_age", **store) == 0.0


def test_in_doubt_calls(otel: Otel, store_url: str) -> None:
    """An INTENT with no outcome (a process died mid-call) is one in-doubt call until resolved."""
    with Sagacity(store_url) as sg:
        store = {"sagacity.store": safe_url(sg.url)}
        assert otel.value("sagacity.calls.in_doubt", **store) == 0
        sg.journal.append("died-1", "charge_card", Phase.INTENT, '{"amount":"5"}')
        assert otel.value("sagacity.calls.in_doubt", **store) == 1
        sg.resolve_in_doubt("died-1", 1, happened=True, result="ch_1", resolver="ops@example.com")
        assert otel.value("sagacity.calls.in_doubt", **store) == 0
    decided = otel.one("sagacity.resolve_in_doubt")
    assert (decided.attributes or {})["sagacity.decision.by"] == "ops@example.com"
    assert (decided.attributes or {})["sagacity.decision.happened"] is True
    assert otel.value("sagacity.decisions", **{"sagacity.decision.kind": "resolve"}) == 1


def test_two_sagacity_on_one_database_report_it_once(otel: Otel, sqlite_url: str) -> None:
    with Sagacity(sqlite_url) as a, Sagacity(sqlite_url) as b:
        assert a is not b
        points = otel.metrics()["sagacity.approvals.pending"]
        assert [attrs for attrs, _ in points] == [{"sagacity.store": sqlite_url}]


def test_a_closed_sagacity_is_no_longer_watched(otel: Otel, sqlite_url: str) -> None:
    with Sagacity(sqlite_url):
        pass
    assert "sagacity.approvals.pending" not in otel.metrics()


def test_a_broken_chain_is_a_verification_failure(otel: Otel, sqlite_url: str) -> None:
    """``verify`` finding an edited row counts one failure of kind ``chain``; a valid one none."""
    with Sagacity(sqlite_url) as sg:
        for i in range(3):
            sg.journal.append("s", "tool", Phase.EXECUTED, f'{{"i":{i}}}', "ok")
        assert sg.verify("s").valid
        assert "sagacity.verification.failures" not in otel.metrics()
        with sqlite3.connect(path_from_url(sqlite_url), isolation_level=None) as conn:
            conn.execute("DROP TRIGGER side_effect_journal_no_update")
            conn.execute("UPDATE side_effect_journal SET payload = 'forged' WHERE seq = 2")
        conn.close()
        assert not sg.verify("s").valid
    assert otel.value("sagacity.verification.failures", **{"sagacity.verification.kind": "chain"}) == 1


def test_a_journal_not_extending_its_checkpoint_is_a_verification_failure(
    otel: Otel, sqlite_url: str
) -> None:
    pytest.importorskip("cryptography")
    from sagacity.checkpoints import SigningKey, create_checkpoint, verify_against_checkpoint

    key = SigningKey.generate("test")
    with Sagacity(sqlite_url) as sg:
        sg.journal.append("s", "tool", Phase.EXECUTED, "{}", "ok")
        sg.journal.append("s", "tool", Phase.EXECUTED, "{}", "ok")
        checkpoint = create_checkpoint(sg.store, key, origin="test")
        assert verify_against_checkpoint(sg.store, checkpoint).ok
        with sqlite3.connect(path_from_url(sqlite_url), isolation_level=None) as conn:
            conn.execute("DROP TRIGGER side_effect_journal_no_delete")
            conn.execute("DELETE FROM side_effect_journal WHERE seq = 2")
        conn.close()
        assert not verify_against_checkpoint(sg.store, checkpoint).ok
    assert otel.value("sagacity.verification.failures", **{"sagacity.verification.kind": "checkpoint"}) == 1


def test_expiry_is_a_decision_per_request(otel: Otel) -> None:
    @tool(reversibility=Reversibility.IRREVERSIBLE, approval_ttl=timedelta(seconds=0))
    def wire(amount: str) -> str:
        return "sent"

    with Sagacity("memory://") as sg:
        sg.run("expire-1", lambda: wire("1"))
        sg.run("expire-2", lambda: wire("2"))
        assert len(sg.expire_approvals()) == 2
    span = otel.one("sagacity.expire_approvals")
    assert (span.attributes or {})["sagacity.decision.count"] == 2
    assert [s.name for s in otel.children(span)] == ["sagacity.compensate", "sagacity.compensate"]
    assert otel.value("sagacity.decisions", **{"sagacity.decision.kind": "expire"}) == 2
