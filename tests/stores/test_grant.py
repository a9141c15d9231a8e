"""``sagacity db grant --role``: the application role may append and read the journal, never change it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import errors, sql

from sagacity import Phase, Sagacity
from sagacity.checkpoints import FindingKind, SigningKey, checkpoint_log, verify_log
from sagacity.cli import main
from sagacity.errors import StoreError

pytestmark = pytest.mark.postgres


def _as_user(url: str, role: str) -> str:
    """``url`` with its user replaced by ``role`` (and no password: the test server trusts)."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{role}@{host}"))


@pytest.fixture
def app_role(postgres_url: str) -> Iterator[str]:
    """A fresh LOGIN role (role names are cluster-global, so the name is unique), dropped after."""
    role = "sagacity_app_" + uuid.uuid4().hex[:10]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        yield role
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_granted_role_can_insert_and_select_but_not_update_or_delete(
    postgres_url: str, app_role: str
) -> None:
    """After ``db grant``, the role appends and reads but UPDATE and DELETE on the journal are refused."""
    result = CliRunner().invoke(main, ["db", "grant", "--role", app_role, "--db", postgres_url])
    assert result.exit_code == 0, result.output
    assert app_role in result.output

    # The library itself works as that role: append, read, verify.
    with Sagacity(_as_user(postgres_url, app_role)) as sg:
        sg.journal.append("granted", "tool", Phase.INTENT, "{}")
        sg.journal.append("granted", "tool", Phase.EXECUTED, "{}", "ok")
        assert sg.verify("granted").valid
        # ...and the operator reads, which catch the saga index up as that role.
        assert [(s.saga_id, s.entry_count) for s in sg.sagas()] == [("granted", 2)]

    with psycopg.connect(_as_user(postgres_url, app_role), autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (app_role,)
        conn.execute(
            "INSERT INTO side_effect_journal (saga_id, seq, tool_name, phase, timestamp, hash) "
            "VALUES ('raw', 1, 't', 'INTENT', now(), repeat('0', 64))"
        )
        count = conn.execute("SELECT count(*) FROM side_effect_journal").fetchone()
        assert count == (3,)
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("UPDATE side_effect_journal SET payload = 'forged' WHERE saga_id = 'granted'")
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("DELETE FROM side_effect_journal WHERE saga_id = 'granted'")
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("TRUNCATE side_effect_journal")

    with Sagacity(postgres_url) as owner:
        assert [e.payload for e in owner.entries("granted")] == ["", "ok"]
        assert owner.verify("granted").valid


def test_a_foreign_writer_with_only_journal_rights_still_inserts_and_is_indexed(
    postgres_url: str, app_role: str
) -> None:
    """Another implementation's role, granted nothing but INSERT and SELECT on the shared journal
    (no right on Sagacity's own tables), inserts as before: the index's trigger runs as the table
    owner. Its row then shows in the owner's saga list."""
    with Sagacity(postgres_url):
        pass  # the schema, with the index's triggers
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        schema = admin.execute("SELECT current_schema()").fetchone()
        assert schema is not None
        admin.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                sql.Identifier(schema[0]), sql.Identifier(app_role)
            )
        )
        admin.execute(
            sql.SQL("GRANT SELECT, INSERT ON side_effect_journal TO {}").format(sql.Identifier(app_role))
        )
    with psycopg.connect(_as_user(postgres_url, app_role), autocommit=True) as java:
        java.execute("SET search_path TO pg_catalog")  # its own search_path cannot redirect the trigger
        java.execute(
            sql.SQL(
                "INSERT INTO {}.side_effect_journal (saga_id, seq, tool_name, phase, timestamp, hash) "
                "VALUES ('java-1', 1, 't', 'INTENT', now(), repeat('0', 64))"
            ).format(sql.Identifier(schema[0]))
        )
    with Sagacity(postgres_url) as owner:
        assert [(s.saga_id, str(s.status)) for s in owner.sagas()] == [("java-1", "IN_DOUBT")]


def test_grant_on_sqlite_is_refused_with_a_reason(sqlite_url: str) -> None:
    """``db grant`` on SQLite exits 2 and says the triggers enforce append-only there."""
    result = CliRunner().invoke(main, ["db", "grant", "--role", "app", "--db", sqlite_url])
    assert result.exit_code == 2
    assert "PostgreSQL" in result.output


def test_the_append_only_role_logs_and_verifies_but_never_rewrites_the_log(
    postgres_url: str, app_role: str
) -> None:
    """The log is evidence like the journal: the role inserts and reads it, never changes it."""
    result = CliRunner().invoke(main, ["db", "grant", "--role", app_role, "--db", postgres_url])
    assert result.exit_code == 0, result.output
    key = SigningKey.generate("grant-test")
    with Sagacity(_as_user(postgres_url, app_role)) as sg:
        sg.journal.append("granted", "tool", Phase.EXECUTED, "{}", "ok")
        first = checkpoint_log(sg, key, "grant.example")
        assert first.size == 1
        assert verify_log(sg, [first]) == []
    with psycopg.connect(_as_user(postgres_url, app_role), autocommit=True) as conn:
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("UPDATE sagacity_log SET hash = repeat('0', 64)")
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("DELETE FROM sagacity_log")


def test_a_journal_made_before_the_log_reads_as_an_empty_log_without_create(
    postgres_url: str, app_role: str
) -> None:
    """Auditing needs no CREATE: where the log's table is missing, verifying reads an empty log."""
    result = CliRunner().invoke(main, ["db", "grant", "--role", app_role, "--db", postgres_url])
    assert result.exit_code == 0, result.output
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("DROP TABLE sagacity_log")  # as a database made by an earlier release
    key = SigningKey.generate("grant-test")
    with Sagacity("memory://") as other:  # a checkpoint of another journal, of size 1
        other.journal.append("other", "tool", Phase.EXECUTED, "{}", "ok")
        elsewhere = checkpoint_log(other, key, "grant.example")
    with Sagacity(_as_user(postgres_url, app_role)) as sg:
        findings = verify_log(sg, [elsewhere])
        assert [f.kind for f in findings] == [FindingKind.LOG_MISMATCH]
        assert "the log has 0 entries" in findings[0].detail
        with pytest.raises(StoreError, match=r"(?i)permission"):
            checkpoint_log(sg, key, "grant.example")  # making the table is the owner's
    with Sagacity(postgres_url) as owner:
        assert checkpoint_log(owner, key, "grant.example").size == 0
