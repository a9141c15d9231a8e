"""Patroni's ``synchronous_mode_strict``: with the synchronous standby gone, the leader
acknowledges no commit, so the library acknowledges no append; when the standby returns, the
waiting appends land and the writers carry on by themselves.

Two PostgreSQL 15 nodes under Patroni with etcd (patroni_cluster.py, ``strict=True``), the load of
ha_load.py (three workers, an approver, a ``recover()`` loop) on the multi-host DSN. The standby's
Patroni is stopped (SIGTERM, as ``systemctl stop patroni``; it stops its PostgreSQL). What is
shown, from the leader itself rather than from timings:

- appends wait: the leader has backends waiting on ``SyncRep``, Patroni keeps
  ``synchronous_standby_names`` set (``*``), and no caller gets an error meanwhile (an append has
  no time limit of its own: PostgreSQL disables ``statement_timeout`` before the commit, and the
  connection is healthy, so nothing fails);
- nothing new becomes visible on the leader while the standby is gone, and every entry any
  process was told about is among the rows that were there before it went: nothing
  acknowledged exists on the leader alone;
- a tool whose INTENT is waiting has not run (the invariants: every effect is in the journal);
- operator reads wait as well: they bring the saga index up to date first, a write (which is
  why ``sg.in_doubt()`` is not asked here while the standby is gone: it would wait too);
- when the standby is back the waiting appends are released, every process goes on without a
  restart, and the journal keeps every promise (invariants.py).

And what docs/operations.md warns about: cancelling or terminating a backend that waits for the
standby makes PostgreSQL keep the commit locally, so the library acknowledges entries only the
leader has (strict mode undone by hand).

The non-strict comparison (Patroni drops synchronous replication and writes go on, on the leader
alone) is in test_patroni.py, on that file's non-strict cluster.

Runs with ``SAGACITY_TEST_PATRONI=1``, as test_patroni.py; under a minute.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest

from sagacity import Sagacity, SagaStatus, tool

pytestmark = [pytest.mark.postgres, pytest.mark.failover]

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import ha_load  # noqa: E402
import invariants  # noqa: E402
import patroni_cluster  # noqa: E402

sys.path.remove(str(HERE))

#: Seconds the standby stays away once appends are seen waiting: the interval over which nothing
#: may be acknowledged (a bounded hold, not a timing assertion).
HOLD = 5.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[patroni_cluster.PatroniCluster]:
    yield from patroni_cluster.for_tests(strict=True)


@pytest.fixture
def url(cluster: patroni_cluster.PatroniCluster, request: pytest.FixtureRequest) -> str:
    return patroni_cluster.database_for(cluster, request.node.name)


def _on(node: patroni_cluster.Node, database: str, query: str) -> list[tuple[Any, ...]]:
    """``query``'s rows on ``node`` alone (not the multi-host URL), in ``database``."""
    with psycopg.connect(
        f"postgresql://postgres@127.0.0.1:{node.pg_port}/{database}", autocommit=True, connect_timeout=5
    ) as conn:
        return conn.execute(query).fetchall()


def _visible(node: patroni_cluster.Node, database: str) -> set[tuple[str, int, str]]:
    """The journal's rows a new snapshot sees on ``node``. A commit waiting for the synchronous
    standby is not among them: its transaction stays in progress for every other session."""
    rows = _on(node, database, "SELECT saga_id, seq, hash FROM side_effect_journal")
    return {(str(s), int(q), str(h)) for s, q, h in rows}


def _acked(load: ha_load.Load) -> set[tuple[str, int, str]]:
    """Every entry the library acknowledged to any process of the load so far."""
    return {
        (str(r["entry"][0]), int(r["entry"][1]), str(r["entry"][2]))
        for r in invariants.read_acks(load.acks.values())
        if "entry" in r
    }


def _longest_wait(load: ha_load.Load) -> float:
    """The longest pause, in seconds, between two appends acknowledged to one worker: how long
    the appends caught by the fault waited (a worker appends every few milliseconds otherwise)."""
    longest = 0.0
    for name in load.workers:
        times = sorted(float(r["t"]) for r in invariants.read_acks([load.acks[name]]) if "entry" in r)
        longest = max([longest, *(b - a for a, b in itertools.pairwise(times))])
    return longest


def _waiting(node: patroni_cluster.Node, database: str) -> int:
    """Backends of ``database`` whose commit waits for the synchronous standby."""
    rows = _on(
        node,
        "postgres",
        f"SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND datname = '{database}'",
    )
    return int(rows[0][0])


