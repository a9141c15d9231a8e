"""The scripted order-placing agent behind ``sagacity demo``.

Nothing here is staged: the tools are ordinary ``@tool`` functions, the agent calls them as an
agent framework would, and every decision goes through the same ``Sagacity`` calls a user makes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from sagacity import Sagacity
from sagacity.model import CompensationContext, Reversibility, SagaResult
from sagacity.tools import ToolRegistry, tool

#: The demo's tools live in their own registry so they never collide with a user's.
demo_tools = ToolRegistry()


@dataclass
class Warehouse:
    """The demo's pretend outside world, so the output can show effects and their undoing."""

    stock: dict[str, int] = field(default_factory=lambda: {"SKU-1": 10, "SKU-2": 3})
    charges: dict[str, str] = field(default_factory=dict)
    wires: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)


world = Warehouse()


@tool(registry=demo_tools)
def reserve_inventory(sku: str, quantity: int) -> str:
    """Hold stock for an order."""
    world.stock[sku] -= quantity
    world.events.append(f"reserved {quantity} x {sku}")
    return f"reservation {sku}x{quantity}"


@reserve_inventory.compensation
def release_inventory(ctx: CompensationContext) -> None:
    world.stock[ctx.args["sku"]] += ctx.args["quantity"]
    world.events.append(
        f"released {ctx.args['quantity']} x {ctx.args['sku']} (undoing seq {ctx.executed_seq})"
    )


@tool(registry=demo_tools)
def charge_card(customer: str, amount: str) -> str:
    """Charge the customer's card; the idempotency key would go to the payment API."""
    charge_id = f"ch_{customer}_{amount}"
    world.charges[charge_id] = amount
    world.events.append(f"charged {amount} to {customer}")
    return charge_id


@charge_card.compensation
def refund_card(ctx: CompensationContext) -> None:
    world.charges.pop(ctx.result, None)
    world.events.append(f"refunded {ctx.result} (undoing seq {ctx.executed_seq})")


@tool(registry=demo_tools)
def book_shipment(sku: str, address: str) -> str:
    """Book a courier; the demo's courier refuses one address."""
    if "Atlantis" in address:
        raise ConnectionError("courier API: no route to Atlantis")
    world.events.append(f"booked shipment of {sku} to {address}")
    return "shipment SHP-1"


@tool(registry=demo_tools, reversibility=Reversibility.IRREVERSIBLE)
def send_wire_transfer(amount: str, to_account: str) -> str:
    """Move money out of the company: cannot be undone, so a human approves each payload."""
    world.wires.append(f"{amount} -> {to_account}")
    world.events.append(f"WIRED {amount} to {to_account}")
    return f"wire {amount} to {to_account} sent"


@dataclass(frozen=True)
class Scene:
    """One saga of the demo: what the agent does and what a human does afterwards."""

    title: str
    saga_id: str
    agent: Callable[[], str]
    after: Callable[[Sagacity, SagaResult, Callable[[str], None]], SagaResult] | None = None


def _ok_order() -> str:
    reserve_inventory("SKU-1", 2)
    charge_card("cust-7", "59.90")
    return book_shipment("SKU-1", "12 Main St, Springfield")


def _failing_order() -> str:
    reserve_inventory("SKU-2", 1)
    charge_card("cust-8", "19.00")
    return book_shipment("SKU-2", "1 Coral Way, Atlantis")


def _supplier_payment() -> str:
    reserve_inventory("SKU-1", 5)
    # The model sees this text instead of a result: the transfer waits for a human.
    return send_wire_transfer("4200.00", "DE89 3704 0044 0532 0130 00")


def _approve_and_resume(sg: Sagacity, result: SagaResult, say: Callable[[str], None]) -> SagaResult:
    request = result.awaiting[0]
    say(f"alice@example.com approves seq {request.journal_seq}: {request.input}")
    sg.approve(request.saga_id, request.journal_seq, approver="alice@example.com")
    say("the agent resumes with the approved payload")
    return sg.resume(request.saga_id, request.journal_seq, request.input)


def _approve_then_tamper(sg: Sagacity, result: SagaResult, say: Callable[[str], None]) -> SagaResult:
    request = result.awaiting[0]
    sg.approve(request.saga_id, request.journal_seq, approver="alice@example.com")
    say(f"alice@example.com approves seq {request.journal_seq}: {request.input}")
    tampered = json.loads(request.input) | {"to_account": "XX00 ATTACKER 0000"}
    say(f"someone resumes with a different payload: {json.dumps(tampered)}")
    return sg.resume(request.saga_id, request.journal_seq, json.dumps(tampered, separators=(",", ":")))


def scenes(run_id: str) -> list[Scene]:
    """The four sagas, with saga ids unique to this run so the demo can run again on one file."""
    return [
        Scene("An order that succeeds", f"order-{run_id}-ok", _ok_order),
        Scene(
            "The courier fails: the charge and the reservation are undone",
            f"order-{run_id}-fail",
            _failing_order,
        ),
        Scene(
            "An irreversible wire transfer waits for approval, is approved and resumed",
            f"payment-{run_id}-approved",
            _supplier_payment,
            _approve_and_resume,
        ),
        Scene(
            "The payload is changed after approval: refused and compensated",
            f"payment-{run_id}-tampered",
            _supplier_payment,
            _approve_then_tamper,
        ),
    ]
