"""What a saga asks of its store, counted on the real store (issue #35): a short saga writes its
five commits and reads nothing, and a budgeted call's debit rides in its INTENT's insert.

The store is the real one; each of its operations is counted on the way through (a test-only
counting hook, no stand-in), and the counts are what the store is asked, not how long it takes.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sagacity import Sagacity, tool
from sagacity.guardrails import METER_PREFIX, parse_verdict
from sagacity.stores import open_store
from sagacity.stores.base import Store

WRITES = ("insert_entry", "insert_entry_at", "insert_entries")
READS = ("tail", "get_entry", "read_entries", "list_approval_requests", "get_approval_request")
LIVENESS = ("hold_live", "release_live", "live_among", "live_elsewhere")

#: A short saga's journal: START, two calls, END.
SHORT_SAGA = [
    (1, "sagacity:saga", "INTENT"),
    (2, "step", "INTENT"),
    (3, "step", "EXECUTED"),
    (4, "step", "INTENT"),
    (5, "step", "EXECUTED"),
    (6, "sagacity:saga", "EXECUTED"),
]
BUDGET = """\
[[rules]]
id = "calls"
tool = "step"
action = "deny"
[rules.budget]
limit = "1000"
window = "24h"
"""


def counted(url: str) -> tuple[Store, Counter[str]]:
    """The real store of ``url``, counting every call of its journal and liveness operations."""
    store = open_store(url)
    calls: Counter[str] = Counter()
    depth = threading.local()
    for name in (*WRITES, *READS, *LIVENESS):
        real = getattr(store, name, None)
        if real is not None:
            setattr(store, name, _counting(name, real, calls, depth))
    return store, calls


def _counting(
    name: str, real: Callable[..., Any], calls: Counter[str], depth: threading.local
) -> Callable[..., Any]:
    """``real``, counted when the library calls it (not when the store calls itself inside it:
    a one-row ``insert_entries`` is an ``insert_entry``, one statement)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        outer = not getattr(depth, "inside", False)
        if outer:
            calls[name] += 1
            depth.inside = True
        try:
            return real(*args, **kwargs)
        finally:
            if outer:
                depth.inside = False

    return call


def _short_saga(sg: Sagacity, saga_id: str, step: Callable[[], str]) -> None:
    with sg.saga(saga_id) as scope:
        step()
        step()
    assert scope.result is not None
    assert scope.result.status.value == "COMPLETED"


def test_a_short_saga_writes_five_commits_and_reads_nothing(durable_url: str) -> None:
    """START + 2 calls + END: four inserts and the START riding with the first INTENT (five
    commits, one of two rows), no read of the saga, one liveness lease taken and given back."""

    @tool
    def step() -> str:
        return "ok"

    store, calls = counted(durable_url)
    with Sagacity(store=store) as sg:
        _short_saga(sg, "warm", step)  # the first saga pays for connections and schema checks
        calls.clear()
        _short_saga(sg, "short", step)
        assert sum(calls[name] for name in WRITES) == 5
        assert {name: calls[name] for name in READS if calls[name]} == {}
        assert calls["hold_live"] == calls["release_live"] <= 1
        assert [(e.seq, e.tool_name, e.phase) for e in sg.entries("short")] == SHORT_SAGA


def test_a_budgeted_call_pays_in_its_intent_insert(durable_url: str, tmp_path: Path) -> None:
    """Under a budget, the debit is written in the INTENT's own insert (with the START, for a
    saga's first call) and the meter is not read again while this process knows its tail: the
    saga costs the inserts it costs without a policy."""

    @tool
    def step() -> str:
        return "ok"

    policy = tmp_path / "policy.toml"
    policy.write_text(BUDGET, encoding="utf-8")
    store, calls = counted(durable_url)
    with Sagacity(store=store, policy=policy, switch_poll=3600) as sg:
        _short_saga(sg, "warm", step)
        calls.clear()
        _short_saga(sg, "paid", step)
        assert sum(calls[name] for name in WRITES) == 5
        assert {name: calls[name] for name in READS if calls[name]} == {}
        meter = f"{METER_PREFIX}calls:global"
        debits = sg.entries(meter)
        assert [e.payload.split("\n")[0] for e in debits] == ["debit=1"] * 4
        named = []
        for entry in sg.entries("paid"):
            verdict = parse_verdict(entry.payload) if entry.phase == "INTENT" else None
            if verdict is not None:
                named += [(d.meter, d.seq) for d in verdict.debits]
        assert named == [(meter, 3), (meter, 4)]
        assert sg.verify(meter).valid
        assert sg.verify("paid").valid


def test_an_end_decided_without_a_read_is_still_fenced(durable_url: str) -> None:
    """The END a run decides on the entries it wrote lands only right after them: when another
    writer (a second Sagacity on the store: another machine, as far as this one knows) appended
    to the saga meanwhile, the END loses, reads the saga, and says what the journal says — here
    nothing, since the other run already ended it."""

    @tool
    def step() -> str:
        return "ok"

    with Sagacity(durable_url) as here, Sagacity(durable_url) as there:
        with here.saga("shared") as scope:
            step()
            with there.saga("shared", continue_existing=True):
                step()
        assert scope.result is not None
        assert scope.result.status.value == "COMPLETED"
        assert [(e.seq, e.tool_name, e.phase) for e in here.entries("shared")] == SHORT_SAGA
        assert here.verify("shared").valid
