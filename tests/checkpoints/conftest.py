"""Fixtures for checkpoint tests: durable journals, keys, and raw SQL behind the library's back."""

from __future__ import annotations

import dataclasses
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from sagacity import Entry, Phase, Sagacity
from sagacity.chain import GENESIS_HASH, entry_hash
from sagacity.checkpoints import SigningKey
from sagacity.cli import main
from sagacity.stores.sqlite import path_from_url

#: Runs one statement on the journal's database directly; returns the row count.
RawSQL = Callable[[str, tuple[Any, ...]], int]

SAGAS = ("a", "b", "c")
ENTRIES_PER_SAGA = 5


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def journal_url(request: pytest.FixtureRequest) -> str:
    """A SQLite file or a fresh PostgreSQL schema: the stores an attacker could edit with SQL."""
    url: str = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "postgres_url")
    return url


#: The log is new enough to run on every SQL store, MariaDB too (the older tests keep two).
ALL_SQL_STORES = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
]


@pytest.fixture
def sg(journal_url: str) -> Iterator[Sagacity]:
    """Sagas a, b and c with five valid entries each."""
    with Sagacity(journal_url) as sagacity:
        for saga_id in SAGAS:
            for i in range(ENTRIES_PER_SAGA):
                sagacity.journal.append(saga_id, "tool", Phase.EXECUTED, f'{{"i":{i}}}', f"result {i}")
        yield sagacity


@pytest.fixture(scope="session")
def key() -> SigningKey:
    return SigningKey.generate("test-journal")


@pytest.fixture(scope="session")
def other_key() -> SigningKey:
    """A key with the same name but other bytes: what an impostor would sign with."""
    return SigningKey.generate("test-journal")


def rechain(entries: list[Entry]) -> list[Entry]:
    """The entries with every hash recomputed by the public rule: a valid chain over new content."""
    prev, out = GENESIS_HASH, []
    for e in entries:
        digest = entry_hash(prev, e.saga_id, e.seq, e.tool_name, e.phase, e.input, e.payload, e.timestamp)
        out.append(dataclasses.replace(e, hash=digest))
        prev = digest
    return out


def stored_timestamp(url: str, moment: datetime) -> Any:
    """A timestamp as the store's column holds it (SQLite: TEXT with six fraction digits)."""
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f") if url.startswith("sqlite:") else moment


def rewrite_saga_b(sg: Sagacity, raw_sql: RawSQL, journal_url: str) -> None:
    """What an operator holding the database does: saga b's second entry gets another result, the
    chain is recomputed over it (same entry count, valid hashes), and the log table is emptied so a
    rebuilt log folds the forged history."""
    entries = sg.entries("b")
    entries[1] = dataclasses.replace(entries[1], payload="a different result")
    for e in rechain(entries):
        raw_sql(
            "UPDATE side_effect_journal SET payload = %s, hash = %s, timestamp = %s "
            "WHERE saga_id = %s AND seq = %s",
            (e.payload, e.hash, stored_timestamp(journal_url, e.timestamp), e.saga_id, e.seq),
        )
    raw_sql("DELETE FROM sagacity_log", ())


@pytest.fixture
def raw_sql(journal_url: str) -> RawSQL:
    """Execute SQL on the journal directly, bypassing Sagacity.

    On SQLite the triggers refusing UPDATE and DELETE (``side_effect_journal_no_update`` and
    ``side_effect_journal_no_delete``) are dropped first: an attacker with write access to the file
    can do that too, and checkpoint verification must still catch the edit. On PostgreSQL the
    test connects as the tables' owner, which the privilege split does not restrict.
    """

    def run(statement: str, params: tuple[Any, ...] = ()) -> int:
        if journal_url.startswith("sqlite:"):
            conn = sqlite3.connect(path_from_url(journal_url), isolation_level=None)
            try:
                conn.execute("DROP TRIGGER IF EXISTS side_effect_journal_no_update")
                conn.execute("DROP TRIGGER IF EXISTS side_effect_journal_no_delete")
                return conn.execute(statement.replace("%s", "?"), params).rowcount
            finally:
                conn.close()
        if journal_url.startswith(("mysql:", "mariadb:")):
            import pymysql

            from sagacity.stores.mysql import connect_arguments

            db = pymysql.connect(**connect_arguments(journal_url), autocommit=True)
            try:
                with db.cursor() as cur:
                    return int(cur.execute(statement, params))
            finally:
                db.close()
        import psycopg

        with psycopg.connect(journal_url, autocommit=True) as pg:
            return pg.execute(statement, params).rowcount

    return run


@pytest.fixture
def write_rows(journal_url: str, raw_sql: RawSQL) -> Callable[[Iterable[Entry]], None]:
    """Insert or overwrite whole rows by (saga_id, seq), hashes and all, as a forger would."""

    def write(entries: Iterable[Entry]) -> None:
        for e in entries:
            raw_sql("DELETE FROM side_effect_journal WHERE saga_id = %s AND seq = %s", (e.saga_id, e.seq))
            raw_sql(
                "INSERT INTO side_effect_journal (saga_id, seq, tool_name, phase, input, payload, timestamp, "
                "hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    e.saga_id,
                    e.seq,
                    e.tool_name,
                    e.phase,
                    e.input,
                    e.payload,
                    stored_timestamp(journal_url, e.timestamp),
                    e.hash,
                ),
            )

    return write


def export_bundle(db: str, saga_ids: list[str], bundle: Path, anchor: Path, pub: Path, *extra: str) -> Result:
    """``sagacity export SAGA... --bundle`` from an anchor, through the CLI."""
    args = ["export", *saga_ids, "--db", db, "--bundle", str(bundle), "--checkpoint", str(anchor)]
    return CliRunner().invoke(main, [*args, "--key", str(pub), *extra], catch_exceptions=False)


def verify_offline(bundle: Path, pub: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The standalone verifier as an auditor runs it: its own process, only files and keys."""
    return subprocess.run(
        [sys.executable, "-m", "sagacity.verify_bundle", str(bundle), "--key", str(pub), *extra],
        capture_output=True,
        text=True,
        check=False,
    )
