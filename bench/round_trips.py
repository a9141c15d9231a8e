"""What a short saga asks of each store, counted (issue #35): statements by kind, from the drivers,
and commits from the server's own statistics where it keeps them.

Usage: ``.venv/bin/python bench/round_trips.py [--pg URL] [--mysql URL] [--sagas N]``

Each scenario runs ``--sagas`` sagas of START, 2 calls of a no-op tool, END, one at a time, after
a warm-up saga: without a policy, under 5 CEL rules, and under 5 rules and a budget
(``overhead.FIVE_RULES`` / ``overhead.WITH_BUDGET``). Counted per saga:

- statements the drivers sent, by kind: journal inserts (each one autocommit statement, one
  commit), journal reads, liveness-lease calls (PostgreSQL's shared advisory locks, MariaDB's
  ``GET_LOCK`` / ``RELEASE_LOCK``; SQLite's is a ``lockf`` on a side file, no statement), others;
- on PostgreSQL, ``xact_commit`` of the database in ``pg_stat_database`` (every transaction the
  server committed, reads included), per saga of the whole run (opening and closing the store,
  the warm-up saga), read after its sessions ended (give it a database of its own: ``--pg``);
- on MariaDB none: its commit counters are server-wide, and other clients' commits land in them.

The kill switch is polled once an hour here, so its reads do not land in the window. Counting, not
timing: the figures are the same on a quiet machine and a loaded one.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from overhead import FIVE_RULES, WITH_BUDGET, noop

from sagacity import Sagacity

KINDS = ("insert", "read", "lease", "other")
_seen: Counter[str] = Counter()


def _kind(sql: object) -> str:
    text = " ".join(str(sql).split()).upper()
    if text.startswith("INSERT INTO SIDE_EFFECT_JOURNAL"):
        return "insert"
    if "FROM SIDE_EFFECT_JOURNAL" in text and text.startswith("SELECT"):
        return "read"
    if "ADVISORY_LOCK" in text or "ADVISORY_UNLOCK" in text or "GET_LOCK" in text or "RELEASE_LOCK" in text:
        return "lease"
    return "other"


def trace_drivers() -> None:
    """Count every statement sqlite3, psycopg and PyMySQL send from here on (by wrapping their
    entry points: the statements still go to the real databases)."""
    connect = sqlite3.connect

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(
            lambda sql: _seen.update([_kind(sql)]) if not sql.startswith("PRAGMA") else None
        )
        return conn

    sqlite3.connect = traced_connect  # type: ignore[assignment]
    try:
        import psycopg

        execute = psycopg.Cursor.execute

        def pg_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            _seen.update([_kind(query)])
            return execute(self, query, *args, **kwargs)

        psycopg.Cursor.execute = pg_execute  # type: ignore[method-assign]
    except ImportError:
        pass
    try:
        import pymysql.cursors

        my_execute = pymysql.cursors.Cursor.execute

        def my_traced(self: Any, query: Any, args: Any = None) -> Any:
            _seen.update([_kind(query)])
            return my_execute(self, query, args)

        pymysql.cursors.Cursor.execute = my_traced  # type: ignore[method-assign]
    except ImportError:
        pass


@contextmanager
def policies() -> Iterator[dict[str, Path | None]]:
    with tempfile.TemporaryDirectory() as folder:
        rules, budget = Path(folder) / "rules.toml", Path(folder) / "budget.toml"
        rules.write_text(FIVE_RULES, encoding="utf-8")
        budget.write_text(WITH_BUDGET, encoding="utf-8")
        yield {"no policy": None, "5 CEL rules": rules, "rules+budget": budget}


def short_sagas(sg: Sagacity, tag: str, sagas: int) -> None:
    for n in range(sagas):
        with sg.saga(f"{tag}-{n}"):
            noop()
            noop()


def server_commits(url: str) -> Callable[[], int] | None:
    """A reading of the server's own commit counter for ``url``'s database, or None."""
    if url.startswith("postgresql"):
        import psycopg

        def pg() -> int:
            time.sleep(1.5)  # backends flush their statistics when idle, at most every second
            with psycopg.connect(url, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
                ).fetchone()
            assert row is not None
            return int(row[0]) + 1  # this reading's own transaction

        return pg
    return None


def count(url: str, name: str, sagas: int) -> list[str]:
    lines = []
    with policies() as paths:
        for scenario, path in paths.items():
            commits = server_commits(url)
            # PostgreSQL's statistics are exact once the sessions that committed have ended, so the
            # server's count spans the whole Sagacity (its start and close included) and its sagas.
            before = commits() if commits else 0
            with Sagacity(url, policy=path, switch_poll=3600) as sg:
                tag = f"rt-{scenario[:4]}-{time.monotonic_ns()}"
                short_sagas(sg, f"{tag}-warm", 1)
                _seen.clear()
                short_sagas(sg, tag, sagas)
                seen = dict(_seen)
            after = commits() if commits else 0
            per = {kind: seen.get(kind, 0) / sagas for kind in KINDS}
            server = f"{(after - before) / (sagas + 1):5.2f}" if commits else "   —"
            lines.append(
                f"| {name:8} | {scenario:12} | "
                + " | ".join(f"{per[k]:5.2f}" for k in KINDS)
                + f" | {sum(per.values()):5.2f} | {server} |"
            )
            print(lines[-1], flush=True)
    return lines


HEADER = (
    "| store    | scenario     | insert | read  | lease | other | all   | server commits |\n"
    "|----------|--------------|-------:|------:|------:|------:|------:|------:|"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pg", default=os.environ.get("SAGACITY_TEST_POSTGRES_URL"), help="PostgreSQL URL")
    parser.add_argument("--mysql", default=os.environ.get("SAGACITY_TEST_MYSQL_URL"), help="MariaDB URL")
    parser.add_argument("--sagas", type=int, default=20, help="sagas counted per scenario")
    args = parser.parse_args(argv)
    trace_drivers()
    print("Per short saga (START, 2 calls, END): statements sent, by kind, and the server's commits")
    print(HEADER)
    with tempfile.TemporaryDirectory(prefix="sagacity-round-trips-", dir=Path(__file__).parent) as tmp:
        count(f"sqlite:///{tmp}/journal.db", "sqlite", args.sagas)
    from append import mysql_target, postgres_target

    if args.pg:
        with postgres_target(args.pg) as target:
            count(target.subject_url, "postgres", args.sagas)
    if args.mysql:
        with mysql_target(args.mysql) as target:
            count(target.subject_url, "mysql", args.sagas)
    return 0


if __name__ == "__main__":
    sys.exit(main())
