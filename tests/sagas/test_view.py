"""``Sagacity.view``: one saga as its journal tells it (calls, gates, decisions, doubt, requests,
status, chain), on every store; the surfaces' read models are projections of it."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from sagacity import (
    ApprovalGate,
    CallStatus,
    CallView,
    CompensationContext,
    Entry,
    Phase,
    Reversibility,
    Sagacity,
    SagaStatus,
    SagaView,
    tool,
)
from sagacity.errors import BlockingCallError, SagaNotFoundError
from sagacity.framework import find_call, journaled_call, spec_of


class Later(Exception):
    """A framework's control flow: "call me again later"."""


def _tools() -> dict[str, object]:
    @tool
    def hold(sku: str) -> str:
        return f"held {sku}"

    @hold.compensation
    def unhold(ctx: CompensationContext) -> None:
        pass

    @tool
    def flaky(n: int) -> str:
        raise RuntimeError(f"flaky {n}")

    @tool
    def stuck(sku: str) -> str:
        return sku

    @stuck.compensation
    def unstick(ctx: CompensationContext) -> None:
        raise RuntimeError("cannot unstick")

    @tool(reversibility=Reversibility.IRREVERSIBLE, approvals=2)
    def pay(amount: str) -> str:
        return f"paid {amount}"

    return {"hold": hold, "flaky": flaky, "stuck": stuck, "pay": pay}


def test_a_completed_saga_shows_its_calls_and_a_valid_chain(sg: Sagacity) -> None:
    """Each call in INTENT order with its status, result and times; COMPLETED, chain valid."""
    t = _tools()

    def agent() -> None:
        t["hold"]("A")  # type: ignore[operator]
        t["hold"]("B")  # type: ignore[operator]

    assert sg.run("done", agent).ok
    view = sg.view("done")
    assert isinstance(view, SagaView)
    assert (view.saga_id, view.status, view.valid, len(view.entries)) == (
        "done",
        SagaStatus.COMPLETED,
        True,
        6,  # the calls, the saga's START and END
    )
    assert [(c.seq, c.tool_name, c.status, c.result) for c in view.calls] == [
        (2, "hold", CallStatus.EXECUTED, "held A"),
        (4, "hold", CallStatus.EXECUTED, "held B"),
    ]
    assert view.calls[0].outcome == view.entries[2]
    assert view.calls[0].error is None
    assert view.calls[0].input == '{"sku":"A"}'
    assert (view.gates, view.decisions, view.pending, view.in_doubt, view.failure) == ((), (), (), (), None)
    assert (view.started_at, view.updated_at) == (view.entries[0].timestamp, view.entries[-1].timestamp)
    assert view.verification == sg.verify("done")


def test_a_failed_call_compensates_and_the_view_says_why(sg: Sagacity) -> None:
    """A failed call is FAILED with its error, the saga COMPENSATED, ``failure`` the reason."""
    t = _tools()

    def agent() -> None:
        t["hold"]("A")  # type: ignore[operator]
        t["flaky"](7)  # type: ignore[operator]

    assert sg.run("failed", agent).status is SagaStatus.COMPENSATED
    view = sg.view("failed")
    assert view.status is SagaStatus.COMPENSATED
    assert [c.status for c in view.calls] == [CallStatus.EXECUTED, CallStatus.FAILED]
    assert view.calls[1].error is not None
    assert "flaky 7" in view.calls[1].error
    assert view.calls[1].result is None
    assert view.failure is not None
    assert "flaky 7" in view.failure


def test_a_compensation_that_fails_shows_compensation_failed(sg: Sagacity) -> None:
    t = _tools()

    def agent() -> None:
        t["stuck"]("A")  # type: ignore[operator]
        t["flaky"](1)  # type: ignore[operator]

    assert sg.run("stuck", agent).status is SagaStatus.COMPENSATION_FAILED
    assert sg.view("stuck").status is SagaStatus.COMPENSATION_FAILED


