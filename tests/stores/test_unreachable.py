"""A database that is down fails a library read within the store's ``connect_timeout``.

Issue #33 item 23: ``Sagacity('postgresql://...:closed-port/x').sagas()`` retried six times, each
waiting the pool's 10 s, so about a minute whatever ``connect_timeout`` said (the URL's was
ignored). Now one read, retries included, waits at most the store's ``connect_timeout`` and says
so in its ``StoreUnavailableError``. Port 1 on loopback refuses every connection; how long the
failure takes is not asserted (the suite has no timing assertions), the limit it names is.
"""

from __future__ import annotations

from typing import Any

import pytest

from sagacity import Sagacity
from sagacity.errors import ConfigurationError, StoreUnavailableError

CASES = [
    pytest.param("postgresql://postgres@127.0.0.1:1/test?connect_timeout=2", {}, id="postgres-url"),
    pytest.param("postgresql://postgres@127.0.0.1:1/test", {"connect_timeout": 2}, id="postgres-keyword"),
    pytest.param("mysql://root@127.0.0.1:1/test", {"connect_timeout": 2}, id="mariadb-keyword"),
]


@pytest.mark.parametrize(("url", "options"), CASES)
def test_a_read_gives_up_within_connect_timeout(url: str, options: dict[str, Any]) -> None:
    pytest.importorskip("psycopg_pool" if url.startswith("postgresql") else "pymysql")
    with pytest.raises(StoreUnavailableError, match=r"gave up after \d+ attempts? in .* \(wait limit 2 s\)"):
        Sagacity(url, **options).sagas()


def test_the_url_connect_timeout_must_be_seconds() -> None:
    pytest.importorskip("psycopg_pool")
    with pytest.raises(ConfigurationError, match=r"connect_timeout in .* is not a number"):
        Sagacity("postgresql://postgres@127.0.0.1:1/test?connect_timeout=soon")
