"""Shared fixtures: one `store_url` per backend; Postgres skips without a DSN unless CI requires it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/journal.db"
    else:
        yield from _fresh_schema()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A URL whose connections all use a fresh, empty schema (nothing created in it yet)."""
    yield from _fresh_schema()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A URL naming a SQLite file that does not exist yet."""
    return f"sqlite:///{tmp_path}/journal.db"


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store that several processes can share: a SQLite file or a fresh Postgres schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/journal.db"
    else:
        yield from _fresh_schema()
