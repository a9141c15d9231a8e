"""Approval gates (SPEC §6): gate, approve, reject, resume; fail-closed, at most once, payload-bound."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest

from sagacity import (
    ApprovalRequest,
    CompensationContext,
    Phase,
    Reversibility,
    Sagacity,
    SagaStatus,
    tool,
)
from sagacity.errors import (
    ApprovalNotFoundError,
    ApprovalRefusedError,
    InvalidValueError,
    PayloadMismatchError,
    SagaRunningElsewhereError,
    UnknownToolError,
)
from sagacity.tools import Tool

Wire = Tool[[str, str], str]


@pytest.fixture
def world() -> dict[str, list[str]]:
    return {"wired": [], "released": []}


@pytest.fixture
def wire(world: dict[str, list[str]]) -> Wire:
    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def send_wire(amount: str, to: str) -> str:
        world["wired"].append(f"{amount}->{to}")
        return f"wired {amount}"

    return send_wire


@pytest.fixture
def reserve(world: dict[str, list[str]]) -> Tool[[str], str]:
    @tool
    def reserve(sku: str) -> str:
        return sku

    @reserve.compensation
    def release(ctx: CompensationContext) -> None:
        world["released"].append(ctx.result)

    return reserve


def gated(sg: Sagacity, saga_id: str, wire: Wire, reserve: Tool[[str], str]) -> ApprovalRequest:
    def agent() -> str:
        reserve("SKU-1")
        return wire("100.00", "acct-1")

    result = sg.run(saga_id, agent)
    assert result.status is SagaStatus.AWAITING_APPROVAL
    assert len(result.awaiting) == 1
    return result.awaiting[0]


def test_gate_suspends_without_running(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], world: dict
) -> None:
    """An irreversible call journals AWAITING_APPROVAL with its input, stores the hash, tells the model."""
    result = sg.run("g", lambda: (reserve("SKU-1"), wire("100.00", "acct-1"))[1])
    assert result.value.startswith("[AWAITING_APPROVAL]")
    assert "human approval" in result.value
    assert world["wired"] == []
    gate, end = sg.entries("g")[-2:]
    assert (end.tool_name, end.payload) == ("sagacity:saga", '{"status":"AWAITING_APPROVAL"}')
    assert (gate.phase, gate.tool_name, gate.input) == (
        "AWAITING_APPROVAL",
        "send_wire",
        '{"amount":"100.00","to":"acct-1"}',
    )
    [request] = sg.pending_approvals("g")
    assert request.journal_seq == gate.seq
    import hashlib

    assert request.input_hash == hashlib.sha256(gate.input.encode()).hexdigest()
    assert request.expires_at is not None
    assert request.expires_at - request.created_at == timedelta(hours=24)
    assert sg.status("g") is SagaStatus.AWAITING_APPROVAL


def test_approve_then_resume_executes_once(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], world: dict
) -> None:
    """Approving journals APPROVED by the named person; resume executes the approved payload."""
    request = gated(sg, "ok", wire, reserve)
    decision = sg.approve("ok", request.journal_seq, approver="alice@example.com")
    assert decision.approved
    assert decision.approver == "alice@example.com"
    assert world["wired"] == []  # approving is not executing
    result = sg.resume("ok", request.journal_seq, request.input)
    assert result.status is SagaStatus.COMPLETED
    assert result.value == "wired 100.00"
    assert world["wired"] == ["100.00->acct-1"]
    entries = sg.entries("ok")
    approved = next(e for e in entries if e.phase == Phase.APPROVED)
    assert approved.tool_name == "approval-gate"
    assert json.loads(approved.input) == {"seq": request.journal_seq, "inputHash": request.input_hash}
    assert approved.payload == "approver=alice@example.com"
    assert [(e.tool_name, e.phase) for e in entries[-3:]] == [
        ("send_wire", "INTENT"),
        ("send_wire", "EXECUTED"),
        ("sagacity:saga", "EXECUTED"),  # the resumed run ended the saga
    ]
    assert entries[-3].payload == f"resumes seq={request.journal_seq}"
    assert sg.pending_approvals("ok") == []
    assert sg.status("ok") is SagaStatus.COMPLETED
    with pytest.raises(ApprovalNotFoundError):
        sg.resume("ok", request.journal_seq, request.input)
    assert world["wired"] == ["100.00->acct-1"]


def test_resume_without_approval_in_the_journal_is_refused(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], world: dict
) -> None:
    """The request table alone never authorises: without APPROVED in the journal, resume refuses."""
    request = gated(sg, "na", wire, reserve)
    with pytest.raises(ApprovalRefusedError, match="no approval"):
        sg.resume("na", request.journal_seq, request.input)
    assert world["wired"] == []
    assert sg.pending_approvals("na") == [request]  # nothing consumed


def test_rerequest_with_another_payload_inherits_nothing(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], world: dict
) -> None:
    """A request replaced with a new payload for the same seq needs a new approval of that payload."""
    request = gated(sg, "rr", wire, reserve)
    sg.approve("rr", request.journal_seq, "alice")
    other = '{"amount":"999.00","to":"acct-9"}'
    import hashlib

    sg.store.put_approval_request(
        ApprovalRequest(
            "rr",
            request.journal_seq,
            "send_wire",
            other,
            hashlib.sha256(other.encode()).hexdigest(),
            request.created_at,
            request.expires_at,
        )
    )
    assert len(sg.pending_approvals("rr")) == 1
    with pytest.raises(ApprovalRefusedError):
        sg.resume("rr", request.journal_seq, other)
    assert world["wired"] == []


def test_stale_payload_is_rejected_and_compensated(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], world: dict
) -> None:
    """A payload that differs from the approved one journals REJECTED, compensates, never runs the tool."""
    request = gated(sg, "stale", wire, reserve)
    sg.approve("stale", request.journal_seq, "alice")
    result = sg.resume("stale", request.journal_seq, '{"amount":"100.00","to":"attacker"}')
    assert result.status is SagaStatus.REJECTED
    assert isinstance(result.error, PayloadMismatchError)
    assert world["wired"] == []
    assert world["released"] == ["SKU-1"]
    rejected = next(e for e in sg.entries("stale") if e.phase == Phase.REJECTED)
    assert "differs from the approved" in rejected.payload
    assert sg.status("stale") is SagaStatus.REJECTED
    with pytest.raises(ApprovalNotFoundError):
        sg.resume("stale", request.journal_seq, request.input)


def test_reject_compensates_once(sg: Sagacity, wire: Wire, reserve: Tool[[str], str], world: dict) -> None:
    """Reject journals REJECTED with approver and reason, drops the request, compensates — once."""
    request = gated(sg, "rej", wire, reserve)
    decision = sg.reject("rej", request.journal_seq, approver="bob", reason="too large")
    assert not decision.approved
    assert decision.result is not None
    assert decision.result.status is SagaStatus.REJECTED
    assert world["released"] == ["SKU-1"]
    rejected = next(e for e in sg.entries("rej") if e.phase == Phase.REJECTED)
    assert rejected.payload == "approver=bob\nreason=too large"
    assert sg.pending_approvals("rej") == []
    for decide in (
        lambda: sg.reject("rej", request.journal_seq, "bob", "again"),
        lambda: sg.approve("rej", request.journal_seq, "carol"),
    ):
        with pytest.raises(ApprovalNotFoundError):
            decide()
    assert world["released"] == ["SKU-1"]
    assert sg.status("rej") is SagaStatus.REJECTED


def test_deciding_unknown_or_non_gate_seqs_is_an_error(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str]
) -> None:
    """Unknown sagas and seqs are not found; a request for a seq that is no gate is refused."""
    request = gated(sg, "u", wire, reserve)
    with pytest.raises(ApprovalNotFoundError):
        sg.approve("no-such-saga", 1, "alice")
    with pytest.raises(ApprovalNotFoundError):
        sg.approve("u", 99, "alice")
    sg.store.put_approval_request(
        ApprovalRequest("u", 1, "send_wire", request.input, request.input_hash, request.created_at, None)
    )
    with pytest.raises(ApprovalRefusedError, match="not an approval gate"):
        sg.approve("u", 1, "alice")
    with pytest.raises(InvalidValueError):
        sg.approve("u", request.journal_seq, "")
    with pytest.raises(InvalidValueError):
        sg.approve("u", request.journal_seq, "eve\nroot")


def test_approving_twice_is_an_error(sg: Sagacity, wire: Wire, reserve: Tool[[str], str]) -> None:
    """A second approval of an already approved gate is refused, not recorded."""
    request = gated(sg, "twice", wire, reserve)
    sg.approve("twice", request.journal_seq, "alice")
    with pytest.raises(ApprovalRefusedError, match="already approved"):
        sg.approve("twice", request.journal_seq, "alice")
    with pytest.raises(ApprovalRefusedError, match="already approved"):
        sg.approve("twice", request.journal_seq, "bob")
    assert sum(e.phase == Phase.APPROVED for e in sg.entries("twice")) == 1


def test_failure_while_pending_voids_the_request(sg: Sagacity, wire: Wire, reserve: Tool[[str], str]) -> None:
    """A saga that fails and compensates while an approval is pending cannot be approved or resumed later."""

    def agent() -> None:
        reserve("SKU-1")
        wire("5.00", "acct")
        raise RuntimeError("the model crashed after asking")

    result = sg.run("void", agent)
    assert result.status is SagaStatus.COMPENSATED
    assert sg.pending_approvals("void") == []
    gate_seq = next(e.seq for e in sg.entries("void") if e.phase == Phase.AWAITING_APPROVAL)
    rejected = next(e for e in sg.entries("void") if e.phase == Phase.REJECTED)
    assert rejected.payload.startswith("reason=void")
    with pytest.raises(ApprovalNotFoundError):
        sg.approve("void", gate_seq, "alice")


def test_deciding_on_a_compensated_saga_is_an_error(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str]
) -> None:
    """Even if a stale request row survived, a compensated saga's gate cannot be approved: the
    journal says the request was consumed, as it says to a decision that lost a race."""
    request = gated(sg, "comp", wire, reserve)
    sg.reject("comp", request.journal_seq, "bob", "no")
    sg.store.put_approval_request(request)  # a leftover row, e.g. written by another implementation
    with pytest.raises(ApprovalNotFoundError, match="already rejected by bob"):
        sg.approve("comp", request.journal_seq, "alice")


def test_racing_resumes_execute_the_tool_once(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], world: dict
) -> None:
    """Eight threads resuming the same approved gate: exactly one executes; the rest find the
    request consumed, or the winner's call still running (``SagaRunningElsewhereError``)."""
    request = gated(sg, "race", wire, reserve)
    sg.approve("race", request.journal_seq, "alice")
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def resume() -> None:
        barrier.wait()
        try:
            outcomes.append(sg.resume("race", request.journal_seq, request.input).status)
        except (ApprovalNotFoundError, ApprovalRefusedError, SagaRunningElsewhereError) as exc:
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=resume) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert world["wired"] == ["100.00->acct-1"]
    assert outcomes.count(SagaStatus.COMPLETED) == 1
    assert len(outcomes) == 8
    assert sum(e.phase == Phase.EXECUTED and e.tool_name == "send_wire" for e in sg.entries("race")) == 1


