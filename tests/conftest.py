"""Shared fixtures: one `store_url` per backend; Postgres skips without a DSN unless CI requires it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest


def _postgres_url() -> str:
    url = os.environ.get("SAGACITY_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("SAGACITY_REQUIRE_POSTGRES") == "1":
            pytest.fail("SAGACITY_REQUIRE_POSTGRES=1 but SAGACITY_TEST_POSTGRES_URL is not set")
        pytest.skip("set SAGACITY_TEST_POSTGRES_URL to run PostgreSQL tests")
    return url


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[str]:
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/journal.db"
    else:
        import psycopg

        base = _postgres_url()
        schema = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        sep = "&" if "?" in base else "?"
        yield f"{base}{sep}options=-csearch_path%3D{schema}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
