"""Shared fixtures: one `store_url` per backend; PostgreSQL and MariaDB skip without a DSN unless CI
requires them."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest


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


def _fresh_database() -> Iterator[str]:
    """A brand-new empty database on the MariaDB/MySQL test server, dropped afterwards."""
    import pymysql

    from sagacity.stores.mysql import connect_arguments

    base = _mysql_url()
    name = "t_" + uuid.uuid4().hex[:12]
    arguments = connect_arguments(base)
    del arguments["database"]
    with pymysql.connect(**arguments, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    try:
        yield urlunsplit(urlsplit(base)._replace(path="/" + name))
    finally:
        with pymysql.connect(**arguments, autocommit=True) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE {name}")


_SERVERS = {"postgres": _fresh_schema, "mysql": _fresh_database}


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
