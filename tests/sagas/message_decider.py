"""A process deciding gates as one person from an approval message, for test_message_decides_once.

Run as ``python message_decider.py URL SYNC_DIR approve|reject GATES``: for each gate, wait for
its go file, decide it ``via="email"`` as alice, and write what happened to a done file.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from sagacity import Reversibility, Sagacity, tool
from sagacity.errors import SagacityError

ALICE = "alice@example.com"


@tool(name="once_wire", reversibility=Reversibility.IRREVERSIBLE)
def send_wire(amount: str, to: str) -> str:
    return f"wired {amount} to {to}"


def main() -> None:
    url, sync, decision, gates = sys.argv[1:5]
    sync_dir = Path(sync)
    with Sagacity(url) as sg:
        (sync_dir / f"ready-{decision}").touch()
        for gate in range(int(gates)):
            go = sync_dir / f"go-{gate}"
            while not go.exists():
                time.sleep(0.0005)
            saga_id = f"once-{gate}"
            [request] = sg.pending_approvals(saga_id) or [None]
            try:
                if request is None:
                    outcome = "gone"
                elif decision == "approve":
                    sg.approve(saga_id, request.journal_seq, ALICE, via="email")
                    outcome = "approved"
                else:
                    sg.reject(saga_id, request.journal_seq, ALICE, "from the link", via="email")
                    outcome = "rejected"
            except SagacityError as exc:
                outcome = f"refused: {type(exc).__name__}"
            (sync_dir / f"done-{gate}-{decision}").write_text(outcome, encoding="utf-8")


if __name__ == "__main__":
    main()
