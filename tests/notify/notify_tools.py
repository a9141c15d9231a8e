"""Tools the notifier tests gate: an irreversible payout, and a reversible step before it.

Imported once per test session into the one registry: their names are the notifier tests' own
(``reserve`` is taken by other suites' tools, and a taken name is refused)."""

from __future__ import annotations

from sagacity import CompensationContext, Reversibility, tool


@tool(reversibility=Reversibility.IRREVERSIBLE)
def pay_out(amount: str, to: str) -> str:
    return f"paid {amount} to {to}"


@tool(name="notify_reserve")
def reserve(sku: str) -> str:
    return f"reserved {sku}"


@reserve.compensation
def release(ctx: CompensationContext) -> None:
    raise RuntimeError("the warehouse refused the release")


def gated(amount: str = "5000", to: str = "acme") -> str:
    return pay_out(amount, to)


def reserve_then_fail() -> None:
    reserve("SKU-1")
    raise ValueError("the agent gave up")
