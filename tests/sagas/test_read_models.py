"""The operator's read models: a pending request's approvals and readiness, a saga's detail, the doctor."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest

from sagacity import (
    CompensationContext,
    Diagnosis,
    FindingKind,
    JournaledDecision,
    PendingApproval,
    Phase,
    Reversibility,
    Sagacity,
    SagaDetail,
    SagaStatus,
    tool,
)
from sagacity._payloads import sha256_hex
from sagacity.errors import SagaNotFoundError


def _payout_saga(sg: Sagacity, saga_id: str = "payout") -> int:
    """A saga that reserved stock and waits on a payout needing two approvers; the gate's seq."""

    @tool
    def hold(sku: str) -> str:
        return sku

    @hold.compensation
    def unhold(ctx: CompensationContext) -> None:
        pass

    @tool(reversibility=Reversibility.IRREVERSIBLE, approvals=2)
    def pay(amount: str) -> str:
        return f"paid {amount}"

    def agent() -> str:
        hold("SKU-1")
        return pay("500.00")

    result = sg.run(saga_id, agent)
    assert result.status is SagaStatus.AWAITING_APPROVAL
    return result.awaiting[0].journal_seq


def _still(pending: PendingApproval) -> PendingApproval:
    """Without ``waiting``, which grows between two reads."""
    return dataclasses.replace(pending, waiting=timedelta(0))


def test_a_pending_request_counts_its_approvers_until_ready(sg: Sagacity) -> None:
    """Readiness follows the journal: one of two approvals is not enough, the second makes it ready."""
    seq = _payout_saga(sg)
    [pending] = sg.approvals()
    assert (pending.request.journal_seq, pending.approvers, pending.approvals_required) == (seq, (), 2)
    assert (pending.tool_imported, pending.matches_journal, pending.expired) == (True, True, False)
    assert pending.waiting >= timedelta(0)
    assert not pending.ready_to_resume
    sg.approve("payout", seq, "alice")
    assert not sg.approvals("payout")[0].ready_to_resume
    sg.approve("payout", seq, "bob")
    [ready] = sg.approvals("payout")
    assert ready.approvers == ("alice", "bob")
    assert ready.ready_to_resume
    assert sg.approvals("another saga") == []


def test_a_request_row_that_disagrees_with_the_journal_is_not_ready(sg: Sagacity) -> None:
    """A rewritten request row (another payload, its own matching hash) is flagged, never ready."""
    seq = _payout_saga(sg)
    sg.approve("payout", seq, "alice")
    sg.approve("payout", seq, "bob")
    [honest] = sg.pending_approvals("payout")
    forged = '{"amount":"500000.00"}'
    sg.store.put_approval_request(dataclasses.replace(honest, input=forged, input_hash=sha256_hex(forged)))
    [pending] = sg.approvals("payout")
    assert not pending.matches_journal
    assert pending.approvers == ()  # the approvals were for the journaled payload's hash
    assert not pending.ready_to_resume


def test_an_expired_request_is_not_ready(sg: Sagacity) -> None:
    """Past its expiry a fully approved request reads expired and not ready to resume."""
    seq = _payout_saga(sg)
    sg.approve("payout", seq, "alice")
    sg.approve("payout", seq, "bob")
    [request] = sg.pending_approvals("payout")
    sg.store.put_approval_request(dataclasses.replace(request, expires_at=request.created_at))
    [pending] = sg.approvals("payout")
    assert pending.expired
    assert not pending.ready_to_resume


def test_saga_detail_reads_status_journal_decisions_requests_and_doubt(sg: Sagacity) -> None:
    """One read gives what an operator needs about a saga; decisions name who decided which seq."""
    seq = _payout_saga(sg)
    sg.approve("payout", seq, "alice")
    detail = sg.saga_detail("payout")
    assert detail.status is SagaStatus.AWAITING_APPROVAL
    assert detail.entries == tuple(sg.entries("payout"))
    assert detail.verification.valid
    # seq + 1 is the run's END (it returned with the gate open), then the approval
    approval = detail.entries[seq + 1]  # seq + 2: the decision is timed by its entry
    assert detail.decisions == (
        JournaledDecision(seq + 2, Phase.APPROVED, seq, "alice", "", approval.timestamp),
    )
    assert [p.request.journal_seq for p in detail.pending] == [seq]
    assert detail.in_doubt == ()
    sg.reject("payout", seq, "bob", "too much")
    rejected = sg.saga_detail("payout")
    assert rejected.status is SagaStatus.REJECTED
    rejection = rejected.entries[seq + 2]
    assert rejected.decisions[-1] == JournaledDecision(
        seq + 3, Phase.REJECTED, seq, "bob", "too much", rejection.timestamp
    )
    assert rejected.pending == ()
    with pytest.raises(SagaNotFoundError):
        sg.saga_detail("nobody")


def test_diagnose_reports_an_in_doubt_call(sg: Sagacity) -> None:
    """``diagnose`` is the doctor: an INTENT without outcome is a finding naming saga and seq."""
    seq = sg.journal.append("crashed", "hold", Phase.INTENT, '{"sku":"A"}').seq
    diagnosis = sg.diagnose(older_than=timedelta(0))
    assert isinstance(diagnosis, Diagnosis)
    assert [(f.kind, f.saga_id, f.seq) for f in diagnosis.findings] == [
        (FindingKind.IN_DOUBT_CALL, "crashed", seq)
    ]
    assert sg.diagnose(older_than=timedelta(days=1)).recent == 1


def test_async_twins_read_the_same(sg: Sagacity) -> None:
    """``approvals_async``, ``saga_detail_async`` and ``diagnose_async`` read what the blocking ones do."""
    seq = _payout_saga(sg)
    sg.approve("payout", seq, "alice")

    async def main() -> tuple[list[PendingApproval], SagaDetail, Diagnosis]:
        return (
            await sg.approvals_async(),
            await sg.saga_detail_async("payout"),
            await sg.diagnose_async(older_than=timedelta(0)),
        )

    approvals, detail, diagnosis = asyncio.run(main())
    assert [_still(p) for p in approvals] == [_still(p) for p in sg.approvals()]
    expected = sg.saga_detail("payout")
    assert dataclasses.replace(detail, pending=()) == dataclasses.replace(expected, pending=())
    assert [_still(p) for p in detail.pending] == [_still(p) for p in expected.pending]
    assert diagnosis.findings == sg.diagnose(older_than=timedelta(0)).findings
