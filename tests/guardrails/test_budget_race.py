"""Budgets are fenced across processes: two workers at 49,000.00 of a 50,000.00 budget each ask
for 900.00 at the same moment, and exactly one runs; eight ask for 300.00 each, and exactly three
run — trial after trial, on SQLite, PostgreSQL and MariaDB, checked on the journal (the meter
chains and the sagas), not on what the workers say. Since #35 a debit rides in its INTENT's
insert; the race must stay exact."""

from __future__ import annotations

import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from sagacity import Sagacity, acting_as, tool
from sagacity.guardrails import METER_PREFIX, parse_verdict
from sagacity.testing import tool_entries

WORKER = Path(__file__).with_name("budget_worker.py")
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


@pytest.mark.parametrize(
    ("workers", "amount", "trials", "runs"),
    [(2, "900.00", 15, 1), (8, "300.00", 3, 3)],
    ids=["2-processes", "8-processes"],
)
def test_processes_racing_for_the_last_of_a_budget(
    durable_url: str, tmp_path: Path, workers: int, amount: str, trials: int, runs: int
) -> None:
    names = [chr(ord("a") + i) for i in range(workers)]
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    sync = tmp_path / "sync"
    sync.mkdir()

    @tool
    def send_wire(amount: str, to: str) -> str:
        return f"sent {amount} to {to}"

    sg = Sagacity(durable_url, policy=policy, switch_poll=0)
    for trial in range(trials):  # each trial's team has spent 49,000.00 of its 50,000.00
        with acting_as(f"team-{trial}"):
            assert (
                sg.run(f"prefund-{trial}", lambda: send_wire("49000.00", "x")).value == "sent 49000.00 to x"
            )
    processes = [
        subprocess.Popen(
            [sys.executable, str(WORKER), durable_url, str(policy), str(sync), name, str(trials), amount]
        )
        for name in names
    ]
    try:
        deadline = time.monotonic() + 120
        for name in names:
            _wait_for(sync / f"ready-{name}", deadline)
        for trial in range(trials):
            (sync / f"go-{trial}").touch()
            for name in names:
                _wait_for(sync / f"done-{trial}-{name}", deadline)
        for process in processes:
            assert process.wait(timeout=60) == 0
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()

    for trial in range(trials):
        meter = f"{METER_PREFIX}wire-budget:principal=team-{trial}"
        debits = [e for e in sg.entries(meter) if e.payload.startswith("debit=")]
        spent = sum((Decimal(e.payload.split("\n")[0].removeprefix("debit=")) for e in debits), Decimal(0))
        assert spent == Decimal("49000.00") + runs * Decimal(amount), (
            f"trial {trial}: the meter holds {spent}"
        )
        assert sg.verify(meter).valid
        ran = []
        for name in names:
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
                    f"denied by policy: budget wire-budget: {49000 + runs * Decimal(amount):.2f} + {amount}"
                )
        assert len(ran) == runs, f"trial {trial}: {ran} ran"
    sg.close()
