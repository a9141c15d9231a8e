"""``SagaState.fork``: a decision drafted on entries that may not land (the deferred durability
mode's held outcomes) is made on a fork, which must move on exactly as the state itself would,
and must leave the state as it was.

The journals are real ones, written through the public API on ``memory://``: keyed calls, a gate
approved by two people and resumed, a gate rejected, a failure compensated. Every prefix of each
is folded, forked, and the fork fed the rest.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from sagacity import CompensationContext, Reversibility, Sagacity, tool
from sagacity._state import FORKED_FIELDS, Call, Compensation, Gate, SagaState, fold
from sagacity.framework import CallPending, find_call, journaled_call, spec_of
from sagacity.model import Entry
from sagacity.tools import registry


@pytest.fixture
def journals() -> Iterator[list[list[Entry]]]:
    with registry.isolated(), Sagacity("memory://") as sg:

        @tool
        def reserve(sku: str) -> str:
            if sku == "broken":
                raise RuntimeError("out of stock")
            return f"R-{sku}"

        @reserve.compensation
        def release(ctx: CompensationContext) -> None:
            pass

        @tool(reversibility=Reversibility.IRREVERSIBLE, approvals=2)
        def wire(amount: str, to: str) -> str:
            return f"wired {amount} to {to}"

        def present(fn: Any, arguments: str, call_id: str) -> Any:
            spec = spec_of(fn)
            assert spec is not None
            args, kwargs = spec.decode_input(arguments)
            return journaled_call(spec, arguments, call_id, lambda: fn(*args, **kwargs))

        alice = '{"amount":"100.00","to":"alice"}'
        with sg.saga("approved"):
            present(reserve, '{"sku":"A"}', "c1")
            pending = present(wire, alice, "c2")
        assert isinstance(pending, CallPending)
        gate = pending.request.journal_seq
        sg.approve("approved", gate, "alice")
        sg.approve("approved", gate, "bob")
        with sg.saga("approved", continue_existing=True):
            assert present(wire, alice, "c2") == "wired 100.00 to alice"
            present(reserve, '{"sku":"B"}', "c3")

        with sg.saga("rejected"):
            reserve("A")
            pending = present(wire, alice, "c9")
        assert isinstance(pending, CallPending)
        sg.reject("rejected", pending.request.journal_seq, "carol", "not today")

        def failing() -> None:
            with sg.saga("failed"):
                reserve("A")
                reserve("B")
                reserve("broken")

        with pytest.raises(RuntimeError):
            failing()

        record = find_call(sg, "approved", "c2")
        assert record is not None
        assert record.gate_seq == gate
        yield [sg.entries(saga_id) for saga_id in ("approved", "rejected", "failed")]


def test_a_fork_moves_on_as_the_state_would_and_leaves_it_as_it_was(journals: list[list[Entry]]) -> None:
    for entries in journals:
        saga_id = entries[0].saga_id
        whole = fold(saga_id, entries)
        assert whole.calls, f"{saga_id}: not the journal meant"
        assert whole.gates or whole.compensations, f"{saga_id}: not the journal meant"
        for cut in range(len(entries) + 1):
            state = fold(saga_id, entries[:cut])
            before = copy.deepcopy(state)
            forked = state.fork()
            for entry in entries[cut:]:
                forked.apply(entry)
            assert forked == whole, f"{saga_id}: a fork at {cut} moved on otherwise than the state"
            assert state == before, f"{saga_id}: moving the fork at {cut} moved the state"
            _assert_own_records(forked, state)


def _assert_own_records(forked: SagaState, state: SagaState) -> None:
    """The fork's ``keyed`` and gates' ``resumed`` name the fork's own records, none of the state's."""
    own = {id(record) for record in [*forked.calls, *forked.gates.values()]}
    theirs = {id(record) for record in [*state.calls, *state.gates.values(), *state.compensations.values()]}
    assert all(id(found) in own for found in forked.keyed.values())
    assert all(id(g.resumed) in own for g in forked.gates.values() if g.resumed is not None)
    assert not own & theirs
    assert not {id(c) for c in forked.compensations.values()} & theirs


def test_fork_knows_every_field() -> None:
    """A field added to the state or a record it copies must be taken into ``fork`` (copied when
    ``apply`` changes it in place), then named in ``FORKED_FIELDS``."""
    for kind in (SagaState, Call, Gate, Compensation):
        assert [f.name for f in dataclasses.fields(kind)] == FORKED_FIELDS[kind.__name__], kind.__name__
