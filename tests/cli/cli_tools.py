"""Tools and agents the CLI tests journal; imported by name (``--import cli_tools``) like a user's module.

Names start with ``cli_`` so they never collide with tools other tests register. ``EFFECTS``
records what the tools and their compensations did in the outside world.
"""

from __future__ import annotations

from sagacity import CompensationContext, Reversibility, tool

EFFECTS: list[str] = []


@tool
def cli_reserve(sku: str, quantity: int) -> str:
    """Hold stock."""
    EFFECTS.append(f"reserved {sku}")
    return f"reservation {sku}x{quantity}"


@cli_reserve.compensation
def cli_release(ctx: CompensationContext) -> None:
    EFFECTS.append(f"released {ctx.args['sku']}")


@tool(reversibility=Reversibility.IRREVERSIBLE)
def cli_wire(amount: str, to: str) -> str:
    """Send money; cannot be undone, so it waits for a human."""
    EFFECTS.append(f"wired {amount} to {to}")
    return f"wire {amount}->{to}"


@tool(reversibility=Reversibility.IRREVERSIBLE, approvals=2)
def cli_payout(amount: str) -> str:
    """A payout that needs two distinct approvers (four eyes)."""
    EFFECTS.append(f"paid out {amount}")
    return f"payout {amount}"


@tool
def cli_flaky(step: str) -> str:
    """An effect whose undoing fails."""
    EFFECTS.append(f"flaky {step}")
    return step


@cli_flaky.compensation
def cli_flaky_undo(ctx: CompensationContext) -> None:
    raise RuntimeError(f"cannot undo {ctx.args['step']}")


def gated_order(sku: str = "SKU-1", amount: str = "100.00") -> str:
    """Reserve stock, then ask for an irreversible wire transfer: the saga suspends."""
    cli_reserve(sku, 1)
    return cli_wire(amount, "ACME")


def four_eyes_order(amount: str = "50000.00") -> str:
    """A payout gated on two approvers."""
    return cli_payout(amount)


def plain_order(sku: str = "SKU-1") -> str:
    """One compensatable step that succeeds."""
    return cli_reserve(sku, 2)


def failing_cleanup() -> None:
    """An effect whose compensation fails, then a failure: the saga ends COMPENSATION_FAILED."""
    cli_flaky("boom")
    raise RuntimeError("the work failed")
