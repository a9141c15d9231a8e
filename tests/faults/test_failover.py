"""A PostgreSQL failover under load loses nothing a caller was told, and the writers carry on.

A primary and a synchronous standby run on ports of their own (``pg_pair``). Three worker
processes run sagas (compensatable calls, failures that compensate, gates), an approver decides
the gates and a recoverer runs ``recover()`` as cron would, all through one multi-host DSN with
``target_session_attrs=read-write``. The primary's postmaster is SIGKILLed mid-load and the
standby promoted; then, on the new primary, every entry the library acknowledged to any process
is there, every chain verifies without a gap, no gate was both rejected and resumed, every
effect is accounted for, open calls are listed in doubt, and every process went on working by
itself within the documented bound (docs/operations.md).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.failover]

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import ha_load  # noqa: E402
import pg_pair  # noqa: E402

sys.path.remove(str(HERE))

#: A failover manager's detection delay: the time the library sees no primary at all.
NO_PRIMARY_FOR = float(os.environ.get("SAGACITY_FAILOVER_GAP", "1.0"))


@pytest.fixture
def pair() -> Iterator[pg_pair.PgPair]:
    missing = pg_pair.binaries_missing()
    if missing:
        if os.environ.get("SAGACITY_REQUIRE_FAILOVER") == "1":
            pytest.fail(f"SAGACITY_REQUIRE_FAILOVER=1 but {missing}")
        pytest.skip(missing)
    servers = pg_pair.PgPair()
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


def test_failover_to_a_synchronous_standby_loses_no_acknowledged_append(
    pair: pg_pair.PgPair, workload: ModuleType, tmp_path: Path
) -> None:
    def fault(load: ha_load.Load) -> float:
        pair.kill_primary()
        time.sleep(NO_PRIMARY_FOR)
        pair.promote()
        return time.time()

    _, summary = ha_load.through(pair.url, tmp_path, fault)
    print(summary)
