"""Budgets are fenced across processes: two workers at 49,000.00 of a 50,000.00 budget each ask
for 900.00 at the same moment, and exactly one runs — trial after trial, on SQLite and PostgreSQL,
checked on the journal (the meter chains and the sagas), not on what the workers say."""

from __future__ import annotations

import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

from sagacity import Sagacity, acting_as, tool
from sagacity.guardrails import METER_PREFIX, parse_verdict
from sagacity.testing import tool_entries

WORKER = Path(__file__).with_name("budget_worker.py")
TRIALS = 15
POLICY = """\
[[rules]]
id = "wires"
tool = "send_wire"
action = "allow"

[[rules]]
id = "wire-budget"
tool = "send_wire"
amount = "amount"
action = "deny"
[rules.budget]
limit = "50000.00"
window = "24h"
per = "principal"
"""


def _wait_for(path: Path, deadline: float) -> None:
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} did not appear"
        time.sleep(0.001)


def test_two_processes_racing_for_the_last_of_a_budget(durable_url: str, tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    sync = tmp_path / "sync"
    sync.mkdir()

    @tool
    def send_wire(amount: str, to: str) -> str:
        return f"sent {amount} to {to}"

    sg = Sagacity(durable_url, policy=policy, switch_poll=0)
    for trial in range(TRIALS):  # each trial's team has spent 49,000.00 of its 50,000.00
        with acting_as(f"team-{trial}"):
            assert (
                sg.run(f"prefund-{trial}", lambda: send_wire("49000.00", "x")).value == "sent 49000.00 to x"
            )
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), durable_url, str(policy), str(sync), name, str(TRIALS)]
        )
        for name in ("a", "b")
    ]
    try:
        deadline = time.monotonic() + 120
        for name in ("a", "b"):
            _wait_for(sync / f"ready-{name}", deadline)
        for trial in range(TRIALS):
            (sync / f"go-{trial}").touch()
            for name in ("a", "b"):
                _wait_for(sync / f"done-{trial}-{name}", deadline)
        for worker in workers:
            assert worker.wait(timeout=60) == 0
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()

    for trial in range(TRIALS):
        meter = f"{METER_PREFIX}wire-budget:principal=team-{trial}"
        debits = [e for e in sg.entries(meter) if e.payload.startswith("debit=")]
        spent = sum((Decimal(e.payload.split("\n")[0].removeprefix("debit=")) for e in debits), Decimal(0))
        assert spent == Decimal("49900.00"), f"trial {trial}: the meter holds {spent}"
        assert sg.verify(meter).valid
        ran = []
        for name in ("a", "b"):
            entries = tool_entries(sg, f"race-{trial}-{name}")
            executed = [e for e in entries if e.phase == "EXECUTED"]
            verdict = parse_verdict(entries[0].payload)
            assert verdict is not None
            if executed:
                ran.append(name)
                assert verdict.debits
                assert verdict.debits[0].meter == meter
            else:
                assert entries[1].payload.startswith(
                    "denied by policy: budget wire-budget: 49900.00 + 900.00"
                )
        assert len(ran) == 1, f"trial {trial}: {ran} ran"
    sg.close()
