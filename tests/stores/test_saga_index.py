"""The saga index always equals the fold of the journal: after the library's writes, after rows
another implementation inserts straight into the shared table, after tampering, after a rebuild.

The oracle is ``ScanIndex``, which folds every saga's journal afresh on each read (what every
operator read did before the index); the store's index must give the same rows, counts and
watched sets, read through the same facade.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagacity import Phase, Reversibility, Sagacity, SagaStatus, tool
from sagacity._index import SagaIndex, ScanIndex
from sagacity.chain import GENESIS_HASH, entry_hash
from sagacity.doctor import FindingKind, diagnose
from sagacity.errors import InvalidValueError, SagaClosedError, SagaStateError, StoreError
from sagacity.stores.base import Watch
from sagacity.stores.sqlite import path_from_url


@tool(name="idx_reserve")
def reserve(sku: str) -> str:
    return f"reserved {sku}"


@reserve.compensation
def release(sku: str) -> None:
    """Undo a reservation (nothing to undo in this test's world)."""


@tool(name="idx_charge")
def charge(amount: int) -> str:
    if amount < 0:
        raise ValueError("card declined")
    return f"charged {amount}"


@tool(name="idx_wire", reversibility=Reversibility.IRREVERSIBLE)
def wire(amount: int) -> str:
    return f"wired {amount}"


def _raw(url: str, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """One statement on the store's database, as another program would run it (no Sagacity)."""
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(path_from_url(url), isolation_level=None)
        try:
            return conn.execute(statement.replace("%s", "?"), params).fetchall()
        finally:
            conn.close()
    if url.startswith("mysql:"):
        import pymysql

        from sagacity.stores.mysql import connect_arguments

        with pymysql.connect(**connect_arguments(url), autocommit=True) as my, my.cursor() as cur:
            cur.execute(statement, params)
            return list(cur.fetchall())
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        cur = pg.execute(statement, params)
        return cur.fetchall() if cur.description else []


def foreign_append(
    url: str, saga_id: str, tool_name: str, phase: Phase, input_: str, payload: str = ""
) -> None:
    """Append one correctly chained row the way another Sagacity implementation would: its own
    connection, its own clock, a plain INSERT into the shared table."""
    tail = _raw(
        url,
        "SELECT seq, hash FROM side_effect_journal WHERE saga_id = %s ORDER BY seq DESC LIMIT 1",
        (saga_id,),
    )
    seq, prev = (tail[0][0] + 1, tail[0][1]) if tail else (1, GENESIS_HASH)
    moment = datetime.now(UTC).replace(tzinfo=None)  # naive UTC, as the schema holds
    stamp: Any = moment.isoformat(" ", "microseconds") if url.startswith("sqlite:") else moment
    _raw(
        url,
        "INSERT INTO side_effect_journal (saga_id, seq, tool_name, phase, input, payload, timestamp, hash) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (
            saga_id,
            seq,
            tool_name,
            str(phase),
            input_,
            payload,
            stamp,
            entry_hash(prev, saga_id, seq, tool_name, str(phase), input_, payload, moment),
        ),
    )


def assert_index_is_the_fold(sg: Sagacity) -> None:
    """Every read the index answers equals a fresh fold of every journal."""
    index, oracle = sg.index, ScanIndex(sg.journal)
    assert isinstance(index, SagaIndex), "the SQL stores keep their own index"
    assert index.page(None, None, None) == oracle.page(None, None, None)
    assert index.counts() == oracle.counts()
    for watch in Watch:
        assert index.watched(watch) == oracle.watched(watch), watch
    for status in (SagaStatus.COMPLETED, SagaStatus.COMPENSATED, SagaStatus.AWAITING_APPROVAL):
        assert index.page(status, 3, None) == oracle.page(status, 3, None)


def _ok(n: int) -> None:
    reserve(f"sku-{n}")
    charge(n)


def _fails(n: int) -> None:
    reserve(f"sku-{n}")
    charge(-n)


def _gated(n: int) -> None:
    reserve(f"sku-{n}")
    wire(n)


_SAGAS = {"ok": _ok, "fails": _fails, "gated": _gated}

# A step: run a saga through the library, or write rows behind its back as another program.
step = st.one_of(
    st.tuples(st.just("run"), st.sampled_from(sorted(_SAGAS)), st.integers(0, 5)),
    st.tuples(st.just("foreign-call"), st.sampled_from(["done", "failed", "in-doubt"]), st.integers(0, 5)),
    st.tuples(st.just("read"), st.just(""), st.just(0)),
)


@pytest.fixture
def sg(durable_url: str) -> Iterator[Sagacity]:
    with Sagacity(durable_url) as sg:
        yield sg


_examples = itertools.count()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=1, max_size=12))
def test_index_equals_the_fold_of_any_journal(sg: Sagacity, steps: list[tuple[str, str, int]]) -> None:
    """Random journals, written by the library and by another writer straight into the table, in
    any order with reads between: after every read, the index's view is the journal's fold."""
    run = next(_examples)
    for kind, what, n in steps:
        saga_id = f"e{run}-s{n}"
        if kind == "run":
            try:
                sg.run(saga_id, _SAGAS[what], n)
            except (SagaClosedError, SagaStateError):
                pass  # the saga was compensated earlier in this example: it takes no new calls
        elif kind == "foreign-call":
            args = f'{{"sku":"f-{n}"}}'
            foreign_append(sg.url, saga_id, "idx_reserve", Phase.INTENT, args)
            if what == "done":
                foreign_append(sg.url, saga_id, "idx_reserve", Phase.EXECUTED, args, "reserved by java")
            elif what == "failed":
                foreign_append(sg.url, saga_id, "idx_reserve", Phase.FAILED, args, "IOException: gone")
        else:
            assert_index_is_the_fold(sg)
    assert_index_is_the_fold(sg)


