"""The MCP gateway warns, as it starts, of a guardrails rule naming a tool its upstream does not
list (a typo would switch the rule off), with the names it does list; the proxy still serves."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

from mcp_tools import POLICY, http_proxy, make_setup, wait_until

pytestmark = pytest.mark.timeout(240)

TYPO = POLICY + '\n[[rules]]\nid = "big-payouts"\ntool = "send_payuot"\naction = "hold"\n'


def test_the_gateway_warns_of_a_rule_naming_a_tool_the_upstream_lacks(tmp_path: Path) -> None:
    setup = make_setup(tmp_path, policy=TYPO)
    with http_proxy(setup) as (_url, port):
        log = setup.tmp / f"proxy-{port}.log"
        # The port is bound before the upstream is listed: wait for the gateway to be open.
        wait_until(
            lambda: "Sagacity MCP proxy:" in log.read_text(encoding="utf-8"), what="the proxy's banner"
        )
        said = log.read_text(encoding="utf-8")
    assert "rule 'big-payouts' names tool 'send_payuot', which no known tool is called" in said
    assert "did you mean 'send_payout'?" in said
    assert (
        "(known: charge, close_ticket, create_ticket, find_charge, get_balance, refund, send_payout, settle)"
        in said
    )
