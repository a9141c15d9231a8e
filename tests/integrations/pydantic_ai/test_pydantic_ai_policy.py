"""A guardrails policy through a framework adapter (Pydantic AI, its FunctionModel, no network):
a denied call is told to the model and journaled with its verdict; an explicitly allowed wire
runs unattended, debited from its budget."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip(
    "pydantic_ai", reason="the pydantic-ai extra is not installed: pip install '.[pydantic-ai]'"
)

from sagacity import Sagacity, SagaStatus
from sagacity.guardrails import METER_PREFIX, parse_verdict
from sagacity.testing import tool_entries

from ..conftest import load_app

HERE = Path(__file__).parent

POLICY = """\
[[rules]]
id = "one-at-a-time"
tool = "reserve_inventory"
when = "args.quantity > 1"
action = "deny"
reason = "reserve one unit at a time"

[[rules]]
id = "wires-unattended"
tool = "send_wire_transfer"
action = "allow"

[[rules]]
id = "wire-budget"
tool = "send_wire_transfer"
amount = "amount"
action = "deny"
[rules.budget]
limit = "5000.00"
window = "24h"
"""


def test_verdicts_through_the_adapter(order_tools: ModuleType, url: str, tmp_path: Path) -> None:
    app = load_app(HERE, "pai_app")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    with Sagacity(url, policy=policy, switch_poll=0) as sg:
        result = app.agent(sg, "order", saga_id="order-p").run_sync("Order 2 x SKU-9 and pay the supplier")
        assert result.output == "done: wired 4200.00 to alice"
        assert order_tools.effects() == ["wire 4200.00 alice"]  # the reservation never ran
        entries = tool_entries(sg, "order-p")
        assert [(e.tool_name, e.phase) for e in entries] == [
            ("reserve_inventory", "INTENT"),
            ("reserve_inventory", "FAILED"),
            ("send_wire_transfer", "INTENT"),
            ("send_wire_transfer", "EXECUTED"),
        ]
        assert entries[0].payload.startswith("call_id=c1\npolicy=")
        assert entries[1].payload == "denied by policy: reserve one unit at a time"
        denied, allowed = parse_verdict(entries[0].payload), parse_verdict(entries[2].payload)
        assert denied is not None
        assert allowed is not None
        assert denied.decision.rule == "one-at-a-time"
        assert allowed.decision.rule == "wires-unattended"
        assert [d.meter for d in allowed.debits] == [f"{METER_PREFIX}wire-budget:global"]
        assert sg.status("order-p") is SagaStatus.COMPLETED
        # The model was told why: the refusal is in the tool return it read.
        told = [
            str(p.content)
            for m in result.all_messages()
            for p in getattr(m, "parts", [])
            if p.part_kind == "tool-return"
        ]
        assert any("reserve one unit at a time" in t for t in told)
