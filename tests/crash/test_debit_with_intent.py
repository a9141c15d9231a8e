"""A budget's debit and the INTENT it pays for are one insert (issue #35): a process killed with
``kill -9`` at any moment leaves both or neither — never a debit without its call (a budget spent
on nothing) nor a call without its debit (a call the budget never saw).

Real worker processes make budgeted calls back to back and are killed at moments spread over a
call's whole cycle; afterwards the journal itself is checked: every debit on the meter is named by
exactly one INTENT's verdict, and every debit a verdict names is on the meter.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagacity import Sagacity
from sagacity.guardrails import METER_PREFIX, parse_verdict

pytestmark = pytest.mark.crash

WORKER = Path(__file__).with_name("debit_worker.py")
KILLS = 4
POLICY = """\
[[rules]]
id = "payments"
tool = "pay"
amount = "amount"
action = "deny"
[rules.budget]
limit = "1000000"
window = "24h"
"""


def _run_and_kill(url: str, policy: Path, ready: Path, after: float, tag: str) -> None:
    """Start a worker, let it call for ``after`` seconds past its first call, then SIGKILL it."""
    ready.unlink(missing_ok=True)
    child = subprocess.Popen([sys.executable, str(WORKER), url, str(policy), str(ready), tag])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert child.poll() is None, f"the worker exited {child.returncode} before its first call"
            assert time.monotonic() < deadline, "the worker never made its first call"
            time.sleep(0.005)
        time.sleep(after)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()


def test_a_kill_never_parts_a_debit_from_its_intent(durable_url: str, tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    for kill in range(KILLS):
        # Moments spread over several calls' cycles (a call is a few commits: milliseconds).
        _run_and_kill(durable_url, policy, tmp_path / "ready", 0.02 * kill + 0.004, str(kill))
    meter = f"{METER_PREFIX}payments:global"
    with Sagacity(durable_url) as sg:
        debits = {e.seq for e in sg.entries(meter) if e.payload.startswith("debit=")}
        named: list[int] = []
        for saga_id in sg.saga_ids():
            if not saga_id.startswith("pay-"):
                continue
            for entry in sg.entries(saga_id):
                verdict = parse_verdict(entry.payload) if entry.phase == "INTENT" else None
                if verdict is not None:
                    named += [d.seq for d in verdict.debits if d.meter == meter]
        assert debits, "no call was made"
        assert sorted(named) == sorted(debits), (
            f"debits without their call: {sorted(debits - set(named))}; "
            f"calls without their debit: {sorted(set(named) - debits)}"
        )
        assert len(named) == len(set(named))
        assert sg.verify(meter).valid