def test_a_gate_goes_from_awaiting_to_approved_to_executed(sg: Sagacity) -> None:
    """A two-approver gate: AWAITING_APPROVAL with one approval, APPROVED with two (the pending
    request ready), then the resumed call's status; the decisions are listed as journaled."""
    t = _tools()

    def agent() -> str:
        t["hold"]("A")  # type: ignore[operator]
        return t["pay"]("500.00")  # type: ignore[operator, no-any-return]

    result = sg.run("payout", agent)
    seq = result.awaiting[0].journal_seq
    waiting = sg.view("payout")
    assert waiting.status is SagaStatus.AWAITING_APPROVAL
    [gate] = waiting.gates
    assert isinstance(gate, ApprovalGate)
    assert (gate.seq, gate.tool_name, gate.input, gate.status) == (
        seq,
        "pay",
        '{"amount":"500.00"}',
        "AWAITING_APPROVAL",
    )
    assert (gate.approvers, gate.approvals_required, gate.tool_imported, gate.open) == ((), 2, True, True)
    assert waiting.gate(seq) == gate
    assert waiting.gate(seq + 100) is None
    [pending] = waiting.pending
    assert (pending.request.journal_seq, pending.approvals_required, pending.ready_to_resume) == (
        seq,
        2,
        False,
    )

    sg.approve("payout", seq, "alice")
    assert sg.view("payout").gates[0].status is CallStatus.AWAITING_APPROVAL
    sg.approve("payout", seq, "bob")
    approved = sg.view("payout")
    assert (approved.gates[0].status, approved.gates[0].approvers) == (CallStatus.APPROVED, ("alice", "bob"))
    assert approved.pending[0].ready_to_resume
    assert [(d.phase, d.decides, d.approver) for d in approved.decisions] == [
        (Phase.APPROVED, seq, "alice"),
        (Phase.APPROVED, seq, "bob"),
    ]

    assert sg.resume("payout", seq, '{"amount":"500.00"}', resumed_by="carol").ok
    resumed = sg.view("payout")
    gate = resumed.gates[0]
    assert gate.status is CallStatus.EXECUTED
    assert not gate.open
    assert isinstance(gate.resumed, CallView)
    assert (gate.resumed.gate_seq, gate.resumed.result) == (seq, "paid 500.00")
    assert resumed.pending == ()
    assert resumed.status is SagaStatus.COMPLETED


def test_a_rejected_gate_names_who_rejected_it_and_why(sg: Sagacity) -> None:
    t = _tools()

    def agent() -> str:
        t["hold"]("A")  # type: ignore[operator]
        return t["pay"]("9.00")  # type: ignore[operator, no-any-return]

    seq = sg.run("rejected", agent).awaiting[0].journal_seq
    sg.reject("rejected", seq, "dana", "not this month")
    view = sg.view("rejected")
    [gate] = view.gates
    assert gate.status is CallStatus.REJECTED
    assert not gate.open
    assert gate.rejection is not None
    assert (gate.rejection.approver, gate.rejection.reason, gate.rejection.decides) == (
        "dana",
        "not this month",
        seq,
    )
    assert gate.rejection in view.decisions
    assert view.status is SagaStatus.REJECTED
    assert view.pending == ()


def test_a_saga_live_here_is_running_with_nothing_in_doubt(sg: Sagacity) -> None:
    t = _tools()
    with sg.saga("live"):
        t["hold"]("A")  # type: ignore[operator]
        view = sg.view("live")
    assert (view.status, view.in_doubt, len(view.calls)) == (SagaStatus.RUNNING, (), 1)
    assert sg.view("live").status is SagaStatus.COMPLETED


def test_an_intent_without_outcome_is_in_doubt_until_resolved(sg: Sagacity) -> None:
    """An INTENT left by a process that died (journaled here as that process would have): the
    call is IN_DOUBT (no living process runs the saga), the saga IN_DOUBT and the call listed in
    doubt; a resolution settles it and names the resolver."""
    _tools()
    seq = sg.journal.append("crashed", "hold", Phase.INTENT, '{"sku":"A"}').seq
    view = sg.view("crashed")
    assert view.status is SagaStatus.IN_DOUBT
    assert [(c.seq, c.status) for c in view.calls] == [(seq, CallStatus.IN_DOUBT)]
    [doubt] = view.in_doubt
    assert (doubt.seq, doubt.tool_name, doubt.kind) == (seq, "hold", "call")
    [listed] = sg.in_doubt("crashed")
    assert dataclasses.replace(listed, age=doubt.age) == doubt

    sg.resolve_in_doubt("crashed", seq, happened=True, resolver="erin", result="held A")
    settled = sg.view("crashed")
    assert settled.in_doubt == ()
    [call] = settled.calls
    assert (call.status, call.resolved_by, call.result) == (CallStatus.EXECUTED, "erin", "held A")
    [resolution] = settled.decisions
    assert (resolution.phase, resolution.decides, resolution.approver) == (Phase.APPROVED, seq, "erin")


def test_a_compensation_started_and_not_finished_is_compensating(sg: Sagacity) -> None:
    """The journal's saga-level FAILED with no end yet (a compensation a crash cut short)."""
    _tools()
    sg.journal.append("half", "hold", Phase.INTENT, '{"sku":"A"}')
    sg.journal.append("half", "hold", Phase.EXECUTED, '{"sku":"A"}', "held A")
    sg.journal.append("half", "saga", Phase.FAILED, "", "the agent crashed")
    view = sg.view("half")
    assert (view.status, view.failure) == (SagaStatus.COMPENSATING, "the agent crashed")
    assert view.compensating
    assert sg.recover("half")[0].status is SagaStatus.COMPENSATED
    assert not sg.view("half").compensating


