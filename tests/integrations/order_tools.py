"""The order agent's tools, shared by every framework's tests (and their child processes).

Each records its side effect as one line in ``$SAGACITY_TEST_EFFECTS``, so a test sees what
really ran in any process: ``reserve SKU``, ``release SKU``, ``charge ORDER``, ``refund ORDER``,
``wire AMOUNT TO``.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from sagacity import CompensationContext, Reversibility, tool

#: The wire the plans send, as the model writes its arguments.
ALICE = '{"amount":"4200.00","to":"alice"}'

#: One model response: the tool calls it makes (tool, arguments JSON, call id), or "done".
Step = list[tuple[str, str, str]] | str

#: The scripted models' plans that the adapters whose models speak JSON arguments share (Pydantic
#: AI's FunctionModel, the OpenAI Agents SDK's Model); each app adds its own.
PLANS: dict[str, list[Step]] = {
    "order": [
        [("reserve_inventory", '{"sku":"SKU-9","quantity":2}', "c1")],
        [("send_wire_transfer", ALICE, "c2")],
        "done",
    ],
    "async-order": [
        [("charge_card", '{"order":"O-1","amount":"49.90"}', "c1")],
        [("send_wire_transfer_async", ALICE, "c2")],
        "done",
    ],
    "failing": [
        [("reserve_inventory", '{"sku":"SKU-9","quantity":2}', "c1")],
        [("charge_card", '{"order":"O-1","amount":"49.90"}', "c2")],
        [("book_shipping", '{"order":"O-1"}', "c3")],
        "done",
    ],
    "parallel": [
        [
            ("reserve_inventory", '{"sku":"SKU-1","quantity":1}', "p1"),
            ("reserve_inventory", '{"sku":"SKU-2","quantity":1}', "p2"),
            ("charge_card", '{"order":"O-2","amount":"10.00"}', "p3"),
        ],
        "done",
    ],
}


def effect(line: str) -> None:
    """Record a side effect: O_APPEND writes of one short line from many processes never mix."""
    fd = os.open(os.environ["SAGACITY_TEST_EFFECTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def effects() -> list[str]:
    path = Path(os.environ["SAGACITY_TEST_EFFECTS"])
    return path.read_text().splitlines() if path.exists() else []


@tool
def reserve_inventory(sku: str, quantity: int) -> str:
    """Hold stock for an order."""
    effect(f"reserve {sku}")
    return f"reservation R-{sku}-{quantity}"


@reserve_inventory.compensation
def release_inventory(ctx: CompensationContext) -> None:
    effect(f"release {ctx.args['sku']}")


@tool
async def charge_card(order: str, amount: str) -> str:
    """Charge the customer (an async tool)."""
    await asyncio.sleep(0)
    effect(f"charge {order}")
    return f"charge ch_{order}"


@charge_card.compensation
async def refund_card(ctx: CompensationContext) -> None:
    effect(f"refund {ctx.args['order']}")


@tool
def book_shipping(order: str) -> str:
    """Book a courier; the courier's API is down."""
    raise RuntimeError("courier API unavailable")


@tool(reversibility=Reversibility.IRREVERSIBLE)
def send_wire_transfer(amount: str, to: str) -> str:
    """Send money to a supplier; cannot be undone."""
    effect(f"wire {amount} {to}")
    while os.environ.get("SAGACITY_TEST_WIRE_HOLD"):  # paid, not yet answered: the test kills it
        time.sleep(0.5)
    return f"wired {amount} to {to}"


@tool(reversibility=Reversibility.IRREVERSIBLE)
async def send_wire_transfer_async(amount: str, to: str) -> str:
    """The wire, as an async tool."""
    await asyncio.sleep(0)
    effect(f"wire {amount} {to}")
    return f"wired {amount} to {to}"
