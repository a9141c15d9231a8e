"""A worker for test_debit_with_intent.py: budgeted calls, one saga after another, until killed.

Run as ``python debit_worker.py URL POLICY READY TAG``; its sagas are ``pay-TAG-<n>``, and it
touches READY once its first call landed.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from sagacity import Sagacity, tool


@tool
def pay(amount: str) -> str:
    return f"paid {amount}"


THREADS = 4


def main() -> None:
    url, policy, ready, tag = sys.argv[1:5]
    with Sagacity(url, policy=policy, switch_poll=3600) as sg:

        def calls(thread: int) -> None:
            n = 0
            while True:
                sg.run(f"pay-{tag}-{thread}-{n}", pay, "1.00")
                if n == 0 and thread == 0:
                    Path(ready).touch()
                n += 1

        # Several calls in flight at once: whenever the kill lands, some are between two steps.
        for thread in range(1, THREADS):
            threading.Thread(target=calls, args=(thread,), daemon=True).start()
        calls(0)


if __name__ == "__main__":
    main()
