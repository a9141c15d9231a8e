"""The physical floor an append is measured against: the same row, inserted with the raw driver.

An append cannot be cheaper than one durable INSERT of its row, so that INSERT (into a table with
the journal's columns and key, with the same durability settings) is the yardstick. On PostgreSQL
the table is the journal's exact DDL, which SPEC §2 fixes; on SQLite only the columns and the
primary key, since anything more is Sagacity's choice and its cost belongs to the subject. Each
floor writer owns one connection, as each thread of a concurrent benchmark would.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import Any

from sagacity.stores._sql import load_ddl

#: The benchmark's row, sized like a typical journaled call (EXECUTED with a short result).
TOOL = "reserve_inventory"
PHASE = "EXECUTED"
INPUT = '{"sku":"SKU-9","quantity":2}'
PAYLOAD = "reserved 2 x SKU-9"
FAKE_HASH = "f" * 64

INSERT = (
    "INSERT INTO side_effect_journal (saga_id, seq, tool_name, phase, input, payload, timestamp, hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


#: The raw SQLite floor's table: the journal's columns and primary key and nothing else. SQLite's
#: schema beyond table and column names is ours to choose (SPEC §2), so the floor is the cheapest
#: table that holds the row under its key, not our own DDL: whatever our schema adds, a user pays.
SQLITE_FLOOR_TABLE = (
    "CREATE TABLE IF NOT EXISTS side_effect_journal (saga_id TEXT NOT NULL, seq INTEGER NOT NULL, "
    "tool_name TEXT NOT NULL, phase TEXT NOT NULL, input TEXT NOT NULL DEFAULT '', "
    "payload TEXT NOT NULL DEFAULT '', timestamp TEXT NOT NULL, hash TEXT NOT NULL, "
    "PRIMARY KEY (saga_id, seq))"
)


class SQLiteFloor:
    """One INSERT per WAL transaction with ``synchronous=FULL`` through raw ``sqlite3``, into a
    table with the journal's columns and primary key only (no secondary index, no triggers)."""

    def __init__(self, path: str) -> None:
        self.path = path
        conn = self.connect()
        conn.execute(SQLITE_FLOOR_TABLE)
        conn.close()

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=60)
        conn.execute("PRAGMA busy_timeout = 60000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    def writer(self) -> FloorWriter:
        conn = self.connect()
        return FloorWriter(
            lambda params: conn.execute(INSERT, params),
            lambda ts: ts.strftime("%Y-%m-%d %H:%M:%S.%f"),
            conn.close,
        )


class PostgresFloor:
    """One autocommit INSERT through raw psycopg, into an identical table."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.url = url
        # The shared schema of SPEC §2 only (its DDL comes first in the file): the saga index's
        # trigger and our other extensions are part of what the library costs, not of the floor.
        shared = load_ddl("postgres").split("\n-- Extension")[0]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(shared.encode())

    def writer(self) -> FloorWriter:
        import psycopg

        conn = psycopg.connect(self.url, autocommit=True)
        sql = INSERT.replace("?", "%s")
        return FloorWriter(lambda params: conn.execute(sql, params), lambda ts: ts, conn.close)


class MySQLFloor:
    """One autocommit INSERT through raw PyMySQL, into the journal's own table (SPEC §2 in
    MariaDB types, as ``stores/sql/mysql.sql`` makes it) without the saga index's triggers."""

    def __init__(self, url: str) -> None:
        import pymysql

        from sagacity.stores.mysql import connect_arguments

        self.arguments = connect_arguments(url)
        journal = load_ddl("mysql").split("CREATE TABLE IF NOT EXISTS sagacity_approval_request")[0]
        journal = journal.replace("sagacity_collation", "utf8mb4_nopad_bin")
        with pymysql.connect(**self.arguments, autocommit=True) as conn, conn.cursor() as cur:
            cur.execute(journal)

    def writer(self) -> FloorWriter:
        import pymysql

        conn = pymysql.connect(**self.arguments, charset="utf8mb4", autocommit=True)
        cur = conn.cursor()
        sql = INSERT.replace("?", "%s")
        return FloorWriter(lambda params: cur.execute(sql, params), lambda ts: ts, conn.close)


class FloorWriter:
    """Inserts the benchmark row for successive seqs of one saga, on its own connection."""

    def __init__(self, execute: Any, ts_out: Any, close: Any) -> None:
        self._execute = execute
        self._ts_out = ts_out
        self.close = close
        self._seqs: dict[str, int] = {}

    def append(self, saga_id: str) -> None:
        seq = self._seqs.get(saga_id, 0) + 1
        self._seqs[saga_id] = seq
        self._execute((saga_id, seq, TOOL, PHASE, INPUT, PAYLOAD, self._ts_out(_now()), FAKE_HASH))