def test_expired_request_cannot_be_approved_and_compensates(
    sg: Sagacity, reserve: Tool[[str], str], world: dict
) -> None:
    """A request past its TTL is refused; expiring journals REJECTED saying it expired, and compensates."""

    @tool(reversibility=Reversibility.IRREVERSIBLE, approval_ttl=timedelta(0))
    def instant_wire(amount: str) -> str:
        return amount

    sg.run("exp", lambda: (reserve("SKU-1"), instant_wire("1"))[1])
    [request] = sg.pending_approvals("exp")
    with pytest.raises(ApprovalRefusedError, match="expired"):
        sg.approve("exp", request.journal_seq, "alice")
    rejected = next(e for e in sg.entries("exp") if e.phase == Phase.REJECTED)
    assert "expired" in rejected.payload
    assert world["released"] == ["SKU-1"]
    assert sg.status("exp") is SagaStatus.REJECTED


def test_expiry_sweep_and_default_ttl(
    store_url: str, reserve: Tool[[str], str], wire: Wire, world: dict
) -> None:
    """expire_approvals() expires what is due under the Sagacity default TTL and leaves the rest."""
    with Sagacity(store_url, approval_ttl=0) as sg:
        request = gated(sg, "due", wire, reserve)
        assert request.expires_at == request.created_at
        expired = sg.expire_approvals()
        assert [r.journal_seq for r in expired] == [request.journal_seq]
        assert sg.status("due") is SagaStatus.REJECTED
    with Sagacity(store_url, approval_ttl=None) as sg:
        request = gated(sg, "never", wire, reserve)
        assert request.expires_at is None
        assert sg.expire_approvals() == []