def test_a_foreign_writers_rows_change_status_without_any_library_write(sg: Sagacity) -> None:
    """Another implementation leaves a call in doubt in a saga the index already holds: the next
    read shows IN_DOUBT and lists the call, though this library wrote nothing since."""
    sg.run("order-1", _ok, 1)
    assert [(s.saga_id, s.status) for s in sg.sagas()] == [("order-1", SagaStatus.COMPLETED)]
    foreign_append(sg.url, "order-1", "idx_charge", Phase.INTENT, '{"amount":9}')
    foreign_append(sg.url, "java-2", "idx_charge", Phase.INTENT, '{"amount":7}')
    foreign_append(sg.url, "java-2", "idx_charge", Phase.EXECUTED, '{"amount":7}', "ok")
    listed = {s.saga_id: s for s in sg.sagas()}
    assert listed["order-1"].status is SagaStatus.IN_DOUBT
    assert (listed["order-1"].entry_count, listed["order-1"].in_doubt) == (7, 1)  # START, END
    assert listed["java-2"].status is SagaStatus.COMPLETED
    assert [(c.saga_id, c.seq) for c in sg.in_doubt()] == [("order-1", 7)]  # the foreign INTENT after the END
    assert sg.saga_counts() == {SagaStatus.IN_DOUBT: 1, SagaStatus.COMPLETED: 1}
    assert_index_is_the_fold(sg)


def test_pages_by_cursor_cover_every_saga_once_per_status(sg: Sagacity) -> None:
    """Paging with cursors walks the list newest first, without overlap or gap, filtered or not."""
    for n in range(7):
        sg.run(f"p{n}", _fails if n % 3 == 0 else _ok, n + 1)
    seen: list[str] = []
    after = None
    while True:
        page = sg.sagas(limit=3, after=after)
        seen += [s.saga_id for s in page]
        if len(page) < 3:
            break
        after = page[-1].cursor
    assert seen == [s.saga_id for s in sg.sagas()]
    assert sorted(seen) == [f"p{n}" for n in range(7)]
    first = sg.sagas(status="COMPENSATED", limit=2)
    rest = sg.sagas(status="COMPENSATED", limit=2, after=first[-1].cursor)
    assert [s.saga_id for s in first + rest] == ["p6", "p3", "p0"]


