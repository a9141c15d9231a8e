"""Calls keyed by a framework's call id (sagacity.framework): once, replayed, gated in band."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from sagacity import CompensationContext, Phase, Reversibility, Sagacity, SagaResult, SagaStatus, tool
from sagacity.errors import (
    ApprovalRefusedError,
    InvalidValueError,
    PayloadMismatchError,
    SagaClosedError,
    SagaStateError,
)
from sagacity.framework import (
    CallPending,
    CallRefused,
    CallRejected,
    arguments_json,
    find_call,
    journaled_call,
    journaled_call_async,
    spec_of,
)
from sagacity.testing import tool_entries

ALICE = '{"amount":"100.00","to":"alice"}'
MALLORY = '{"amount":"100.00","to":"mallory"}'


class Retry(Exception):
    """Stands for a framework's 'ask the model again' signal."""


@pytest.fixture
def world() -> dict[str, list[Any]]:
    return {"reserved": [], "released": [], "wired": []}


@pytest.fixture
def tools(world: dict[str, list[Any]]) -> Any:
    @tool
    def reserve(sku: str) -> str:
        world["reserved"].append(sku)
        return f"R-{sku}"

    @reserve.compensation
    def release(ctx: CompensationContext) -> None:
        world["released"].append(ctx.args["sku"])

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def wire(amount: str, to: str) -> str:
        world["wired"].append(to)
        return f"wired {amount} to {to}"

    class Tools:
        pass

    t = Tools()
    t.reserve, t.wire = reserve, wire  # type: ignore[attr-defined]
    return t


def present(fn: Any, arguments: str, call_id: str, **options: Any) -> Any:
    """What an adapter does: journal the call under its id; the framework's handler calls the tool."""
    spec = spec_of(fn)
    assert spec is not None
    args, kwargs = spec.decode_input(arguments)
    return journaled_call(spec, arguments, call_id, lambda: fn(*args, **kwargs), **options)


def gate_of(sg: Sagacity, saga_id: str, call_id: str) -> int:
    record = find_call(sg, saga_id, call_id)
    assert record is not None
    assert record.gate_seq is not None
    return record.gate_seq


def test_a_call_id_runs_once_and_a_replay_returns_the_journaled_result(
    sg: Sagacity, tools: Any, world: dict
) -> None:
    """Presented twice (a replayed state), the tool runs once; the second gets the journaled result."""
    with sg.saga("k1"):
        first = present(tools.reserve, '{"sku":"A"}', "call-1")
        again = present(tools.reserve, '{"sku":"A"}', "call-1")
    assert first == again == "R-A"
    assert world["reserved"] == ["A"]
    with sg.saga("k1", continue_existing=True):  # a later run of the same saga, e.g. in a new process
        assert present(tools.reserve, '{"sku":"A"}', "call-1") == "R-A"
    assert world["reserved"] == ["A"]
    entries = tool_entries(sg, "k1")
    assert [(e.phase, e.payload) for e in entries] == [("INTENT", "call_id=call-1"), ("EXECUTED", "R-A")]
    record = find_call(sg, "k1", "call-1")
    assert record is not None
    assert (record.status, record.result, record.seq) == ("EXECUTED", "R-A", 2)  # after the START
    assert sg.verify("k1").valid


def test_a_replay_with_other_arguments_is_refused_and_nothing_runs(
    sg: Sagacity, tools: Any, world: dict
) -> None:
    """The same call id with edited arguments is refused; nothing runs, nothing is journaled."""
    with sg.saga("k2") as saga:
        present(tools.reserve, '{"sku":"A"}', "call-1")
        refused = present(tools.reserve, '{"sku":"B"}', "call-1")
    assert isinstance(refused, CallRefused)
    assert "other arguments" in refused.message
    assert world["reserved"] == ["A"]
    assert len(tool_entries(sg, "k2")) == 2
    assert saga.result is not None
    assert saga.result.status is SagaStatus.COMPLETED  # a refused replay is not a failure of the saga


def test_unkeyed_calls_journal_as_before(sg: Sagacity, tools: Any) -> None:
    """Without a call id nothing changes: empty INTENT payload."""
    with sg.saga("k3"):
        tools.reserve("A")
    assert [e.payload for e in tool_entries(sg, "k3")] == ["", "R-A"]


