"""The gateway leaves a call in doubt (its upstream was killed mid-call): the saga's END is not
written over that open call, so once a person settles it the saga reads ABANDONED (the agent
never finished), not COMPLETED."""

from __future__ import annotations

import os
import signal
import uuid
from functools import partial
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

from mcp_tools import SAGA_KEY, agent, make_setup, stdio_params, text_of

from sagacity import Phase, Sagacity, SagaStatus

pytestmark = pytest.mark.timeout(240)


def test_no_end_after_a_call_left_in_doubt_so_a_settled_saga_reads_abandoned(tmp_path: Path) -> None:
    setup = make_setup(tmp_path)
    saga = f"doubt-end-{uuid.uuid4().hex[:8]}"
    with agent(stdio_params(setup), "legacy") as a:
        assert not a.call("charge", {"customer": "c-1", "amount": 3}, saga=saga).is_error
        future = a.portal.start_task_soon(
            partial(
                a.client.call_tool,
                "settle",
                {"batch": "b-1"},
                read_timeout_seconds=120,
                meta={SAGA_KEY: saga},
            )
        )
        [started] = setup.ledger.wait_for("settle-started")
        os.kill(started["pid"], signal.SIGKILL)
        answer = future.result(timeout=120)
        assert text_of(answer).startswith("[OUTCOME UNKNOWN]")
        with Sagacity(setup.db_url) as sg:
            entries = sg.entries(saga)
            [doubt] = sg.in_doubt(saga)
            # Nothing after the open INTENT: no END says the saga completed around it.
            assert entries[-1].seq == doubt.seq
            assert sg.status(saga) is SagaStatus.IN_DOUBT
            sg.resolve_in_doubt(saga, doubt.seq, happened=True, resolver="ops@example.com")
            assert sg.status(saga) is SagaStatus.ABANDONED
            ends = [
                e for e in sg.entries(saga) if e.tool_name == "sagacity:saga" and e.phase == Phase.EXECUTED
            ]
            assert [e.seq for e in ends if e.seq > doubt.seq] == []
            assert sg.verify(saga).valid
