"""The physical floor an append is measured against: the same row, inserted with the raw driver.

An append cannot be cheaper than one durable INSERT of its row, so that INSERT (into a table with
the journal's exact columns and keys, with the same durability settings) is the yardstick. Each
floor writer owns one connection, as each thread of a concurrent benchmark would.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import Any

from sagacity.stores._sql import load_ddl, split_statements

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


class SQLiteFloor:
    """One INSERT per WAL transaction with ``synchronous=FULL`` through raw ``sqlite3``."""

    def __init__(self, path: str) -> None:
        self.path = path
        with self.connect() as conn:
            for statement in split_statements(load_ddl("sqlite")):
                if "TRIGGER" not in statement:
                    conn.execute(statement)
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
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(load_ddl("postgres").encode())

    def writer(self) -> FloorWriter:
        import psycopg

        conn = psycopg.connect(self.url, autocommit=True)
        sql = INSERT.replace("?", "%s")
        return FloorWriter(lambda params: conn.execute(sql, params), lambda ts: ts, conn.close)


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
