"""Shared fixtures: one `store_url` per backend; PostgreSQL and MariaDB skip without a DSN unless CI
requires them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from sagacity import Sagacity

# pytest-xdist's workers start with COLUMNS=80 and LINES=24 in their environment (execnet sets
# them); the CLI's tables are then drawn 80 wide instead of the 120 of any other non-terminal run.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)

# A suite started in the background of a non-interactive shell (``nohup ... &``, some CI runners)
# inherits SIGINT ignored, and so would every process the tests start: the tests that stop a real
# server or watcher with Ctrl-C (SIGINT) would wait forever. Handling it here gives the children the
# default disposition again (an exec resets handled signals, never ignored ones).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Skips, one line per reason with how many: without PostgreSQL and MariaDB, pytest's ``-rs``
    printed ~620 lines (one per test location) that buried the failures. pyproject's ``-r``
    leaves ``s`` out, so this is the one place skips are summed up, and each line says why."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    if reasons:
        terminalreporter.write_sep("=", "skipped, by reason")
        for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"SKIPPED {count}: {reason}")


def _postgres_url() -> str:
    url = os.environ.get("SAGACITY_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("SAGACITY_REQUIRE_POSTGRES") == "1":
            pytest.fail("SAGACITY_REQUIRE_POSTGRES=1 but SAGACITY_TEST_POSTGRES_URL is not set")
        pytest.skip("set SAGACITY_TEST_POSTGRES_URL to run PostgreSQL tests")
    return url


def _schema_url(base: str, schema: str) -> str:
    """``base`` with ``search_path`` pinned to ``schema`` for every connection made from it."""
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


def _fresh_schema() -> Iterator[str]:
    """A brand-new empty schema on the test server, dropped afterwards: a per-test database."""
    import psycopg

    base = _postgres_url()
    schema = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield _schema_url(base, schema)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _mysql_url() -> str:
    url = os.environ.get("SAGACITY_TEST_MYSQL_URL")
    if not url:
        if os.environ.get("SAGACITY_REQUIRE_MYSQL") == "1":
            pytest.fail("SAGACITY_REQUIRE_MYSQL=1 but SAGACITY_TEST_MYSQL_URL is not set")
        pytest.skip(
            "set SAGACITY_TEST_MYSQL_URL (e.g. mysql://root@127.0.0.1:3306/test) to run MariaDB tests"
        )
    return url


def _admin() -> Any:
    """A root session on the MariaDB/MySQL test server, in no database."""
    import pymysql

    from sagacity.stores.mysql import connect_arguments

    arguments = connect_arguments(_mysql_url())
    del arguments["database"]
    return pymysql.connect(**arguments, autocommit=True)


def _database_url(name: str) -> str:
    return urlunsplit(urlsplit(_mysql_url())._replace(path="/" + name))


def _create_database() -> str:
    name = "t_" + uuid.uuid4().hex[:12]
    with _admin() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    return name


def _fresh_database() -> Iterator[str]:
    """A brand-new empty database on the MariaDB/MySQL test server, dropped afterwards."""
    name = _create_database()
    try:
        yield _database_url(name)
    finally:
        with _admin() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE {name}")


#: Databases a finished test left holding Sagacity's schema and nothing else, emptied of rows:
#: the next tests' ``store_url``. Emptying one costs a few DELETEs; a new database and its schema
#: (a dozen CREATEs, each an fsynced file on InnoDB) ~0.7 s, times some 250 tests.
_EMPTIED: list[str] = []
_SCHEMA = {
    "side_effect_journal",
    "sagacity_approval_request",
    "sagacity_approval_expiry",
    "sagacity_approval_trace",
    "sagacity_saga_index",
    "sagacity_saga_counts",
    "sagacity_index_mark",
    "sagacity_index_dirty",
    "sagacity_log",
}


def _emptied_database() -> Iterator[str]:
    """A MariaDB/MySQL database with no rows: new, or one an earlier test used, emptied. Its
    schema may already be made, as by a process that ran ``sagacity db init`` before."""
    name = _EMPTIED.pop() if _EMPTIED else _create_database()
    try:
        yield _database_url(name)
    finally:
        with _admin() as conn, conn.cursor() as cur:
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (name,))
            tables = {str(row[0]) for row in cur.fetchall()}
            cur.execute("SELECT count(*) FROM information_schema.triggers WHERE trigger_schema = %s", (name,))
            triggers = cur.fetchone()[0]
            if tables == _SCHEMA and triggers == 3:
                for table in [*sorted(_SCHEMA - {"sagacity_index_dirty"}), "sagacity_index_dirty"]:
                    cur.execute(f"DELETE FROM {name}.{table}")  # the notes last: deleting rows adds some
                cur.execute(f"INSERT INTO {name}.sagacity_index_mark (name, value) VALUES ('catch-up', 0)")
                _EMPTIED.append(name)
            elif not tables and not triggers:
                _EMPTIED.append(name)
            else:
                cur.execute(f"DROP DATABASE {name}")


@pytest.fixture(scope="session", autouse=True)
def _drop_emptied_databases() -> Iterator[None]:
    yield
    if _EMPTIED:
        with _admin() as conn, conn.cursor() as cur:
            for name in _EMPTIED:
                cur.execute(f"DROP DATABASE {name}")


_SERVERS = {"postgres": _fresh_schema, "mysql": _emptied_database}


@pytest.fixture(params=["memory", "sqlite", "postgres", "mysql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/journal.db"
    else:
        yield from _SERVERS[request.param]()


@pytest.fixture
def mysql_url() -> Iterator[str]:
    """A URL naming a fresh, empty MariaDB/MySQL database (nothing created in it yet)."""
    yield from _fresh_database()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A URL whose connections all use a fresh, empty schema (nothing created in it yet)."""
    yield from _fresh_schema()


