"""A process decides its next debit on the meter tail it kept from its last one, without reading
it back. What it keeps must be exactly what the stored entry says: if it drifted, the budget
would be overspent (or refused early) by this process while a fresh reader disagreed.

Checked through the public API: a sequence of decimal amounts (whose sums print as ``0.30``,
``1E+1`` and the like) is spent up to the limit in one process, and every meter entry it wrote
is compared with the sums the stored entries give when read back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal

import pytest

from sagacity import Sagacity, SagaStatus, tool
from sagacity.guardrails import METER_PREFIX, Denied

POLICY = """\
[[rules]]
id = "spend"
tool = "pay"
amount = "amount"
action = "deny"
reason = "the budget is spent"
[rules.budget]
limit = "10.00"
window = "24h"
"""
METER = f"{METER_PREFIX}spend:global"


def _attributes(payload: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in payload.splitlines())


@pytest.fixture
def pay() -> Callable[..., str]:
    @tool
    def pay(amount: str) -> str:
        return f"paid {amount}"

    @pay.compensation
    def refund(ctx: object) -> None:
        return None

    return pay


def test_the_kept_tail_decides_as_the_stored_meter_says(
    guarded: Callable[[str], Sagacity], pay: Callable[..., str]
) -> None:
    sg = guarded(POLICY)
    spent = Decimal(0)
    amounts = ["0.10", "0.20", "2.5", "1E+0", "0.05", "3", "0.15", "2"]  # 9.00 in all
    for n, amount in enumerate(amounts):
        with sg.saga(f"pay-{n}"):
            assert pay(amount=amount) == f"paid {amount}"
        spent += Decimal(amount)
    # A saga that fails gives its debit back; the kept tail must count the give-back too.

    def gives_up() -> None:
        pay(amount="0.75")
        raise RuntimeError("the agent gave up")

    assert sg.run("pay-undone", gives_up).status is SagaStatus.COMPENSATED
    # 1.00 is left: exactly that is allowed, a cent more is not.
    with sg.saga("pay-over"):
        assert isinstance(pay(amount="1.01"), Denied)
    with sg.saga("pay-last"):
        assert pay(amount="1.00") == "paid 1.00"
    spent += Decimal("1.00")
    assert spent == Decimal("10.00")
    with sg.saga("pay-none-left"):
        assert isinstance(pay(amount="0.01"), Denied)

    # Every entry's sums follow from the one before it and its own debit or credit, as the
    # stored entries say (read from the store, payload text parsed, nothing kept).
    entries = sg.entries(METER)
    assert len(entries) == len(amounts) + 3  # 8 debits, the undone debit and its credit, the last
    total = Decimal(0)
    for entry in entries:
        line = _attributes(entry.payload)
        total += Decimal(line["debit"]) if "debit" in line else -Decimal(line["credit"])
        assert Decimal(line["total"]) == total, (entry.seq, entry.payload)
        slices = json.loads(line["slices"])
        assert sum((Decimal(v) for v in slices.values()), Decimal(0)) == total, entry.payload
        assert all(isinstance(v, str) and Decimal(v) > 0 for v in slices.values()), entry.payload
    assert total == Decimal("10.00")
