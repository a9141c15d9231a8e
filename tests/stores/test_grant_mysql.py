"""``sagacity db grant --role`` on MariaDB: the application account appends and reads the journal,
never changes it; the index's triggers still note its rows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from click.testing import CliRunner

from sagacity import Phase, Sagacity
from sagacity.cli import main

pymysql = pytest.importorskip("pymysql")

from sagacity.stores.mysql import connect_arguments  # noqa: E402 - after the driver check

pytestmark = pytest.mark.mysql

_DENIED = 1142  # ER_TABLEACCESS_DENIED_ERROR: "command denied to user ... for table"


def _as_user(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))


def _admin(url: str) -> object:
    return pymysql.connect(**connect_arguments(url), autocommit=True)


@pytest.fixture
def app_user(mysql_url: str) -> Iterator[tuple[str, str]]:
    """A fresh account (server-wide, so the name is unique) with a password, dropped after."""
    user, password = "sagacity_" + uuid.uuid4().hex[:10], uuid.uuid4().hex
    with _admin(mysql_url) as admin, admin.cursor() as cur:
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
    try:
        yield user, password
    finally:
        with _admin(mysql_url) as admin, admin.cursor() as cur:
            cur.execute(f"DROP USER '{user}'@'%'")


def test_granted_account_appends_and_reads_but_cannot_update_or_delete(
    mysql_url: str, app_user: tuple[str, str]
) -> None:
    """After ``db grant``, the account runs the library (appends, verify, operator reads) but
    UPDATE and DELETE on the journal are refused by the server."""
    user, password = app_user
    result = CliRunner().invoke(main, ["db", "grant", "--role", user, "--db", mysql_url])
    assert result.exit_code == 0, result.output
    app_url = _as_user(mysql_url, user, password)
    with Sagacity(app_url) as sg:
        sg.journal.append("granted", "tool", Phase.INTENT, "{}")
        sg.journal.append("granted", "tool", Phase.EXECUTED, "{}", "ok")
        assert sg.verify("granted").valid
        assert [(s.saga_id, s.entry_count) for s in sg.sagas()] == [("granted", 2)]
    with pymysql.connect(**connect_arguments(app_url), autocommit=True) as conn, conn.cursor() as cur:
        for statement in (
            "UPDATE side_effect_journal SET payload = 'forged' WHERE saga_id = 'granted'",
            "DELETE FROM side_effect_journal WHERE saga_id = 'granted'",
            "TRUNCATE side_effect_journal",
        ):
            with pytest.raises(pymysql.err.MySQLError) as refused:
                cur.execute(statement)
            assert refused.value.args[0] == _DENIED, refused.value
    with Sagacity(mysql_url) as owner:
        assert [e.payload for e in owner.entries("granted")] == ["", "ok"]


def test_a_database_wide_grant_is_refused_with_the_fix(mysql_url: str, app_user: tuple[str, str]) -> None:
    """An account holding UPDATE on the whole database keeps it whatever table grants say, so
    ``db grant`` refuses and prints the REVOKE that fixes it."""
    user, _ = app_user
    database = connect_arguments(mysql_url)["database"]
    with _admin(mysql_url) as admin, admin.cursor() as cur:
        cur.execute(f"GRANT SELECT, UPDATE ON `{database}`.* TO '{user}'@'%'")
    result = CliRunner().invoke(main, ["db", "grant", "--role", user, "--db", mysql_url])
    assert result.exit_code != 0
    assert f"REVOKE UPDATE ON `{database}`.*" in result.output