def test_an_approved_gate_runs_in_band_once_with_the_approved_arguments(
    sg: Sagacity, tools: Any, world: dict
) -> None:
    """Gate, still pending when re-presented, approved, re-presented: runs in band, once."""
    with sg.saga("g1") as saga:
        present(tools.reserve, '{"sku":"A"}', "c1")
        pending = present(tools.wire, ALICE, "c2")
    assert isinstance(pending, CallPending)
    assert pending.message.startswith("[AWAITING_APPROVAL]")
    assert saga.result is not None
    assert saga.result.status is SagaStatus.AWAITING_APPROVAL
    seq = pending.request.journal_seq
    definition = f"definition={tools.wire.spec.definition_hash}"  # the tool it was gated under
    assert sg.entries("g1")[seq - 1].payload == f"call_id=c2\n{definition}"
    with sg.saga("g1", continue_existing=True):
        assert isinstance(present(tools.wire, ALICE, "c2"), CallPending)  # not approved yet
    assert len(sg.pending_approvals("g1")) == 1  # no second gate
    sg.approve("g1", seq, "alice@example.com")
    record = find_call(sg, "g1", "c2")
    assert record is not None
    assert record.status == "APPROVED"
    assert record.approvers == ("alice@example.com",)
    with sg.saga("g1", continue_existing=True) as saga:
        assert present(tools.wire, ALICE, "c2") == "wired 100.00 to alice"
        assert present(tools.wire, ALICE, "c2") == "wired 100.00 to alice"  # replay: journaled result
    assert world["wired"] == ["alice"]
    assert saga.result is not None
    assert saga.result.status is SagaStatus.COMPLETED
    resumed = [e for e in sg.entries("g1") if e.phase == Phase.INTENT][-1]
    assert resumed.payload == f"resumes seq={seq}\ncall_id=c2"
    assert sg.pending_approvals("g1") == []
    assert sg.status("g1") is SagaStatus.COMPLETED
    assert sg.verify("g1").valid


def test_an_approved_gate_re_presented_with_other_arguments_is_refused_and_compensates(
    sg: Sagacity, tools: Any, world: dict
) -> None:
    """The saved state edited to 'mallory' after alice was approved: REJECTED, compensated, nothing wired."""
    with sg.saga("g2"):
        present(tools.reserve, '{"sku":"A"}', "c1")
        pending = present(tools.wire, ALICE, "c2")
    sg.approve("g2", pending.request.journal_seq, "alice@example.com")
    with (
        sg.saga("g2", continue_existing=True) as saga,
        pytest.raises(PayloadMismatchError, match="not the approved ones"),
    ):
        present(tools.wire, MALLORY, "c2")
    assert world["wired"] == []
    assert world["released"] == ["A"]
    assert saga.result is not None
    assert saga.result.status is SagaStatus.REJECTED
    assert [s.outcome for s in saga.result.report] == ["COMPENSATED"]
    rejected = [e for e in sg.entries("g2") if e.phase == Phase.REJECTED]
    assert "differs from the approved" in rejected[0].payload
    assert sg.verify("g2").valid


def test_an_edit_supersedes_the_gate_and_needs_its_own_approval(
    sg: Sagacity, tools: Any, world: dict
) -> None:
    """An explicit edit (framework 'edit' decision / override_args) is gated anew, even if approved."""
    with sg.saga("g3"):
        first = present(tools.wire, ALICE, "c1")
    sg.approve("g3", first.request.journal_seq, "alice@example.com")
    with sg.saga("g3", continue_existing=True):
        edited = present(tools.wire, MALLORY, "c1", edited=True)
    assert isinstance(edited, CallPending)
    assert edited.request.journal_seq != first.request.journal_seq
    assert edited.request.input == MALLORY
    assert world["wired"] == []
    assert [r.input for r in sg.pending_approvals("g3")] == [MALLORY]
    sg.approve("g3", edited.request.journal_seq, "bob@example.com")
    with sg.saga("g3", continue_existing=True) as saga:
        assert present(tools.wire, MALLORY, "c1", edited=True) == "wired 100.00 to mallory"
        # the old arguments are not the call any more
        assert isinstance(present(tools.wire, ALICE, "c1"), CallRefused)
    assert world["wired"] == ["mallory"]
    assert saga.result is not None
    assert saga.result.status is SagaStatus.COMPLETED


