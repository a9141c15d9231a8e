"""Reconcilers on every store: two racing in two processes settle a call once; one that raises,
times out or cannot tell leaves the call in doubt with nothing journaled."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from payments import Payments

from sagacity import Phase, Reconciliation, Sagacity, SagaStatus, tool
from sagacity.chain import idempotency_key
from sagacity.errors import InvalidValueError

WORKER = Path(__file__).parent / "reconcile_worker.py"


def _in_doubt(sg: Sagacity, saga_id: str, payments: Payments, *, sent: bool) -> int:
    """What a worker killed mid-payment leaves (``test_kill9_reconcile`` kills real ones): the
    saga's START and the payment's INTENT, and the transfer at the service if it was ``sent``."""
    sg.journal.append(saga_id, "sagacity:saga", Phase.INTENT, '{"onAbandon":"report"}', new_saga=True)
    seq = sg.journal.append(saga_id, "send_transfer", Phase.INTENT, f'{{"amount":100,"to":"{saga_id}"}}').seq
    if sent:
        key = idempotency_key(saga_id, seq)
        payments.transfers[key] = {"id": "tr_77", "amount": 100, "to": saga_id}
    return seq


def _decided(sg: Sagacity, saga_id: str) -> list[tuple[int, str]]:
    """The seq and resolution of each decision entry of the saga."""
    found = []
    for e in sg.entries(saga_id):
        if e.tool_name == "approval-gate":
            decided = json.loads(e.input)
            found.append((decided["seq"], decided["resolution"]))
    return found


def test_two_reconcilers_racing_in_two_processes_settle_each_call_once(
    durable_url: str, payments: Payments, pay_tools: object
) -> None:
    with Sagacity(durable_url) as sg:
        sent = _in_doubt(sg, "race-sent", payments, sent=True)
        lost = _in_doubt(sg, "race-lost", payments, sent=False)
    payments.mode = "pair"  # each look-up waits for the other process's: both ask before either decides
    workers = [
        subprocess.Popen([sys.executable, str(WORKER), durable_url], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [w.communicate(timeout=120)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0]
    answers = sorted(tuple(json.loads(line).values()) for out in outputs for line in out.splitlines())
    # Every call was asked about by both; exactly one of them journaled each answer.
    assert sorted((a[0], a[3]) for a in answers) == sorted(
        [("race-lost", True), ("race-lost", False), ("race-sent", True), ("race-sent", False)]
    )
    assert {a[2] for a in answers if not a[3]} == {"settled_elsewhere"}
    with Sagacity(durable_url) as sg:
        for saga_id, seq, outcome in (("race-sent", sent, Phase.EXECUTED), ("race-lost", lost, Phase.FAILED)):
            assert [d for d, _ in _decided(sg, saga_id)] == [seq]
            entries = sg.entries(saga_id)
            assert [e.phase for e in entries if e.tool_name == "approval-gate"] == [
                Phase.APPROVED if outcome == Phase.EXECUTED else Phase.REJECTED
            ]
            assert [e.phase for e in entries if e.tool_name == "send_transfer"] == [Phase.INTENT, outcome]
            assert sg.verify(saga_id).valid
        assert sg.status("race-sent") is SagaStatus.ABANDONED
        assert sg.status("race-lost") is SagaStatus.COMPENSATED  # nothing ran before it: nothing to undo
        assert sg.in_doubt() == []
    assert payments.lookups == 4


@pytest.mark.parametrize("mode", ["down", "hang"])
def test_a_reconciler_that_raises_or_times_out_leaves_the_call_in_doubt(
    store_url: str, payments: Payments, pay_tools: object, mode: str
) -> None:
    with Sagacity(store_url) as sg:
        seq = _in_doubt(sg, "doubt-1", payments, sent=True)
        before = sg.entries("doubt-1")
        payments.mode = mode
        [asked] = sg.reconcile(timeout=0.5)
        assert (asked.seq, asked.reconciler, asked.settled) == (seq, "find_transfer", False)
        if mode == "down":
            assert asked.answer == "error"
            assert asked.evidence == "RuntimeError: the payments service answered 503"
        else:
            assert (asked.answer, asked.evidence) == ("timeout", "no answer within 0.5 s")
        assert sg.entries("doubt-1") == before  # nothing journaled, nothing guessed
        assert [d.seq for d in sg.in_doubt("doubt-1")] == [seq]
        payments.release()
        payments.mode = "ok"
        [asked] = sg.reconcile()
        assert (asked.answer, asked.outcome) == ("happened", "EXECUTED")


def test_an_unknown_answer_or_a_wrong_one_leaves_the_call_in_doubt(store_url: str) -> None:
    from sagacity.tools import registry

    with registry.isolated(), Sagacity(store_url) as sg:

        @tool
        def notify(to: str) -> str:
            return to

        answers = iter([Reconciliation.unknown("the mail log is rotated"), "yes it did"])

        @notify.reconcile(name="mail-log")
        def look(call: object) -> object:
            return next(answers)

        seq = sg.journal.append("mail-1", "notify", Phase.INTENT, '{"to":"bob"}').seq
        for bad in (0, -1.5, float("nan"), "30"):
            with pytest.raises(InvalidValueError, match="timeout must be a number of seconds above 0"):
                sg.reconcile(timeout=bad)  # type: ignore[arg-type]
        [first] = sg.reconcile()
        assert (first.answer, first.reconciler, first.evidence) == (
            "unknown",
            "mail-log",
            "the mail log is rotated",
        )
        [second] = sg.reconcile()
        assert second.answer == "error"
        assert "not Reconciliation" in second.evidence
        assert [e.seq for e in sg.entries("mail-1")] == [seq]


def test_a_bad_reconciler_is_refused_and_evidence_stays_one_line() -> None:
    """A reconciler that is not callable, or a name of more than one line, is refused when it is
    declared; evidence holding a line break is journaled escaped, one line, and reads back whole."""
    from sagacity.errors import ToolRegistrationError
    from sagacity.tools import registry

    with registry.isolated(), Sagacity("memory://") as sg:

        @tool
        def ship(parcel: str) -> str:
            return parcel

        with pytest.raises(ToolRegistrationError, match="must be callable"):
            ship.reconcile(42)  # type: ignore[call-overload]
        with pytest.raises(ToolRegistrationError, match="one non-empty line"):
            ship.reconcile(name="carrier\napprover=ceo")(lambda call: None)

        @ship.reconcile(name="carrier")
        def tracked(call: object) -> Reconciliation:
            return Reconciliation.happened("parcel P-1\napprover=ceo@example.com", result="P-1")

        sg.journal.append("ship-1", "ship", Phase.INTENT, '{"parcel":"P-1"}')
        [done] = sg.reconcile()
        assert done.settled
        decision = next(e for e in sg.entries("ship-1") if e.tool_name == "approval-gate")
        lines = decision.payload.split("\n")
        assert lines[0] == "reconciler=carrier"
        assert len(lines) == 2
        assert lines[1].startswith("evidence=sagacity-escaped:")
        assert sg.view("ship-1").decisions[0].reason == "parcel P-1\napprover=ceo@example.com"
