"""Listing filters (#25): ``sg.sagas()`` and ``sg.approvals()`` / ``sg.pending_approvals()`` by
saga-id prefix, tool and time, on every store.

The oracle is the unfiltered listing filtered here by hand: a filter must keep exactly the sagas
(requests) it names, in the listing's order, on the SQL index (SQLite, PostgreSQL, MariaDB) and on
the in-memory scan alike, and pages of a filtered list must cover it once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from sagacity import Reversibility, Sagacity, SagaStatus, tool
from sagacity.chain import utc_now
from sagacity.errors import InvalidValueError


@tool(name="flt_reserve")
def reserve(sku: str) -> str:
    return f"reserved {sku}"


@tool(name="flt_email")
def email(to: str) -> str:
    return f"sent to {to}"


@tool(name="flt_wire", reversibility=Reversibility.IRREVERSIBLE)
def wire(amount: int) -> str:
    return f"wired {amount}"


def _order(sku: str) -> None:
    reserve(sku)


def _notify(to: str) -> None:
    email(to)


def _gated(amount: int) -> None:
    reserve("sku-gated")
    wire(amount)


#: Saga ids, what each runs, in the order they run (one after the other in time).
_RUNS: list[tuple[str, Any, Any]] = [
    ("order-1", _order, "a"),
    ("order-2", _order, "b"),
    ("Order-3", _order, "c"),  # another case: not under the prefix "order-"
    ("mail-1", _notify, "x@example.com"),
    ("order%_4", _notify, "y@example.com"),  # LIKE's wildcards, literally
    ("pay-1", _gated, 10),
    ("order-5", _gated, 20),
]


@pytest.fixture(params=["memory", "sqlite", "postgres", "mysql"])
def sg(request: pytest.FixtureRequest) -> Iterator[tuple[Sagacity, dict[str, datetime]]]:
    """A journal holding the runs above, and the moment just before each started."""
    url = "memory://" if request.param == "memory" else request.getfixturevalue(f"{request.param}_url")
    with Sagacity(url) as sagacity:
        before: dict[str, datetime] = {}
        for saga_id, fn, arg in _RUNS:
            time.sleep(0.002)  # distinct timestamps, whatever the clock's resolution
            before[saga_id] = utc_now()
            time.sleep(0.002)
            sagacity.run(saga_id, fn, arg)
        yield sagacity, before


def _ids(summaries: list[Any]) -> list[str]:
    return [s.saga_id for s in summaries]


def test_each_filter_keeps_exactly_what_it_names(sg: tuple[Sagacity, dict[str, datetime]]) -> None:
    sagacity, before = sg
    everything = _ids(sagacity.sagas())
    assert sorted(everything) == sorted(r[0] for r in _RUNS)

    def kept(**filters: Any) -> list[str]:
        return _ids(sagacity.sagas(**filters))

    assert kept(prefix="order-") == [s for s in everything if s.startswith("order-")]
    assert kept(prefix="order%") == ["order%_4"]
    assert kept(prefix="order_") == []
    assert kept(prefix="") == everything
    assert kept(tool="flt_email") == [s for s in everything if s in ("mail-1", "order%_4")]
    assert kept(tool="flt_wire") == [s for s in everything if s in ("pay-1", "order-5")]
    assert kept(tool="flt_reserve", prefix="order") == [
        s for s in everything if s in ("order-1", "order-2", "order-5")
    ]
    assert kept(tool="no-such-tool") == []
    since = before["mail-1"]
    assert kept(since=since) == ["order-5", "pay-1", "order%_4", "mail-1"]
    assert kept(until=since) == ["Order-3", "order-2", "order-1"]
    assert kept(since=before["order-2"], until=before["mail-1"], prefix="order") == ["order-2"]
    assert kept(status=SagaStatus.AWAITING_APPROVAL, prefix="pay") == ["pay-1"]
    # An aware moment means the same instant as its naive UTC form.
    aware = since.replace(tzinfo=UTC).astimezone(timezone(timedelta(hours=5)))
    assert kept(since=aware) == kept(since=since)


def test_pages_of_a_filtered_list_cover_it_once(sg: tuple[Sagacity, dict[str, datetime]]) -> None:
    sagacity, _ = sg
    whole = _ids(sagacity.sagas(prefix="order"))
    seen: list[str] = []
    after = None
    while True:
        page = sagacity.sagas(prefix="order", limit=2, after=after)
        seen += _ids(page)
        if len(page) < 2:
            break
        after = page[-1].cursor
    assert seen == whole
    assert len(whole) == 4


def test_approval_filters(sg: tuple[Sagacity, dict[str, datetime]]) -> None:
    sagacity, before = sg
    assert [r.saga_id for r in sagacity.pending_approvals()] == ["pay-1", "order-5"]
    assert [r.saga_id for r in sagacity.pending_approvals(prefix="order")] == ["order-5"]
    assert [r.saga_id for r in sagacity.pending_approvals(tool="flt_wire")] == ["pay-1", "order-5"]
    assert sagacity.pending_approvals(tool="flt_reserve") == []
    assert [r.saga_id for r in sagacity.pending_approvals(since=before["order-5"])] == ["order-5"]
    assert [r.saga_id for r in sagacity.pending_approvals(until=before["order-5"])] == ["pay-1"]
    # The limit counts what the filter kept.
    assert [p.request.saga_id for p in sagacity.approvals(prefix="order", limit=1)] == ["order-5"]


def test_pages_of_the_approval_queue_cover_it_once(sg: tuple[Sagacity, dict[str, datetime]]) -> None:
    """``approvals(after=cursor)`` goes on after the request the cursor names, oldest first, with
    the filters; a request decided meanwhile leaves the queue and its cursor still pages on."""
    sagacity, before = sg
    assert sagacity.run("pay-2", _gated, 30).status is SagaStatus.AWAITING_APPROVAL
    whole = [p.request.saga_id for p in sagacity.approvals()]
    assert whole == ["pay-1", "order-5", "pay-2"]
    seen: list[str] = []
    after = None
    while page := sagacity.approvals(limit=1, after=after):
        seen += [p.request.saga_id for p in page]
        after = page[-1].cursor
    assert seen == whole
    first = sagacity.approvals(prefix="pay", limit=1)
    assert [p.request.saga_id for p in first] == ["pay-1"]
    sagacity.reject("pay-1", first[0].request.journal_seq, "carol", "not this one")
    rest = sagacity.approvals(prefix="pay", after=first[0].cursor)
    assert [p.request.saga_id for p in rest] == ["pay-2"]
    later = sagacity.approvals(after=first[0].cursor, since=before["order-5"], limit=5)
    assert [p.request.saga_id for p in later] == ["order-5", "pay-2"]


def test_a_cursor_from_elsewhere_is_refused() -> None:
    """A saga-list cursor is not an approval-queue cursor, nor the reverse: each says so."""
    with Sagacity("memory://") as sagacity:
        sagacity.run("pay-1", _gated, 10)
        request_cursor = sagacity.approvals()[0].cursor
        saga_cursor = sagacity.sagas()[0].cursor
        with pytest.raises(InvalidValueError, match="not an approval-queue cursor"):
            sagacity.approvals(after=saga_cursor)
        with pytest.raises(InvalidValueError, match="not a saga-list cursor"):
            sagacity.sagas(after=request_cursor)


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"prefix": 3}, "prefix must be a string"),
        ({"tool": b"flt_wire"}, "tool must be a string"),
        ({"since": "2026-01-01"}, "since must be a datetime"),
        ({"until": 1700000000}, "until must be a datetime"),
    ],
)
def test_a_filter_of_the_wrong_type_is_refused(filters: dict[str, Any], message: str) -> None:
    with Sagacity("memory://") as sagacity:
        with pytest.raises(InvalidValueError, match=message):
            sagacity.sagas(**filters)
        with pytest.raises(InvalidValueError, match=message):
            sagacity.approvals(**filters)
