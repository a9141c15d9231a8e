"""A worker process of the budget race: for each trial, wait for the go file, ask for AMOUNT of
a 50,000.00 budget as that trial's principal, and say whether the wire ran.

Run as ``python budget_worker.py URL POLICY SYNC_DIR WORKER TRIALS AMOUNT``; see test_budget_race.py.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from sagacity import Sagacity, acting_as, tool


@tool
def send_wire(amount: str, to: str) -> str:
    return f"sent {amount} to {to}"


def main() -> None:
    url, policy, sync, worker, trials, amount = sys.argv[1:7]
    sync_dir = Path(sync)
    with Sagacity(url, policy=policy, switch_poll=0) as sg:
        (sync_dir / f"ready-{worker}").touch()
        for trial in range(int(trials)):
            go = sync_dir / f"go-{trial}"
            while not go.exists():
                time.sleep(0.0005)
            with acting_as(f"team-{trial}"):
                result = sg.run(f"race-{trial}-{worker}", send_wire, amount, worker)
            (sync_dir / f"done-{trial}-{worker}").write_text(str(result.value), encoding="utf-8")


if __name__ == "__main__":
    main()
