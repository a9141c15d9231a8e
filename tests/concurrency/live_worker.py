"""A worker that runs one saga and stops where the test says, for the liveness tests.

As a script (``python live_worker.py URL SAGA_ID``): runs ``SAGA_ID`` in a ``with sg.saga``: one
call of ``live_step``, then prints ``between`` and waits for a line on stdin; then a call of
``live_hang``, which prints ``in flight`` and never returns (the test kills the process).
"""

from __future__ import annotations

import sys

from sagacity import Sagacity, tool


@tool
def live_step(n: int) -> str:
    return f"step {n}"


@tool
def live_hang() -> str:
    print("in flight", flush=True)
    sys.stdin.readline()  # the test kills the process before it sends anything
    return "never"


def main(url: str, saga_id: str) -> None:
    with Sagacity(url) as sg, sg.saga(saga_id):
        live_step(1)
        print("between", flush=True)
        sys.stdin.readline()
        live_hang()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
