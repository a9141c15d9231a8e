"""The effect audit: CONFIRMED / DRIFT / UNVERIFIABLE per effect of finished sagas, journaled on
the ``sagacity:audit`` chain; a refund the service never saw is DRIFT."""

from __future__ import annotations

import json

from pay_tools import pay
from payments import Payments

from sagacity import EffectVerdict, Phase, Sagacity, SagaStatus
from sagacity.chain import idempotency_key


def test_an_undo_the_service_never_saw_is_drift_and_journaled(
    store_url: str, payments: Payments, pay_tools: object
) -> None:
    with Sagacity(store_url) as sg:
        assert sg.run("paid", pay, "paid").status is SagaStatus.COMPLETED
        assert sg.run("undone", pay, "undone", fail=True).status is SagaStatus.COMPENSATED
        # The refund is lost at the service (a provider's rollback, a bug in the undo): the
        # journal says COMPENSATED, the world does not agree.
        del payments.refunds[idempotency_key("undone", 4)]
        found = {(f.saga_id, f.tool_name): f for f in sg.audit_effects(auditor="auditor@example.com")}
        assert {k: (f.effect, f.verdict) for k, f in found.items()} == {
            ("paid", "reserve"): ("EXECUTED", EffectVerdict.UNVERIFIABLE),  # no reconciler: not "fine"
            ("paid", "send_transfer"): ("EXECUTED", EffectVerdict.CONFIRMED),
            ("undone", "reserve"): ("COMPENSATED", EffectVerdict.UNVERIFIABLE),
            ("undone", "send_transfer"): ("COMPENSATED", EffectVerdict.DRIFT),
        }
        drift = found[("undone", "send_transfer")]
        assert (drift.seq, drift.reconciler) == (4, "find_refund")
        assert drift.evidence == f"GET /refunds/{idempotency_key('undone', 4)}: 404"
        confirmed = found[("paid", "send_transfer")]
        assert confirmed.evidence == "transfer tr_1 to paid"

        # The report is journaled on its own chain, one entry per effect, that verifies.
        audit = sg.entries("sagacity:audit")
        assert sg.verify("sagacity:audit").valid
        assert {(e.tool_name, e.phase) for e in audit} == {("saga", Phase.EXECUTED)}
        lines = {json.loads(e.input)["sagaId"] + "/" + json.loads(e.input)["toolName"]: e for e in audit}
        assert json.loads(lines["undone/send_transfer"].input) == {
            "sagaId": "undone",
            "seq": 4,
            "toolName": "send_transfer",
            "effect": "COMPENSATED",
        }
        assert lines["undone/send_transfer"].payload.split("\n") == [
            "verdict=DRIFT",
            "reconciler=find_refund",
            f"evidence={drift.evidence}",
            "auditor=auditor@example.com",
        ]
        assert lines["paid/reserve"].payload.split("\n")[:2] == ["verdict=UNVERIFIABLE", "reconciler="]

        # A service that cannot answer: UNVERIFIABLE, never CONFIRMED.
        payments.mode = "down"
        [again] = [f for f in sg.audit_effects("paid") if f.tool_name == "send_transfer"]
        assert again.verdict is EffectVerdict.UNVERIFIABLE
        assert again.evidence == "error: RuntimeError: the payments service answered 503"
        assert len(sg.entries("sagacity:audit")) == len(audit) + 2