def test_a_gate_without_its_request_is_not_aligned_until_recover(sg: Sagacity) -> None:
    """A process that died between a gate's entry and its request row (the row deleted here as
    that crash leaves it): the view says so, and ``recover`` puts the row back."""
    t = _tools()
    seq = sg.run("orphan", lambda: t["pay"]("3.00")).awaiting[0].journal_seq  # type: ignore[operator]
    assert sg.view("orphan").requests_aligned
    assert sg.store.delete_approval_request("orphan", seq)
    orphan = sg.view("orphan")
    assert (orphan.requests_aligned, orphan.pending, orphan.compensating) == (False, (), False)
    sg.recover("orphan")
    assert sg.view("orphan").requests_aligned
    assert [p.request.journal_seq for p in sg.view("orphan").pending] == [seq]


def test_sync_code_on_an_event_loop_reads_the_view_when_it_allows_blocking(sg: Sagacity) -> None:
    """``view`` refuses inside a running loop (a blocking read would stall it), unless the caller
    says it cannot await (an adapter's sync hook on the framework's loop)."""
    t = _tools()
    assert sg.run("looped", lambda: t["hold"]("A")).ok  # type: ignore[operator]

    async def hook() -> SagaView:
        with pytest.raises(BlockingCallError, match="view_async"):
            sg.view("looped")
        return sg.view("looped", allow_blocking=True)

    assert asyncio.run(hook()) == sg.view("looped")


def test_a_call_left_by_the_frameworks_control_flow_passed(sg: Sagacity) -> None:
    """A framework call that raised its control flow is PASSED (not failed), found by call id."""
    t = _tools()
    spec = spec_of(t["hold"])
    assert spec is not None

    def later() -> str:
        raise Later

    with sg.saga("framework"), pytest.raises(Later):
        journaled_call(spec, '{"sku":"A"}', "call-1", later, control_flow=(Later,))
    view = sg.view("framework")
    [call] = view.calls
    assert (call.status, call.call_id) == (CallStatus.PASSED, "call-1")
    assert view.find("call-1") == call
    assert view.find("call-2") is None
    record = find_call(sg, "framework", "call-1")
    assert record is not None
    assert record.status is CallStatus.PASSED
    assert view.status is SagaStatus.COMPLETED


def test_a_broken_chain_shows_in_the_view(sg: Sagacity) -> None:
    """A row written behind the library's back (through the store, with a hash of its own) makes
    the view's chain invalid at that row, and the calls are still read."""
    t = _tools()
    assert sg.run("forged", lambda: t["hold"]("A")).ok  # type: ignore[operator]
    last = sg.entries("forged")[-1]
    forged = Entry("forged", last.seq + 1, "hold", Phase.INTENT, '{"sku":"B"}', "", last.timestamp, "0" * 64)
    assert sg.store.insert_entry(forged)
    view = sg.view("forged")
    assert not view.valid
    assert view.verification.break_at_index == last.seq  # zero-based: the row after the END
    assert [c.status for c in view.calls] == [CallStatus.EXECUTED, CallStatus.IN_DOUBT]


def test_an_unknown_saga_has_no_view(sg: Sagacity) -> None:
    with pytest.raises(SagaNotFoundError):
        sg.view("nobody")
    assert find_call(sg, "nobody", "call-1") is None


def test_the_async_twin_reads_the_same_view(sg: Sagacity) -> None:
    t = _tools()
    assert sg.run("twin", lambda: t["hold"]("A")).ok  # type: ignore[operator]
    view = asyncio.run(sg.view_async("twin"))
    assert view == sg.view("twin")


def test_saga_detail_is_a_projection_of_the_view(sg: Sagacity) -> None:
    """``saga_detail`` says what the view says: status, journal, chain, decisions, requests."""
    t = _tools()

    def agent() -> str:
        return t["pay"]("1.00")  # type: ignore[operator, no-any-return]

    seq = sg.run("detail", agent).awaiting[0].journal_seq
    sg.approve("detail", seq, "alice")
    view, detail = sg.view("detail"), sg.saga_detail("detail")
    assert (detail.status, detail.entries, detail.verification, detail.decisions) == (
        view.status,
        view.entries,
        view.verification,
        view.decisions,
    )
    still = [dataclasses.replace(p, waiting=view.pending[0].waiting) for p in detail.pending]
    assert still == list(view.pending)
    assert [dataclasses.replace(p, waiting=view.pending[0].waiting) for p in sg.approvals("detail")] == still
