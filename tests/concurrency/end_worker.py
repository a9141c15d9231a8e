"""One run that opens a gate and stays in its work until told to end (``python end_worker.py URL
SAGA_ID``): prints ``gated``, waits for a line on stdin, then ends and prints the run's status."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from race_tools import race_reserve, race_wire

from sagacity import Sagacity


def main() -> None:
    url, saga_id = sys.argv[1:3]

    def agent() -> None:
        race_reserve("A")
        race_wire("100.00", "ACME")  # gated: the run goes on
        print("gated", flush=True)
        sys.stdin.readline()  # another process approves and resumes the gate meanwhile

    with Sagacity(url) as sg:
        print(sg.run(saga_id, agent).status, flush=True)


if __name__ == "__main__":
    main()
