"""Every pending request is reachable (#33 item 22): the approval queue sorted and paged by the
library over the whole queue, filtered by requester and by "awaiting this approver", with a count
that matches, read in this process from requests another process made, on every durable store.

The oracle is the order each request was made in, grouped by hand: requests that expire in an
hour before those in two hours before those that never do; saga ids sorted; tools sorted.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagacity import ApprovalPage, Sagacity
from sagacity.errors import InvalidValueError

TOOLS = """
from sagacity import Reversibility, tool

@tool(reversibility=Reversibility.IRREVERSIBLE, approval_ttl=3600)
def qt_wire(n: int) -> str:
    return f"wired {n}"

@tool(reversibility=Reversibility.IRREVERSIBLE, approvals=2, approval_ttl=7200)
def qt_payout(n: int) -> str:
    return f"paid {n}"

@tool(reversibility=Reversibility.IRREVERSIBLE)
def qt_hold(n: int) -> str:
    return f"held {n}"
"""

#: (saga id, tool, requester), in the order the writer makes them. The ids do not sort in that order.
REQUESTS = [
    (f"{prefix}-{i}", tool, ("ann", "ben")[i % 2])
    for i in range(4)
    for prefix, tool in (("w", "qt_wire"), ("p", "qt_payout"), ("h", "qt_hold"))
][::-1]

WRITER = """
import sys, time
import queue_tools
from sagacity import Sagacity, acting_as
from tests_order import REQUESTS

with Sagacity(sys.argv[1], approval_ttl=None) as sg:
    for saga_id, tool, requester in REQUESTS:
        time.sleep(0.003)  # distinct timestamps, whatever the store's resolution
        with acting_as(requester):
            sg.run(saga_id, lambda t=tool: getattr(queue_tools, t)(1))
    seq = {p.request.saga_id: p.request.journal_seq for p in sg.approvals()}
    sg.approve("w-0", seq["w-0"], "zed")  # 1 of 1: ready, wants nobody
    sg.approve("p-0", seq["p-0"], "zed")  # 1 of 2, zed's: wants another
    sg.approve("p-1", seq["p-1"], "yan")  # 1 of 2, yan's: wants zed
"""


@pytest.fixture
def sg(durable_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sagacity]:
    """The requests above, made by another process; read here with the same tools imported."""
    (tmp_path / "queue_tools.py").write_text(TOOLS)
    (tmp_path / "tests_order.py").write_text(f"REQUESTS = {REQUESTS!r}\n")
    subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WRITER), durable_url],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        check=True,
        timeout=120,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("queue_tools", None)
    __import__("queue_tools")
    sagacity = Sagacity(durable_url)
    yield sagacity
    sagacity.close()
    sys.modules.pop("queue_tools", None)


def _walk(sg: Sagacity, limit: int, **options: object) -> tuple[list[str], set[int]]:
    """Every page of the queue: the saga ids in page order, and the totals each page said."""
    ids: list[str] = []
    totals: set[int] = set()
    after = None
    while True:
        page: ApprovalPage = sg.approval_page(limit=limit, after=after, **options)  # type: ignore[arg-type]
        ids += [p.request.saga_id for p in page.items]
        totals.add(page.total)
        if page.next is None:
            return ids, totals
        after = page.next


def test_every_request_is_reached_in_every_order(sg: Sagacity) -> None:
    made = [saga_id for saga_id, _, _ in REQUESTS]
    by_expiry = (
        [s for s in made if s[0] == "w"] + [s for s in made if s[0] == "p"] + [s for s in made if s[0] == "h"]
    )
    tool_of = {saga_id: tool for saga_id, tool, _ in REQUESTS}
    expected = {
        "created": made,
        "expires": by_expiry,
        "saga": sorted(made),
        "tool": sorted(made, key=lambda s: (tool_of[s], made.index(s))),
    }
    for sort, order in expected.items():
        for descending in (False, True):
            ids, totals = _walk(sg, 5, sort=sort, descending=descending)
            assert ids == (order[::-1] if descending else order), (sort, descending)
            assert totals == {len(REQUESTS)}
    # The first page of 5 in expiry order is not the 5 oldest re-sorted.
    assert [p.request.saga_id for p in sg.approvals(limit=5, sort="expires")] == by_expiry[:5]


def test_requester_and_awaiting_filter_the_whole_queue_and_count_it(sg: Sagacity) -> None:
    made = [saga_id for saga_id, _, _ in REQUESTS]
    anns = [saga_id for saga_id, _, requester in REQUESTS if requester == "ann"]
    ids, totals = _walk(sg, 2, requester="ann")
    assert ids == anns
    assert totals == {len(anns)}
    # zed: not w-0 (approved, ready) nor p-0 (zed approved it already); p-1 wants zed's approval.
    wanted = [s for s in made if s not in ("w-0", "p-0")]
    ids, totals = _walk(sg, 3, awaiting="zed", sort="saga", descending=True)
    assert ids == sorted(wanted, reverse=True)
    assert totals == {len(wanted)}
    # yan approved p-1; w-0 is ready for anyone.
    assert "p-1" not in _walk(sg, 50, awaiting="yan")[0]
    page = sg.approval_page(awaiting="zed", requester="ben", tool="qt_payout")
    assert [p.request.saga_id for p in page.items] == ["p-3", "p-1"]
    assert page.total == 2
    assert page.next is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"sort": "waiting"}, "sort must be one of 'created', 'expires', 'saga', 'tool'"),
        ({"descending": "yes"}, "descending must be True or False"),
        ({"awaiting": " "}, "approver must be a non-empty identity"),
        ({"requester": 7}, "requester must be a string"),
    ],
)
def test_a_bad_order_or_filter_is_refused(durable_url: str, options: dict[str, object], message: str) -> None:
    with Sagacity(durable_url) as sagacity, pytest.raises(InvalidValueError, match=message):
        sagacity.approval_page(**options)  # type: ignore[arg-type]