def test_a_rejection_compensates_by_default_and_refuses_the_re_presented_call(
    sg: Sagacity, tools: Any, world: dict
) -> None:
    with sg.saga("g4"):
        present(tools.reserve, '{"sku":"A"}', "c1")
        pending = present(tools.wire, ALICE, "c2")
    decision = sg.reject("g4", pending.request.journal_seq, "bob@example.com", "wrong supplier")
    assert decision.result is not None
    assert decision.result.status is SagaStatus.REJECTED
    assert world["released"] == ["A"]
    with pytest.raises(SagaStateError), sg.saga("g4", continue_existing=True):
        pass  # the saga is closed: a run cannot go on in it
    record = find_call(sg, "g4", "c2")
    assert record is not None
    assert (record.status, record.rejected_by, record.reason, record.continues) == (
        "REJECTED",
        "bob@example.com",
        "wrong supplier",
        False,
    )


def test_on_reject_continue_tells_the_model_and_the_saga_goes_on(
    sg: Sagacity, tools: Any, world: dict
) -> None:
    with sg.saga("g5"):
        present(tools.reserve, '{"sku":"A"}', "c1")
        pending = present(tools.wire, ALICE, "c2", on_reject="continue")
    definition = f"definition={tools.wire.spec.definition_hash}"
    assert tool_entries(sg, "g5")[-1].payload == f"call_id=c2\non_reject=continue\n{definition}"
    decision = sg.reject("g5", pending.request.journal_seq, "bob@example.com", "wrong supplier")
    assert decision.result is None  # nothing compensated
    assert world["released"] == []
    with sg.saga("g5", continue_existing=True) as saga:
        told = present(tools.wire, ALICE, "c2", on_reject="continue")
        assert isinstance(told, CallRejected)
        assert "bob@example.com rejected it (wrong supplier)" in told.message
        present(tools.reserve, '{"sku":"B"}', "c3")
    assert world["wired"] == []
    assert saga.result is not None
    assert saga.result.status is SagaStatus.COMPLETED
    assert sg.pending_approvals("g5") == []
    assert sg.verify("g5").valid


def test_control_flow_closes_the_call_without_failing_the_saga(sg: Sagacity, tools: Any, world: dict) -> None:
    """A retry signal from the tool is not a failure; presented again, the call runs again."""
    calls = []

    def invoke() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise Retry("sku unknown, ask again")
        return "ok"

    spec = spec_of(tools.reserve)
    assert spec is not None
    with sg.saga("cf") as saga:
        with pytest.raises(Retry):
            journaled_call(spec, '{"sku":"A"}', "c1", invoke, control_flow=(Retry,))
        assert journaled_call(spec, '{"sku":"A"}', "c1", invoke, control_flow=(Retry,)) == "ok"
    assert saga.result is not None
    assert saga.result.status is SagaStatus.COMPLETED
    phases = [(e.phase, e.payload) for e in tool_entries(sg, "cf")]
    assert phases[1] == ("FAILED", "control flow: Retry: sku unknown, ask again")
    assert phases[-1] == ("EXECUTED", "ok")


def test_a_failing_keyed_call_compensates_and_is_not_run_again(sg: Sagacity, tools: Any, world: dict) -> None:
    spec = spec_of(tools.reserve)
    assert spec is not None

    def boom() -> str:
        raise RuntimeError("warehouse down")

    with sg.saga("ff") as saga:
        present(tools.reserve, '{"sku":"A"}', "c1")
        with pytest.raises(RuntimeError):
            journaled_call(spec, '{"sku":"B"}', "c2", boom)
        with pytest.raises(SagaStateError, match="already failed"):
            journaled_call(spec, '{"sku":"B"}', "c2", boom)
    assert saga.result is not None
    assert saga.result.status is SagaStatus.COMPENSATED
    assert world["released"] == ["A"]


