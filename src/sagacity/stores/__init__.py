"""Journal stores, chosen by URL.

=========================  ============================================================
``memory://``              in-process, lock-protected; for tests and experiments
``sqlite:///path.db``      the embedded default: one durable file, no server
``postgresql://...``       PostgreSQL through psycopg 3 and a pool (``sagacity[postgres]``)
``mysql://...``            MariaDB 10.6+ or MySQL 8.0+ through PyMySQL (``sagacity[mysql]``);
``mariadb://...``          the same store
=========================  ============================================================

Backends are imported only when their scheme is asked for, so the core install needs no driver.
A surface that must answer in seconds (a dashboard, a health check) reads under
:func:`limited_wait`, so an unreachable store fails its read sooner than the store's own
``connect_timeout`` (the library's limit for a read, retries included).
"""

from __future__ import annotations

import os
from typing import Any

from sagacity.errors import ConfigurationError
from sagacity.stores._deadline import limited_wait
from sagacity.stores.base import Store, safe_url

__all__ = ["DEFAULT_URL", "Store", "default_url", "limited_wait", "open_store", "safe_url"]

DEFAULT_URL = "sqlite:///sagacity.db"


def default_url() -> str:
    """``$SAGACITY_URL`` if set, else ``sqlite:///sagacity.db`` in the working directory."""
    return os.environ.get("SAGACITY_URL") or DEFAULT_URL


def open_store(url: str | None = None, **options: Any) -> Store:
    """Open (not yet initialise) the store a URL names; ``options`` go to its constructor."""
    url = url or default_url()
    scheme = url.split(":", 1)[0].lower()
    if scheme == "memory":
        from sagacity.stores.memory import MemoryStore

        return MemoryStore(url, **options)
    if scheme == "sqlite":
        from sagacity.stores.sqlite import SQLiteStore

        return SQLiteStore(url, **options)
    if scheme in {"postgresql", "postgres"}:
        try:
            from sagacity.stores.postgres import PostgresStore
        except ImportError as exc:
            raise ConfigurationError(
                f"{url.split('@')[-1]!r} needs the PostgreSQL driver: pip install 'sagacity[postgres]'"
            ) from exc
        return PostgresStore(url, **options)
    if scheme in {"mysql", "mariadb"}:
        try:
            from sagacity.stores.mysql import MySQLStore
        except ImportError as exc:
            raise ConfigurationError(
                f"{safe_url(url).split('@')[-1]!r} needs the MariaDB/MySQL driver: "
                "pip install 'sagacity[mysql]'"
            ) from exc
        return MySQLStore(url, **options)
    raise ConfigurationError(
        f"unknown journal URL scheme {scheme!r}: use memory://, sqlite:///path.db, postgresql://... "
        "or mysql://..."
    )
