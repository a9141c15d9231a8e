"""An approved call that one proxy process is running while the same call reaches another proxy
process on the journal: the second says it is running (``[RUNNING]``, state ``running``), neither
refuses it nor calls it in doubt, and once it has ended answers with its journaled result; the
payout is made once."""

from __future__ import annotations

import json
import uuid
from functools import partial
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

from mcp_tools import SAGA_KEY, agent, http_proxy, make_setup, sagacity_cli, stdio_params, text_of

from sagacity import Sagacity, SagaStatus

pytestmark = pytest.mark.timeout(240)


def test_a_call_running_in_one_proxy_is_running_not_in_doubt_in_another(tmp_path: Path) -> None:
    setup = make_setup(tmp_path)
    saga = f"running-{uuid.uuid4().hex[:8]}"
    arguments = {"to": f"DE-{saga}", "amount": 250}
    hold = Path(str(setup.ledger.path) + ".hold")
    with http_proxy(setup, "--settle-interval", "0") as (url, _), agent(url, "auto") as first:
        assert text_of(first.call("send_payout", arguments, saga=saga)).startswith("[AWAITING_APPROVAL]")
        with Sagacity(setup.db_url) as sg:
            [request] = sg.pending_approvals(saga)
        approved = sagacity_cli(
            "approvals", "approve", saga, str(request.journal_seq), "--as", "alice@example.com",
            "--db", setup.db_url,
        )  # fmt: skip
        assert approved.returncode == 0, approved.stderr
        hold.touch()  # the payout, once sent, takes until the hold file is gone
        running = first.portal.start_task_soon(
            partial(
                first.client.call_tool,
                "send_payout",
                arguments,
                read_timeout_seconds=120,
                meta={SAGA_KEY: saga},
            )
        )
        setup.ledger.wait_for("payout-started")
        with agent(stdio_params(setup, "--settle-interval", "0"), "legacy") as second:
            again = second.call("send_payout", arguments, saga=saga)
            assert text_of(again).startswith("[RUNNING]"), text_of(again)
            assert "nothing is in doubt" in text_of(again)
            report = json.loads(text_of(second.call("sagacity_status", {}, saga=saga)))
            assert [r["state"] for r in report["requests"]] == ["running"]
            assert report["inDoubt"] == []
            assert not running.done()  # answered while the first proxy's payout still ran
            hold.unlink()
            paid = running.result(timeout=120)
            assert not paid.is_error, text_of(paid)
            replayed = second.call("send_payout", arguments, saga=saga)
            assert replayed.structured_content == paid.structured_content
    assert len(setup.ledger.events("payout")) == 1
    with Sagacity(setup.db_url) as sg:
        assert sg.status(saga) is SagaStatus.COMPLETED