def test_a_keyed_call_in_a_compensated_saga_is_refused(sg: Sagacity, tools: Any) -> None:
    with sg.saga("cl"):
        pending = present(tools.wire, ALICE, "c1")
    sg.reject("cl", pending.request.journal_seq, "bob@example.com", "no")
    with pytest.raises(SagaStateError):
        sg.run("cl", lambda: None)
    # A run that was already live when another process compensated: refused before running.
    sg2 = sg
    with sg2.saga("cl2") as saga:
        present(tools.reserve, '{"sku":"A"}', "c0")
        pending = present(tools.wire, ALICE, "c1")
        sg.reject("cl2", pending.request.journal_seq, "bob@example.com", "no")
        with pytest.raises((SagaClosedError, ApprovalRefusedError)):
            present(tools.wire, ALICE, "c1")
    assert saga.result is not None
    assert saga.result.status is SagaStatus.REJECTED


def test_an_expired_gate_is_not_run_in_band(sg: Sagacity, world: dict) -> None:
    # Long enough for the saga's end and the approval to be journaled first on any store, even
    # on a loaded machine (0.5 s was not, with the whole suite on two busy cores), short enough
    # to wait out.
    @tool(reversibility=Reversibility.IRREVERSIBLE, approval_ttl=3.0)
    def quick_wire(amount: str, to: str) -> str:
        world["wired"].append(to)
        return "wired"

    with sg.saga("ex"):
        pending = present(quick_wire, ALICE, "c1")
    sg.approve("ex", pending.request.journal_seq, "alice@example.com")
    time.sleep(3.05)  # past the expiry, which was set when the gate opened
    with pytest.raises(ApprovalRefusedError), sg.saga("ex", continue_existing=True):
        present(quick_wire, ALICE, "c1")
    assert world["wired"] == []
    assert sg.status("ex") is SagaStatus.REJECTED


def test_call_ids_are_one_line(sg: Sagacity, tools: Any) -> None:
    with sg.saga("bad"), pytest.raises(InvalidValueError):
        present(tools.reserve, '{"sku":"A"}', "a\nb")


def test_arguments_json() -> None:
    assert arguments_json('{"a": 1}') == '{"a": 1}'  # the model's JSON, verbatim
    assert arguments_json({"b": 2, "a": "é"}) == '{"b":2,"a":"é"}'
    assert arguments_json(None) == "{}"


def test_parallel_duplicates_in_threads_run_the_tool_once(sg: Sagacity, world: dict) -> None:
    """Eight threads present one call id at once: one runs it, the others get its result."""
    started = threading.Barrier(8)
    runs: list[int] = []

    @tool
    def slow(sku: str) -> str:
        runs.append(1)
        time.sleep(0.05)
        return f"R-{sku}"

    spec = spec_of(slow)
    assert spec is not None
    results: list[Any] = []
    errors: list[BaseException] = []

    def racer() -> None:
        started.wait()
        try:
            results.append(journaled_call(spec, '{"sku":"A"}', "dup", lambda: slow("A")))
        except BaseException as exc:
            errors.append(exc)

    from sagacity import in_current_saga

    with sg.saga("par"):
        threads = [threading.Thread(target=in_current_saga(racer)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    assert results == ["R-A"] * 8
    assert runs == [1]
    assert [e.phase for e in tool_entries(sg, "par")] == ["INTENT", "EXECUTED"]


def test_async_keyed_calls(sg: Sagacity, world: dict) -> None:
    """journaled_call_async with an async tool: gated, approved, run in band, replayed."""

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    async def awire(amount: str, to: str) -> str:
        world["wired"].append(to)
        return f"wired {to}"

    spec = spec_of(awire)
    assert spec is not None

    async def agent() -> Any:
        return await journaled_call_async(spec, ALICE, "a1", lambda: awire("100.00", "alice"))

    async def again() -> tuple[Any, SagaResult]:  # a later run of the same saga, continued
        async with sg.saga("as", continue_existing=True) as scope:
            value = await agent()
        assert scope.result is not None
        return value, scope.result

    first = asyncio.run(sg.run_async("as", agent))
    assert isinstance(first.value, CallPending)
    sg.approve("as", first.value.request.journal_seq, "alice@example.com")
    second_value, second = asyncio.run(again())
    third_value, _ = asyncio.run(again())
    assert second_value == third_value == "wired alice"
    assert world["wired"] == ["alice"]
    assert second.status is SagaStatus.COMPLETED