@pytest.mark.parametrize("gone", ["stopped", "killed"])
def test_strict_standby_gone_appends_wait_unacknowledged_and_go_on_when_it_returns(
    cluster: patroni_cluster.PatroniCluster, url: str, workload: ModuleType, tmp_path: Path, gone: str
) -> None:
    """``stopped``: the standby's Patroni is sent SIGTERM (``systemctl stop patroni``); ``killed``:
    its Patroni and postmaster are sent SIGKILL (the machine gone)."""
    database = url.rsplit("/", maxsplit=1)[-1].split("?", maxsplit=1)[0]
    seen: dict[str, Any] = {}

    def fault(load: ha_load.Load) -> float:
        asked = time.time()
        leader, standby = cluster.take_sync_standby_away(gone)
        seen["stop"] = time.time() - asked
        load.wait(lambda: _waiting(leader, database) > 0, 60, "an append waits for the standby")
        seen["names"] = _on(leader, "postgres", "SHOW synchronous_standby_names")[0][0]
        before = _visible(leader, database)
        time.sleep(HOLD)
        after, acked = _visible(leader, database), _acked(load)
        seen["waiting"] = _waiting(leader, database)
        seen["failed"] = load.failed()
        # Strict mode's promise, read on the leader: no commit was released with no standby...
        assert after == before, f"{len(after - before)} commits became visible with no standby"
        # ...so every entry the library acknowledged was already there when the standby went.
        assert acked <= after, f"acknowledged but not committed: {sorted(acked - after)[:5]}"
        assert seen["waiting"] > 0, "no append was waiting: the hold proves nothing"
        returned = time.time()
        cluster.start_node(standby)
        load.wait(lambda: _visible(leader, database) != after, 60, "a waiting append was released")
        seen["released"] = time.time() - returned
        return returned

    load, summary = ha_load.through(url, tmp_path, fault)
    print(summary)
    print(
        f"the longest a worker waited for an append: {_longest_wait(load):.1f} s; "
        f"standby {gone} in {seen['stop']:.1f} s; synchronous_standby_names "
        f"{seen['names']!r}; after {HOLD:g} s {seen['waiting']} backends waiting on SyncRep, "
        f"{len(seen['failed'])} operations failed; appends released {seen['released']:.1f} s "
        "after the standby's Patroni was started again"
    )
    # An append waits as long as the standby is away (the connection is healthy): none raised. A
    # read does not wait past the store's wait limit (connect_timeout): an operation that had to
    # read (cron's recover(), the approver's queue) while the index catch-up or a connection waited
    # behind the commits may give up with StoreUnavailableError, a clear error that lost nothing.
    for failed in load.failed():
        assert failed["error"].startswith("StoreUnavailableError: gave up after"), failed
        assert "no time left to wait for it" in failed["error"], failed
    assert seen["names"] not in ("", None), "Patroni dropped synchronous replication in strict mode"


@pytest.mark.parametrize("how", ["pg_cancel_backend", "pg_terminate_backend"])
def test_strict_a_waiting_commit_cancelled_by_hand_is_acknowledged_on_the_leader_alone(
    cluster: patroni_cluster.PatroniCluster, url: str, workload: ModuleType, how: str
) -> None:
    """PostgreSQL's documented behaviour, and what the library can do with it: a commit whose
    wait for the standby is cancelled (``pg_cancel_backend``: the statement returns with a
    WARNING) or whose backend is terminated (``pg_terminate_backend``: the connection drops, and
    the library's read-back finds the row) has committed on the leader. The saga completes with
    the standby gone: its entries are acknowledged on the leader alone."""
    database = url.rsplit("/", maxsplit=1)[-1].split("?", maxsplit=1)[0]
    leader, standby = cluster.leader(), cluster.sync_standby()
    assert leader is not None
    assert standby is not None

    @tool
    def note() -> str:
        return "noted"

    outcome: dict[str, Any] = {}
    with Sagacity(url) as sg:
        sg.saga_ids()  # the schema, made while the standby is there
        cluster.stop_node(standby)
        try:

            def run() -> None:
                try:
                    outcome["result"] = sg.run("cancelled", note)
                except BaseException as exc:  # reported by the assertion below
                    outcome["error"] = exc

            worker = threading.Thread(target=run, daemon=True)
            worker.start()
            deadline = time.monotonic() + 60
            while worker.is_alive() and time.monotonic() < deadline:
                for (pid,) in _on(
                    leader,
                    "postgres",
                    "SELECT pid FROM pg_stat_activity "
                    f"WHERE wait_event = 'SyncRep' AND datname = '{database}'",
                ):
                    _on(leader, "postgres", f"SELECT {how}({int(pid)})")
                time.sleep(0.2)
            worker.join(10)
            stored = {seq for saga_id, seq, _ in _visible(leader, database) if saga_id == "cancelled"}
        finally:
            cluster.start_node(standby)
    assert not worker.is_alive(), f"the saga still waits after {how} of every waiting backend"
    assert "error" not in outcome, outcome
    assert outcome["result"].status is SagaStatus.COMPLETED, outcome
    assert stored, "the saga's entries are not on the leader"
    print(f"{how}: the saga completed with the standby gone; entries {sorted(stored)} on the leader alone")
