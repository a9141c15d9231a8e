"""The gateway's reconciler: an upstream read tool named in the policy (``reconcile``) settles, at
the next proxy's start, the calls a killed upstream left in doubt; the rest stays for a person."""

from __future__ import annotations

import os
import signal
from functools import partial
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

from mcp_tools import POLICY, SAGA_KEY, agent, make_setup, stdio_params, text_of, wait_until

from sagacity import Phase, Sagacity, SagaStatus

pytestmark = pytest.mark.timeout(240)

RECONCILED = POLICY.replace(
    "[tools.create_ticket]",
    'reconcile = { tool = "find_charge", arguments = { reference = "{args.reference}" }, '
    'missing = "no charge with reference" }\n\n[tools.create_ticket]',
    1,
)


def test_a_restarted_proxy_settles_what_the_upstream_knows(tmp_path: Path) -> None:
    setup = make_setup(tmp_path, policy=RECONCILED)
    with agent(stdio_params(setup), "legacy") as a:
        first = a.call("charge", {"customer": "c-0", "amount": 2, "reference": "r-0"}, saga="rec-lost")
        assert not first.is_error
        pending = [
            a.portal.start_task_soon(
                partial(
                    a.client.call_tool,
                    "charge",
                    {"customer": "c-1", "amount": 3, "reference": reference},
                    read_timeout_seconds=120,
                    meta={SAGA_KEY: saga},
                )
            )
            for saga, reference in (("rec-done", "hang-after-1"), ("rec-lost", "hang-before-1"))
        ]
        [held] = setup.ledger.wait_for("charge-held")
        setup.ledger.wait_for("charge-started")
        os.kill(held["pid"], signal.SIGKILL)  # the upstream dies with both calls in flight
        for future in pending:
            assert text_of(future.result(timeout=120)).startswith("[OUTCOME UNKNOWN]")
    with Sagacity(setup.db_url) as sg:
        assert {d.saga_id for d in sg.in_doubt()} == {"rec-done", "rec-lost"}

    # The next proxy asks the upstream's find_charge about each call as it starts.
    with agent(stdio_params(setup), "legacy") as a, Sagacity(setup.db_url) as sg:
        wait_until(
            lambda: not sg.in_doubt() and sg.status("rec-lost") is SagaStatus.COMPENSATED, 60, "settled"
        )
        [charged] = [e for e in setup.ledger.events("charge") if e["reference"] == "hang-after-1"]
        done = sg.entries("rec-done")
        decision, executed = done[-2:]
        assert (decision.tool_name, decision.phase) == ("approval-gate", Phase.APPROVED)
        assert decision.payload.startswith("reconciler=find_charge\nevidence=find_charge: ")
        assert charged["charge_id"] in decision.payload
        assert (executed.tool_name, executed.phase) == ("charge", Phase.EXECUTED)
        assert sg.status("rec-done") is SagaStatus.ABANDONED
        # The call that never reached the upstream: FAILED, and its saga undid its first charge.
        lost = [e for e in sg.entries("rec-lost") if e.tool_name == "approval-gate"]
        assert [e.payload for e in lost] == [
            "reconciler=find_charge\nevidence=find_charge: no charge with reference hang-before-1"
        ]
        [refunded] = setup.ledger.events("refund")
        assert refunded["charge_id"] == first.structured_content["charge_id"]
        assert sg.verify("rec-done").valid
        assert sg.verify("rec-lost").valid
        # The look-up's answer is the call's journaled result: its undo finds the charge id in it.
        assert not a.call(
            "sagacity_rollback", {"reason": "undo the settled charge"}, saga="rec-done"
        ).is_error
        assert charged["charge_id"] in {e["charge_id"] for e in setup.ledger.events("refund")}