def test_rebuild_gives_the_same_rows(sg: Sagacity, tmp_path: Any) -> None:
    """``reindex`` forgets every row and folds every journal again: the same view, all sagas."""
    for n in range(4):
        sg.run(f"r{n}", _SAGAS[["ok", "fails", "gated", "ok"][n]], n + 1)
    before = sg.index.page(None, None, None)
    assert sg.reindex() == 4
    assert sg.index.page(None, None, None) == before
    assert_index_is_the_fold(sg)


@pytest.mark.parametrize("durable_url", ["postgres"], indirect=True)
def test_sql_tampering_on_postgres_shows_at_the_next_read(sg: Sagacity) -> None:
    """An UPDATE, DELETE or TRUNCATE behind the library's back (psql, the table owner) fires the
    triggers: the next read refolds the saga, and the doctor reports the broken chain without
    --full."""
    sg.run("paid", _ok, 5)
    sg.run("gone", _ok, 6)
    assert diagnose(sg, older_than=timedelta(0)).findings == []
    _raw(sg.url, "UPDATE side_effect_journal SET payload = 'charged 0' WHERE saga_id = 'paid' AND seq = 4")
    _raw(sg.url, "DELETE FROM side_effect_journal WHERE saga_id = 'gone'")
    assert [s.saga_id for s in sg.sagas()] == ["paid"]
    found = diagnose(sg, older_than=timedelta(0)).findings
    assert [(f.kind, f.saga_id) for f in found] == [(FindingKind.BROKEN_CHAIN, "paid")]
    assert "seq 4" in found[0].detail
    assert_index_is_the_fold(sg)
    _raw(sg.url, "TRUNCATE side_effect_journal")
    assert sg.sagas() == []
    assert_index_is_the_fold(sg)


@pytest.mark.parametrize("durable_url", ["sqlite"], indirect=True)
def test_sqlite_edit_in_place_needs_doctor_full(sg: Sagacity) -> None:
    """On SQLite the journal's triggers refuse UPDATE; someone who drops them and edits a row in
    place changes no rowid, so the index cannot notice: ``doctor --full`` re-verifies everything
    and finds it (the documented limit)."""
    sg.run("paid", _ok, 5)
    assert [s.saga_id for s in sg.sagas()] == ["paid"]  # the index has folded it
    conn = sqlite3.connect(path_from_url(sg.url), isolation_level=None)
    conn.execute("DROP TRIGGER side_effect_journal_no_update")
    conn.execute("UPDATE side_effect_journal SET payload = 'charged 0' WHERE saga_id = 'paid' AND seq = 4")
    conn.close()
    assert diagnose(sg, older_than=timedelta(0)).findings == []
    full = diagnose(sg, older_than=timedelta(0), full=True).findings
    assert [(f.kind, f.saga_id) for f in full] == [(FindingKind.BROKEN_CHAIN, "paid")]


@pytest.mark.parametrize("durable_url", ["postgres"], indirect=True)
def test_an_existing_journal_is_indexed_when_the_index_is_created(durable_url: str) -> None:
    """A database that had a journal before the index (an upgrade, or the Java library's): the
    schema's first run here notes every saga, and the first read folds them all."""
    import psycopg

    from sagacity.stores._sql import load_ddl

    shared = load_ddl("postgres").split("-- Extension")[0]  # the SPEC's two tables only
    with psycopg.connect(durable_url, autocommit=True) as pg:
        pg.execute(shared.encode())
    foreign_append(durable_url, "old-1", "idx_charge", Phase.INTENT, '{"amount":1}')
    foreign_append(durable_url, "old-1", "idx_charge", Phase.EXECUTED, '{"amount":1}', "ok")
    foreign_append(durable_url, "old-2", "idx_charge", Phase.INTENT, '{"amount":2}')
    with Sagacity(durable_url) as sg:
        assert sg.saga_counts() == {SagaStatus.COMPLETED: 1, SagaStatus.IN_DOUBT: 1}
        assert_index_is_the_fold(sg)