def test_four_eyes_needs_distinct_approvers(sg: Sagacity, reserve: Tool[[str], str], world: dict) -> None:
    """A tool needing two approvals resumes only after two different people approved the payload."""

    @tool(reversibility=Reversibility.IRREVERSIBLE, approvals=2)
    def big_wire(amount: str) -> str:
        world["wired"].append(amount)
        return amount

    sg.run("4e", lambda: big_wire("1000000"))
    [request] = sg.pending_approvals("4e")
    sg.approve("4e", request.journal_seq, "alice")
    with pytest.raises(ApprovalRefusedError, match="1 of 2"):
        sg.resume("4e", request.journal_seq, request.input)
    with pytest.raises(ApprovalRefusedError, match="already approved by 'alice'"):
        sg.approve("4e", request.journal_seq, "alice")
    sg.approve("4e", request.journal_seq, "bob")
    assert sg.resume("4e", request.journal_seq, request.input).status is SagaStatus.COMPLETED
    assert world["wired"] == ["1000000"]


def test_resume_needs_the_tool_imported(sg: Sagacity, wire: Wire, reserve: Tool[[str], str]) -> None:
    """A resume in a process that has not imported the tool fails clearly and consumes nothing."""
    from sagacity.tools import registry

    request = gated(sg, "imp", wire, reserve)
    sg.approve("imp", request.journal_seq, "alice")
    registry.unregister("send_wire")
    with pytest.raises(UnknownToolError, match="import the module"):
        sg.resume("imp", request.journal_seq, request.input)
    assert len(sg.pending_approvals("imp")) == 1


