"""Tools and agents the server tests journal, imported by name (``--import server_tools``) as a user's.

Names start with ``srv_`` so they never collide with tools other tests register. ``EFFECTS``
records what the tools and their compensations did in the outside world.
"""

from __future__ import annotations

from sagacity import CompensationContext, Reversibility, tool

EFFECTS: list[str] = []


@tool
def srv_reserve(sku: str, quantity: int) -> str:
    """Hold stock."""
    EFFECTS.append(f"reserved {sku}")
    return f"reservation {sku}x{quantity}"


@srv_reserve.compensation
def srv_release(ctx: CompensationContext) -> None:
    EFFECTS.append(f"released {ctx.args['sku']}")


@tool(reversibility=Reversibility.IRREVERSIBLE)
def srv_wire(amount: str, to: str) -> str:
    """Send money; cannot be undone, so it waits for a human."""
    EFFECTS.append(f"wired {amount} to {to}")
    return f"wire {amount}->{to}"


@tool(reversibility=Reversibility.IRREVERSIBLE, approvals=2)
def srv_payout(amount: str) -> str:
    """A payout that needs two distinct approvers (four eyes)."""
    EFFECTS.append(f"paid out {amount}")
    return f"payout {amount}"


@tool(reversibility=Reversibility.IRREVERSIBLE)
def srv_explode(reason: str) -> str:
    """An irreversible call that fails when it finally runs."""
    raise RuntimeError(f"bank said no: {reason}")


def transfer(sku: str = "SKU-1", amount: str = "100.00", to: str = "ACME") -> str:
    """Reserve stock, then ask for an irreversible wire transfer: the saga suspends."""
    srv_reserve(sku, 1)
    return srv_wire(amount, to)


def four_eyes(amount: str = "50000.00") -> str:
    """A payout gated on two approvers."""
    return srv_payout(amount)


def doomed(sku: str = "SKU-9") -> str:
    """Reserve stock, then a gated call that fails when resumed."""
    srv_reserve(sku, 1)
    return srv_explode("closed")
