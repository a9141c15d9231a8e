"""Where a gate's trace context waits across the approval pause: ``sagacity_approval_trace``, a
side table of working state (the journal, its hash rule and the SPEC tables are untouched)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from psycopg import sql

from sagacity import ApprovalRequest, Reversibility, Sagacity, SagaStatus, tool
from sagacity.stores._sql import load_ddl

from .conftest import Otel

T0 = datetime(2026, 7, 21, 10, 0, 0)
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _request(saga_id: str, seq: int) -> ApprovalRequest:
    return ApprovalRequest(saga_id, seq, "wire", "{}", hashlib.sha256(b"{}").hexdigest(), T0)


@pytest.fixture
def sg(store_url: str) -> Iterator[Sagacity]:
    with Sagacity(store_url) as sagacity:
        yield sagacity


def test_put_get_replace(sg: Sagacity) -> None:
    """A kept context reads back; putting the same gate again replaces it; unknown gates: None."""
    store: Any = sg.store
    sg.store.put_approval_request(_request("s", 3))
    store.put_trace_context("s", 3, PARENT)
    assert store.get_trace_context("s", 3) == (PARENT, "")
    store.put_trace_context("s", 3, PARENT.replace("b7ad", "c8be"), "vendor=x")
    assert store.get_trace_context("s", 3) == (PARENT.replace("b7ad", "c8be"), "vendor=x")
    assert store.get_trace_context("s", 4) is None
    assert store.get_trace_context("other", 3) is None


def test_contexts_whose_request_is_gone_are_pruned_by_the_next_put(sg: Sagacity) -> None:
    """No cleanup job: each put drops the contexts of requests resumed, rejected or expired."""
    store: Any = sg.store
    for seq in (1, 2):
        sg.store.put_approval_request(_request("s", seq))
        store.put_trace_context("s", seq, PARENT)
    assert sg.store.delete_approval_request("s", 1)
    assert store.get_trace_context("s", 1) == (PARENT, "")  # kept until the next put
    sg.store.put_approval_request(_request("t", 1))
    store.put_trace_context("t", 1, PARENT)
    assert store.get_trace_context("s", 1) is None
    assert store.get_trace_context("s", 2) == (PARENT, "")


def test_the_store_failing_costs_the_link_not_the_gate(
    otel: Otel, sg: Sagacity, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Telemetry never fails a saga: a store refusing the trace context leaves the gate, the
    approval and the resume exactly as they are, without a link, and says so once in the log."""

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def wire(amount: str) -> str:
        return "sent"

    def refuse(*args: object) -> None:
        raise PermissionError("no INSERT on sagacity_approval_trace")

    monkeypatch.setattr(sg.store, "put_trace_context", refuse)
    monkeypatch.setattr("sagacity._otel_instruments._logged", set())
    with caplog.at_level(logging.WARNING, logger="sagacity.otel"):
        for saga in ("a", "b"):
            assert sg.run(saga, lambda: wire("1")).status is SagaStatus.AWAITING_APPROVAL
            sg.approve(saga, 2, "alice@example.com")  # the gate, after the saga's START
            assert sg.resume(saga, 2, '{"amount":"1"}').status is SagaStatus.COMPLETED
    assert [r.message for r in caplog.records].count(
        "sagacity telemetry: saving a gate's trace context failed; telemetry goes on without it"
    ) == 1
    assert all(not s.links for s in otel.named("sagacity.resume"))


@pytest.mark.postgres
def test_a_database_made_before_gets_the_table(postgres_url: str) -> None:
    """A PostgreSQL schema with only the earlier tables gains ``sagacity_approval_trace``."""
    old = load_ddl("postgres").split("-- Extension: the W3C trace context")[0]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(old.encode())
        assert conn.execute("SELECT to_regclass('sagacity_approval_trace')").fetchone() == (None,)
    with Sagacity(postgres_url):
        pass
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('sagacity_approval_trace') IS NOT NULL").fetchone() == (True,)


@pytest.mark.postgres
def test_an_application_role_that_may_not_create_it_still_starts(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The privilege split's role on a database made before: it cannot add the table, so it
    logs why and runs (without links across the pause) until the owner runs ``db init``."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    role = "sagacity_app_" + uuid.uuid4().hex[:10]
    old = load_ddl("postgres").split("-- Extension: the W3C trace context")[0]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(old.encode())
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        # What ``db grant`` gave the role before the table existed:
        ident = sql.Identifier(role)
        admin_statements = [
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(_schema(postgres_url)), ident),
            sql.SQL("GRANT SELECT, INSERT ON side_effect_journal TO {}").format(ident),
            sql.SQL(
                "GRANT SELECT, INSERT, UPDATE, DELETE "
                "ON sagacity_approval_request, sagacity_approval_expiry TO {}"
            ).format(ident),
        ]
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            for statement in admin_statements:
                admin.execute(statement)
        parts = urlsplit(postgres_url)
        as_role = urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rsplit('@', 1)[-1]}"))
        with caplog.at_level(logging.WARNING, logger="sagacity.stores"), Sagacity(as_role) as app:
            app.journal.append("s", "t", "INTENT", "{}")
            assert app.verify("s").valid
        assert any("sagacity_approval_trace" in r.getMessage() for r in caplog.records)
        with Sagacity(postgres_url) as owner:  # the owner's start adds it; a new grant covers it
            owner.store.grant_append_only(role)  # type: ignore[attr-defined]
        with Sagacity(as_role) as app:
            app.store.put_approval_request(_request("s", 1))
            store: Any = app.store
            store.put_trace_context("s", 1, PARENT)
            assert store.get_trace_context("s", 1) == (PARENT, "")
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _schema(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
    assert row is not None
    return str(row[0])
