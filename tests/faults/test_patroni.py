"""PostgreSQL under Patroni: a crashed leader and a planned switchover lose nothing a caller was
told, and the writers carry on by themselves.

Two PostgreSQL 15 nodes under Patroni with etcd (patroni_cluster.py), ``synchronous_mode: true``.
The load of ha_load.py (three workers, an approver, a ``recover()`` loop) runs on the multi-host
DSN ``host=a,b target_session_attrs=read-write``; Patroni, not the test, decides the promotion.
Afterwards every acknowledged entry is on the new leader with its hash, every chain verifies, no
effect ran twice, and open calls are listed in doubt (invariants.py). Also the comparison for
test_patroni_strict.py: the synchronous standby gone, and writes go on on the leader alone.

Runs with ``SAGACITY_TEST_PATRONI=1`` (``.ci/run`` sets it and installs Debian's ``patroni`` and
``etcd-server``); about a minute and a half.
"""

from __future__ import annotations

import itertools
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
import invariants  # noqa: E402
import patroni_cluster  # noqa: E402

sys.path.remove(str(HERE))

#: Seconds with no primary and Patroni paused, in the outage test: past every append's retries.
OUTAGE = 8.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[patroni_cluster.PatroniCluster]:
    yield from patroni_cluster.for_tests()


@pytest.fixture
def url(cluster: patroni_cluster.PatroniCluster, request: pytest.FixtureRequest) -> str:
    return patroni_cluster.database_for(cluster, request.node.name)


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
    def fault(load: ha_load.Load) -> float:
        killed = time.time()
        promoted = _new_leader(cluster, load, cluster.kill_leader_postmaster())
        print(f"Patroni's leader answered {promoted - killed:.1f} s after the kill")
        return promoted

    print(ha_load.through(url, tmp_path, fault)[1])


def test_outage_longer_than_the_retries_fails_callers_but_guesses_nothing(
    cluster: patroni_cluster.PatroniCluster, url: str, workload: ModuleType, tmp_path: Path
) -> None:
    """Patroni paused while the leader's postmaster is killed: no primary for OUTAGE seconds,
    past the library's retries. Callers see StoreUnavailableError; what they were told is still
    all there, and calls whose outcome was never heard are in doubt. The store timeout is 2 s
    here (the URL's ``connect_timeout``), so the retries end inside the outage."""

    def fault(load: ha_load.Load) -> float:
        leader = cluster.leader()  # asked first: a paused Patroni's REST API does not answer
        cluster.pause_patroni(True)
        try:
            cluster.kill_leader_postmaster(leader)
            time.sleep(OUTAGE)
        finally:
            cluster.pause_patroni(False)
        return _new_leader(cluster, load, None)

    load, summary = ha_load.through(url + "&connect_timeout=2", tmp_path, fault)
    print(summary)
    assert load.failed(), f"an outage of {OUTAGE:g} s was not felt: the test proves nothing"


def test_leader_patroni_stopped_the_replica_takes_over_and_nothing_acknowledged_is_lost(
    cluster: patroni_cluster.PatroniCluster, url: str, workload: ModuleType, tmp_path: Path
) -> None:
    def fault(load: ha_load.Load) -> float:
        stopped = time.time()
        old = cluster.stop_leader_patroni()
        promoted = _new_leader(cluster, load, old)
        print(f"Patroni's leader answered {promoted - stopped:.1f} s after the SIGTERM")
        cluster.start_node(old)  # it rejoins as a replica while the load goes on
        return promoted

    print(ha_load.through(url, tmp_path, fault)[1])


def test_planned_switchover_shows_callers_no_error(
    cluster: patroni_cluster.PatroniCluster, url: str, workload: ModuleType, tmp_path: Path
) -> None:
    def fault(load: ha_load.Load) -> float:
        asked = time.time()
        cluster.switchover()
        print(f"patronictl switchover took {time.time() - asked:.1f} s")
        return asked

    load, summary = ha_load.through(url, tmp_path, fault)
    print(summary)
    # The library's own bounded retry (docs/operations.md) covers a planned switchover whole.
    assert load.failed() == []


@pytest.mark.parametrize("gone", ["stopped", "killed"])
def test_standby_gone_without_strict_mode_writes_go_on_on_the_leader_alone(
    cluster: patroni_cluster.PatroniCluster, url: str, workload: ModuleType, tmp_path: Path, gone: str
) -> None:
    """The comparison for test_patroni_strict.py: without ``synchronous_mode_strict``, Patroni
    clears ``synchronous_standby_names`` once the synchronous standby is gone, and the leader
    acknowledges commits that only it has. The workers carry on while the standby is away (every
    worker runs 6 sagas then); the entries acknowledged meanwhile are on the leader alone until
    the standby has caught up (Patroni promotes no node that was not synchronous, so what is at
    risk is the leader's own storage). ``stopped``: SIGTERM to the standby's Patroni; ``killed``:
    SIGKILL to its Patroni and postmaster."""
    at: dict[str, float] = {}
    names: list[object] = []

    def fault(load: ha_load.Load) -> float:
        asked = time.time()
        leader, standby = cluster.take_sync_standby_away(gone)
        at["gone"] = time.time()
        load.carries_on(at["gone"], "with the synchronous standby gone")
        with psycopg.connect(cluster.node_url(leader), autocommit=True) as conn:
            names.extend(conn.execute("SHOW synchronous_standby_names").fetchone() or ())
        print(f"standby {gone} in {at['gone'] - asked:.1f} s")
        at["back"] = time.time()
        cluster.start_node(standby)
        return asked

    load, summary = ha_load.through(url, tmp_path, fault)
    acks = invariants.read_acks(load.acks.values())
    alone = sum(1 for r in acks if "entry" in r and at["gone"] <= float(r["t"]) < at["back"])
    longest = 0.0
    for name in load.workers:
        times = sorted(float(r["t"]) for r in invariants.read_acks([load.acks[name]]) if "entry" in r)
        longest = max([longest, *(b - a for a, b in itertools.pairwise(times))])
    print(summary)
    print(
        f"synchronous_standby_names with the standby gone: {names}; the longest a worker "
        f"waited for an append: {longest:.2f} s; entries acknowledged with the standby gone, "
        f"on the leader alone: {alone}"
    )
    assert names == [""], "Patroni kept synchronous replication with no standby"
    assert load.failed() == []
