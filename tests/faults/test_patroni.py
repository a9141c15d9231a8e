"""PostgreSQL under Patroni: a crashed leader and a planned switchover lose nothing a caller was
told, and the writers carry on by themselves.

Two PostgreSQL 15 nodes under Patroni with etcd (patroni_cluster.py), ``synchronous_mode: true``.
The load of ha_load.py (three workers, an approver, a ``recover()`` loop) runs on the multi-host
DSN ``host=a,b target_session_attrs=read-write``; Patroni, not the test, decides the promotion.
Afterwards every acknowledged entry is on the new leader with its hash, every chain verifies, no
effect ran twice, and open calls are listed in doubt (invariants.py).

Opt-in (``SAGACITY_TEST_PATRONI=1``): it needs Debian's ``patroni`` and ``etcd-server`` and takes
a couple of minutes, so CI does not run it yet.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import psycopg
import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.failover]

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import ha_load  # noqa: E402
import patroni_cluster  # noqa: E402

sys.path.remove(str(HERE))

#: Seconds with no primary and Patroni paused, in the outage test: past every append's retries.
OUTAGE = 8.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[patroni_cluster.PatroniCluster]:
    if os.environ.get("SAGACITY_TEST_PATRONI") != "1":
        pytest.skip(
            "set SAGACITY_TEST_PATRONI=1 to run the Patroni failover tests "
            "(apt-get install patroni etcd-server postgresql-15)"
        )
    missing = patroni_cluster.binaries_missing()
    if missing:
        pytest.fail(f"SAGACITY_TEST_PATRONI=1 but {missing}")
    servers = patroni_cluster.PatroniCluster()
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def url(cluster: patroni_cluster.PatroniCluster, request: pytest.FixtureRequest) -> str:
    """A database of this test's own on a healthy cluster: the journal holds only its sagas."""
    cluster.wait_healthy()
    name = request.node.name.removeprefix("test_")[:40]
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return cluster.url(name)


def _new_leader(cluster: patroni_cluster.PatroniCluster, load: ha_load.Load, old: object) -> float:
    """Wait until Patroni has promoted a node other than ``old``; when it answered (epoch s)."""

    def promoted() -> bool:
        leader = cluster.leader()
        return leader is not None and leader != old

    load.wait(promoted, 60, "Patroni promoted the standby")
    return time.time()


def test_leader_postmaster_killed_patroni_promotes_and_nothing_acknowledged_is_lost(
    cluster: patroni_cluster.PatroniCluster, url: str, workload: ModuleType, tmp_path: Path
) -> None:
    load = ha_load.Load(url, tmp_path)
    try:
        load.wait(lambda: load.each_worker_ran(0, 6), 60, "every worker ran 6 sagas before the crash")
        old = cluster.kill_leader_postmaster()
        killed = time.time()
        promoted = _new_leader(cluster, load, old)
        load.carries_on(promoted, "on the promoted leader")
    finally:
        load.stop()
    summary = load.check(url, promoted)
    print(summary)
    print(f"Patroni's leader answered {promoted - killed:.1f} s after the kill")


def test_outage_longer_than_the_retries_fails_callers_but_guesses_nothing(
    cluster: patroni_cluster.PatroniCluster, url: str, workload: ModuleType, tmp_path: Path
) -> None:
    """Patroni paused while the leader's postmaster is killed: no primary for OUTAGE seconds,
    past the library's ~3 s of append retries. Callers see StoreUnavailableError; what they were
    told is still all there, and calls whose outcome was never heard are in doubt. The store
    timeout is 2 s here (the URL's ``connect_timeout``), so the retries end inside the outage."""
    url += "&connect_timeout=2"
    load = ha_load.Load(url, tmp_path)
    try:
        load.wait(lambda: load.each_worker_ran(0, 6), 60, "every worker ran 6 sagas before the crash")
        leader = cluster.leader()
        cluster.pause_patroni(True)
        try:
            cluster.kill_leader_postmaster(leader)
            time.sleep(OUTAGE)
        finally:
            cluster.pause_patroni(False)
        promoted = _new_leader(cluster, load, None)
        load.carries_on(promoted, "after the outage")
    finally:
        load.stop()
    summary = load.check(url, promoted)
    print(summary)
    assert load.failed(), f"an outage of {OUTAGE:g} s was not felt: the test proves nothing"


def test_leader_patroni_stopped_the_replica_takes_over_and_nothing_acknowledged_is_lost(
    cluster: patroni_cluster.PatroniCluster, url: str, workload: ModuleType, tmp_path: Path
) -> None:
    load = ha_load.Load(url, tmp_path)
    old = None
    try:
        load.wait(lambda: load.each_worker_ran(0, 6), 60, "every worker ran 6 sagas before the stop")
        stopped = time.time()
        old = cluster.stop_leader_patroni()
        promoted = _new_leader(cluster, load, old)
        load.carries_on(promoted, "on the promoted leader")
    finally:
        load.stop()
        if old is not None:
            cluster.start_node(old)  # the next test wants two nodes again
    summary = load.check(url, promoted)
    print(summary)
    print(f"Patroni's leader answered {promoted - stopped:.1f} s after the SIGTERM")


def test_planned_switchover_shows_callers_no_error(
    cluster: patroni_cluster.PatroniCluster, url: str, workload: ModuleType, tmp_path: Path
) -> None:
    load = ha_load.Load(url, tmp_path)
    try:
        load.wait(lambda: load.each_worker_ran(0, 6), 60, "every worker ran 6 sagas before the switchover")
        asked = time.time()
        cluster.switchover()
        switched = time.time()
        load.carries_on(switched, "on the new leader")
    finally:
        load.stop()
    summary = load.check(url, asked)
    print(summary)
    print(f"patronictl switchover took {switched - asked:.1f} s")
    # The library's own bounded retry (docs/operations.md) covers a planned switchover whole.
    assert load.failed() == []