def test_failed_resumed_tool_compensates(sg: Sagacity, reserve: Tool[[str], str], world: dict) -> None:
    """When the resumed tool itself fails, the saga compensates the steps before it."""

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def bad_wire(amount: str) -> str:
        raise ConnectionError("bank offline")

    sg.run("bad", lambda: (reserve("SKU-1"), bad_wire("1"))[1])
    [request] = sg.pending_approvals("bad")
    sg.approve("bad", request.journal_seq, "alice")
    result = sg.resume("bad", request.journal_seq, request.input)
    assert result.status is SagaStatus.COMPENSATED
    assert isinstance(result.error, ConnectionError)
    assert world["released"] == ["SKU-1"]


def test_resume_rejects_a_non_string_payload(sg: Sagacity, wire: Wire, reserve: Tool[[str], str]) -> None:
    """The payload must be the input JSON as a string; anything else is refused before any check."""
    request = gated(sg, "typ", wire, reserve)
    with pytest.raises(InvalidValueError, match="str"):
        sg.resume("typ", request.journal_seq, {"amount": "100.00"})  # type: ignore[arg-type]


def test_a_forged_request_row_is_never_approved_or_run(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], world: dict
) -> None:
    """A request row rewritten with another payload and a matching hash is refused: the gate entry rules."""
    import hashlib

    request = gated(sg, "forged", wire, reserve)
    forged = '{"amount":"9999.00","to":"MALLORY"}'
    sg.store.delete_approval_request("forged", request.journal_seq)
    sg.store.put_approval_request(
        ApprovalRequest(
            "forged",
            request.journal_seq,
            "send_wire",
            forged,
            hashlib.sha256(forged.encode()).hexdigest(),
            request.created_at,
        )
    )
    with pytest.raises(ApprovalRefusedError, match="differs from the journaled gate"):
        sg.approve("forged", request.journal_seq, "alice")
    with pytest.raises(ApprovalRefusedError, match="differs from the journaled gate"):
        sg.resume("forged", request.journal_seq, forged)
    assert world["wired"] == []
    assert not any(e.phase == Phase.APPROVED for e in sg.entries("forged"))


def test_a_gate_stranded_without_its_request_can_still_be_rejected(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], world: dict
) -> None:
    """If a resume died after consuming the request but before its INTENT, the open gate can be rejected."""
    request = gated(sg, "stranded", wire, reserve)
    sg.approve("stranded", request.journal_seq, "alice")
    sg.store.delete_approval_request("stranded", request.journal_seq)  # what the crashed resume did
    decision = sg.reject("stranded", request.journal_seq, "ops", "resume crashed before running")
    assert decision.result is not None
    assert decision.result.status is SagaStatus.REJECTED
    assert world["released"] == ["SKU-1"]
    with pytest.raises(ApprovalNotFoundError):
        sg.reject("stranded", request.journal_seq, "ops", "again")


def test_reject_with_a_tool_not_imported_writes_nothing(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], world: dict
) -> None:
    """Rejecting when a step's tool is not imported fails before any decision is journaled."""
    from sagacity.tools import registry

    request = gated(sg, "noimport", wire, reserve)
    before = len(sg.entries("noimport"))
    registry.unregister("reserve")
    with pytest.raises(UnknownToolError):
        sg.reject("noimport", request.journal_seq, "bob", "no")
    assert len(sg.entries("noimport")) == before
    assert sg.status("noimport") is SagaStatus.AWAITING_APPROVAL
    assert len(sg.pending_approvals("noimport")) == 1


