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

import importlib
import os
from dataclasses import dataclass
from typing import Any

from sagacity.errors import ConfigurationError
from sagacity.stores._deadline import limited_wait
from sagacity.stores.base import Store, safe_url

__all__ = ["DEFAULT_URL", "Store", "default_url", "limited_wait", "open_store", "safe_url"]

DEFAULT_URL = "sqlite:///sagacity.db"


def default_url() -> str:
    """``$SAGACITY_URL`` if set, else ``sqlite:///sagacity.db`` in the working directory."""
    return os.environ.get("SAGACITY_URL") or DEFAULT_URL


@dataclass(frozen=True)
class _Backend:
    """Where a URL scheme's store lives; a driver outside the core names the extra installing it."""

    module: str
    store: str
    driver: str | None = None
    extra: str | None = None


_POSTGRES = _Backend("postgres", "PostgresStore", "PostgreSQL", "postgres")
_MYSQL = _Backend("mysql", "MySQLStore", "MariaDB/MySQL", "mysql")
#: Each URL scheme's store. A new store is its module (for SQL: a ``Dialect`` and a ``SQLStore``
#: subclass, docs/stores.md "Writing a store") and a line here.
_BACKENDS = {
    "memory": _Backend("memory", "MemoryStore"),
    "sqlite": _Backend("sqlite", "SQLiteStore"),
    "postgresql": _POSTGRES,
    "postgres": _POSTGRES,
    "mysql": _MYSQL,
    "mariadb": _MYSQL,
}


def open_store(url: str | None = None, **options: Any) -> Store:
    """Open (not yet initialise) the store a URL names; ``options`` go to its constructor."""
    url = url or default_url()
    scheme = url.split(":", 1)[0].lower()
    backend = _BACKENDS.get(scheme)
    if backend is None:
        raise ConfigurationError(
            f"unknown journal URL scheme {scheme!r}: use memory://, sqlite:///path.db, postgresql://... "
            "or mysql://..."
        )
    try:  # imported only when asked for, so the core install needs no driver
        module = importlib.import_module(f"sagacity.stores.{backend.module}")
    except ImportError as exc:
        if backend.driver is None:
            raise
        raise ConfigurationError(
            f"{safe_url(url).split('@')[-1]!r} needs the {backend.driver} driver: "
            f"pip install 'sagacity[{backend.extra}]'"
        ) from exc
    store: Store = getattr(module, backend.store)(url, **options)
    return store
