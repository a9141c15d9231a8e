"""A gate decided by another process while the run that opened it is ending: the run's result
says what the journal says, never COMPLETED for a saga being compensated (found by the soak,
tests/faults/soak.py, on MariaDB).

The other process's decision is made, through the public API on the same journal file, at the
one moment that exposes the race: right before the ending run lists the saga's pending requests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sagacity import ApprovalRequest, CompensationContext, Reversibility, Sagacity, SagaStatus, tool
from sagacity.stores.sqlite import SQLiteStore


class _DecidedBeforeListing(SQLiteStore):
    """The real SQLite store; the first listing of pending requests is preceded by ``decide()``."""

    decide: object = None

    def list_approval_requests(self, saga_id: str | None = None) -> list[ApprovalRequest]:
        decide, self.decide = self.decide, None
        if callable(decide):
            decide()
        return super().list_approval_requests(saga_id)


@pytest.mark.parametrize("how", ["rejected", "row dropped, REJECTED not yet journaled"])
def test_a_gate_rejected_while_its_run_ends_is_not_reported_completed(tmp_path: Path, how: str) -> None:
    released: list[int] = []

    @tool
    def hold(sku: str) -> str:
        return f"held-{sku}"

    @hold.compensation
    def unhold(ctx: CompensationContext) -> None:
        released.append(ctx.executed_seq)

    @tool(reversibility=Reversibility.IRREVERSIBLE)
    def pay(amount: str) -> str:
        return "paid"

    url = f"sqlite:///{tmp_path}/journal.db"
    store = _DecidedBeforeListing(url)
    other = Sagacity(url)  # another process's view of the same journal

    def decide() -> None:
        [request] = other.pending_approvals("order")
        if how == "rejected":
            other.reject("order", request.journal_seq, "bob@example.com", "no")
        else:
            other.journal.store.delete_approval_request("order", request.journal_seq)

    store.decide = decide

    def agent() -> None:
        hold("A")
        pay("5")

    with Sagacity(store=store) as sg:
        result = sg.run("order", agent)
        if how == "rejected":
            assert result.status is SagaStatus.REJECTED
            assert sg.status("order") is SagaStatus.REJECTED
            assert len(released) == 1  # compensated once, by whichever process got there
        else:
            # The journal still shows the gate open: that is what the run reports.
            assert result.status is SagaStatus.AWAITING_APPROVAL
            assert sg.status("order") is SagaStatus.AWAITING_APPROVAL
            assert released == []
    other.close()
