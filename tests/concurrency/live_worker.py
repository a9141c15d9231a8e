"""A worker that runs one saga and stops where the test says, for the liveness tests.

As a script (``python live_worker.py URL SAGA_ID``): runs ``SAGA_ID`` in a ``with sg.saga``: one
call of ``live_step``, then prints ``between`` and waits for a line on stdin; then a call of
``live_hang``, which prints ``in flight`` and never returns (the test kills the process).
With ``resume SEQ PAYLOAD`` after the saga id it resumes that approved gate of ``live_wire``
instead, which prints ``in flight`` and never returns either.
"""

from __future__ import annotations

import sys

from sagacity import Reversibility, Sagacity, tool


@tool
def live_step(n: int) -> str:
    return f"step {n}"


@tool
def live_hang() -> str:
    print("in flight", flush=True)
    sys.stdin.readline()  # the test kills the process before it sends anything
    return "never"


@tool(reversibility=Reversibility.IRREVERSIBLE)
def live_wire(amount: str) -> str:
    print("in flight", flush=True)
    sys.stdin.readline()
    return f"wired {amount}"


def main(url: str, saga_id: str, *resume: str) -> None:
    if resume:
        with Sagacity(url) as sg:
            sg.resume(saga_id, int(resume[1]), resume[2])
        return
    with Sagacity(url) as sg, sg.saga(saga_id):
        live_step(1)
        print("between", flush=True)
        sys.stdin.readline()
        live_hang()


if __name__ == "__main__":
    main(*sys.argv[1:])