def test_expiry_sweep_skips_sagas_whose_tools_are_missing(store_url: str, wire: Wire, world: dict) -> None:
    """expire_approvals expires what it can and names what it could not, leaving that untouched."""
    from sagacity.tools import registry

    @tool
    def hold(sku: str) -> str:
        return sku

    @tool
    def other_hold(sku: str) -> str:
        return sku

    with Sagacity(store_url, approval_ttl=0) as sg:
        sg.run("a", lambda: (hold("x"), wire("1", "a"))[1])
        sg.run("b", lambda: (other_hold("y"), wire("2", "b"))[1])
        registry.unregister("other_hold")
        with pytest.raises(UnknownToolError, match="'b'"):
            sg.expire_approvals()
        assert sg.status("a") is SagaStatus.REJECTED  # an expiry is a rejection
        assert sg.status("b") is SagaStatus.AWAITING_APPROVAL


def test_an_unencodable_payload_is_refused_before_anything_is_consumed(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], world: dict
) -> None:
    """A payload that is not valid text (a lone surrogate) is refused and the approved request survives."""
    request = gated(sg, "surrogate", wire, reserve)
    sg.approve("surrogate", request.journal_seq, "alice")
    with pytest.raises(InvalidValueError, match="payload"):
        sg.resume("surrogate", request.journal_seq, "\ud800")
    assert sg.resume("surrogate", request.journal_seq, request.input).status is SagaStatus.COMPLETED
    assert world["wired"] == ["100.00->acct-1"]


def test_four_eyes_approvals_can_be_recorded_before_the_tool_is_imported(
    sg: Sagacity, reserve: Tool[[str], str], world: dict
) -> None:
    """An approver process that has not imported a four-eyes tool still records each distinct approval."""
    from sagacity.tools import registry

    @tool(reversibility=Reversibility.IRREVERSIBLE, approvals=2)
    def dual_wire(amount: str) -> str:
        world["wired"].append(amount)
        return amount

    sg.run("4e-noimport", lambda: dual_wire("7"))
    [request] = sg.pending_approvals("4e-noimport")
    spec = registry.get("dual_wire")
    registry.unregister("dual_wire")
    sg.approve("4e-noimport", request.journal_seq, "alice")
    sg.approve("4e-noimport", request.journal_seq, "bob")
    with pytest.raises(ApprovalRefusedError, match="already approved by 'bob'"):
        sg.approve("4e-noimport", request.journal_seq, "bob")
    registry.register(spec)
    assert sg.resume("4e-noimport", request.journal_seq, request.input).status is SagaStatus.COMPLETED
    assert world["wired"] == ["7"]


def test_resume_journals_who_asked_for_the_execution(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str]
) -> None:
    """resumed_by is written into the resumed call's INTENT, and the saga still reads as resumed."""
    request = gated(sg, "by", wire, reserve)
    sg.approve("by", request.journal_seq, "alice")
    with pytest.raises(InvalidValueError):
        sg.resume("by", request.journal_seq, request.input, resumed_by="")
    result = sg.resume("by", request.journal_seq, request.input, resumed_by="ops@example.com")
    assert result.status is SagaStatus.COMPLETED
    intent = next(e for e in sg.entries("by") if e.payload.startswith("resumes"))
    assert intent.payload == f"resumes seq={request.journal_seq} by=ops@example.com"
    assert sg.status("by") is SagaStatus.COMPLETED
    with pytest.raises(ApprovalNotFoundError):
        sg.resume("by", request.journal_seq, request.input)


def test_resume_refuses_before_consuming_when_compensation_would_need_a_missing_tool(
    sg: Sagacity, wire: Wire, reserve: Tool[[str], str], world: dict
) -> None:
    """A resume that might have to compensate refuses while a step's tool is not imported, writing nothing."""
    from sagacity.tools import registry

    request = gated(sg, "need-tools", wire, reserve)
    sg.approve("need-tools", request.journal_seq, "alice")
    before = sg.entries("need-tools")
    registry.unregister("reserve")
    with pytest.raises(UnknownToolError, match="'reserve'"):
        sg.resume("need-tools", request.journal_seq, request.input)
    assert sg.entries("need-tools") == before
    assert len(sg.pending_approvals("need-tools")) == 1
    assert world["wired"] == []