@pytest.mark.parametrize("durable_url", ["postgres"], indirect=True)
def test_a_read_only_session_gets_a_clear_error_and_can_still_verify(durable_url: str) -> None:
    """Operator reads catch the index up, which writes: on a read-only session (a hot standby,
    a read-only role) with changes to fold, the error says so and what still works; verify,
    which reads the journal alone, does."""
    with Sagacity(durable_url) as sg:
        sg.run("order-1", _ok, 1)
    read_only = durable_url.replace("options=", "options=-cdefault_transaction_read_only%3Don%20")
    with Sagacity(read_only, init_schema=False) as sg:
        with pytest.raises(StoreError, match=r"saga index cannot catch up.*read-only"):
            sg.sagas()
        assert sg.verify("order-1").valid


@pytest.mark.parametrize("durable_url", ["postgres"], indirect=True)
def test_a_break_found_on_a_read_only_session_is_reported_and_noted_nowhere(durable_url: str) -> None:
    """verify() on a read-only session finds a broken chain and says so; noting it in the index
    (a write) is skipped there, without an error, and a writable reader lists it as broken."""
    with Sagacity(durable_url) as sg:
        sg.run("paid", _ok, 5)
    _raw(
        durable_url, "UPDATE side_effect_journal SET payload = 'charged 0' WHERE saga_id = 'paid' AND seq = 4"
    )
    read_only = durable_url.replace("options=", "options=-cdefault_transaction_read_only%3Don%20")
    with Sagacity(read_only, init_schema=False) as sg:
        verification = sg.verify("paid")
        assert (verification.valid, verification.break_at_index) == (False, 3)
        assert not sg.view("paid").verification.valid
    with Sagacity(durable_url) as sg:
        [summary] = sg.sagas()
        assert (summary.saga_id, summary.chain_broken_at) == ("paid", 3)


def test_a_saga_live_in_this_process_lists_as_running_and_counts_so(sg: Sagacity) -> None:
    """While a saga runs here, its journal says COMPLETED (no call open) but it is RUNNING: the
    list shows it so, the RUNNING filter finds it though the index never saw it before, the
    other filters leave it out, and the counts move it."""
    sg.run("done", _ok, 1)
    with sg.saga("live"):
        reserve("sku-live")
        assert [(s.saga_id, s.status) for s in sg.sagas(status="RUNNING")] == [("live", SagaStatus.RUNNING)]
        assert [s.saga_id for s in sg.sagas(status="COMPLETED")] == ["done"]
        assert {s.saga_id: s.status for s in sg.sagas()} == {
            "live": SagaStatus.RUNNING,
            "done": SagaStatus.COMPLETED,
        }
        assert sg.saga_counts() == {SagaStatus.RUNNING: 1, SagaStatus.COMPLETED: 1}
    assert sg.saga_counts() == {SagaStatus.COMPLETED: 2}


@pytest.mark.parametrize("limit", [0, -1, True, 2.0, "5"])
def test_a_page_size_that_is_not_a_positive_whole_number_is_refused(sg: Sagacity, limit: Any) -> None:
    """sagas() and approvals() refuse a limit that is not a whole number of at least 1, naming it."""
    sg.run("order-1", _ok, 1)
    with pytest.raises(InvalidValueError, match="limit must be a whole number"):
        sg.sagas(limit=limit)
    with pytest.raises(InvalidValueError, match="limit must be a whole number"):
        sg.approvals(limit=limit)
    assert [s.saga_id for s in sg.sagas(limit=1)] == ["order-1"]