@pytest.fixture
def doc_namespace() -> Iterator[Callable[[str], dict[str, Any]]]:
    """``doc_namespace(name)``: a fresh globals dict to ``exec`` a page's example in. Every
    ``Sagacity`` the example left open in it is closed afterwards, as its reader's script would be
    at exit (an open one stays watched by the gauges and holds its store)."""
    made: list[dict[str, Any]] = []

    def namespace(name: str) -> dict[str, Any]:
        made.append({"__name__": name})
        return made[-1]

    yield namespace
    for globals_ in made:
        for value in list(globals_.values()):
            if isinstance(value, Sagacity):
                value.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A URL naming a SQLite file that does not exist yet."""
    return f"sqlite:///{tmp_path}/journal.db"


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store that several processes can share: a SQLite file, a fresh PostgreSQL schema or a
    fresh MariaDB database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/journal.db"
    else:
        yield from _SERVERS[request.param]()


@pytest.fixture
def lease_gone() -> Callable[[Sagacity, str], None]:
    """Waits (bounded) until no living process holds the saga's liveness lease: a killed
    process's database session is ended by the server a moment after the process is gone
    (PostgreSQL's and MariaDB's backends notice the closed socket and release its locks)."""

    def wait(sg: Sagacity, saga_id: str) -> None:
        deadline = time.monotonic() + 30
        while sg.engine.is_live(saga_id):
            assert time.monotonic() < deadline, f"the lease of {saga_id!r} outlived its process by 30 s"
            time.sleep(0.02)

    return wait


_LIVE_WORKER = Path(__file__).parent / "concurrency" / "live_worker.py"


@pytest.fixture
def live_worker() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """``start(url, saga_id, in_flight=False)``: ``tests/concurrency/live_worker.py`` on that store
    and saga in its own process, returned once it has made its first call and waits between
    calls (it printed "between"), or with ``in_flight`` once it is in a call that never returns.
    Every worker still alive at the end of the test is killed."""
    started: list[subprocess.Popen[str]] = []

    def start(url: str, saga_id: str, *, in_flight: bool = False) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [sys.executable, str(_LIVE_WORKER), url, saga_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(child)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "between"
        if in_flight:
            assert child.stdin is not None
            child.stdin.write("go on\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "in flight"
        return child

    yield start
    for child in started:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)


@pytest.fixture
def behind_the_library() -> Callable[[str, str], int]:
    """Runs one SQL statement on a store's database as another program with write access would
    (no Sagacity; on SQLite it first drops the triggers that refuse UPDATE and DELETE); the
    number of rows it changed."""

    def run(url: str, statement: str) -> int:
        if url.startswith("sqlite:"):
            import sqlite3

            from sagacity.stores.sqlite import path_from_url

            conn = sqlite3.connect(path_from_url(url), isolation_level=None)
            try:
                conn.execute("DROP TRIGGER IF EXISTS side_effect_journal_no_update")
                conn.execute("DROP TRIGGER IF EXISTS side_effect_journal_no_delete")
                return conn.execute(statement).rowcount
            finally:
                conn.close()
        if url.startswith("mysql:"):
            import pymysql

            from sagacity.stores.mysql import connect_arguments

            with pymysql.connect(**connect_arguments(url), autocommit=True) as my, my.cursor() as cur:
                return int(cur.execute(statement))
        import psycopg

        with psycopg.connect(url, autocommit=True) as pg:
            return pg.execute(statement).rowcount

    return run
