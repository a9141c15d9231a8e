"""A saga in the deferred durability mode, killed (SIGKILL, by itself) at one point between a
call's return and the commit that carries its outcome:

    python deferred_worker.py URL SAGA_ID POINT    (effects go to $SAGACITY_CRASH_MARKERS)

Points: ``after-return`` (the agent's own code after a call returned), ``before-next-commit`` /
``after-next-commit`` (in the next call's INTENT insert, before it reaches the database / right
after it is committed, before the next tool runs), ``before-end-commit`` (the END's insert),
``before-compensation-commit`` (the insert that starts the compensation). The kill inside an
insert is the store's own insert, wrapped in this process only. Effects are noted as
``crash_tools`` notes them.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from crash_tools import effect

from sagacity import CompensationContext, Sagacity, tool
from sagacity.model import Entry


@tool
def book(item: str) -> str:
    effect(f"book {item}")
    return f"booked-{item}"


@book.compensation
def unbook(ctx: CompensationContext) -> None:
    effect(f"unbook {ctx.args['item']}")


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def kill_in_insert(sg: Sagacity, *, after: bool, when: Callable[[Sequence[Entry]], bool]) -> None:
    """Make the next multi-row insert that ``when`` picks kill this process before or after it."""
    real: Any = sg.store.insert_entries

    def insert(entries: Sequence[Entry]) -> bool:
        if not when(entries):
            return bool(real(entries))
        if not after:
            die()
        done = bool(real(entries))
        die()
        return done

    sg.store.insert_entries = insert  # type: ignore[method-assign]


def main(url: str, saga_id: str, point: str) -> None:
    sg = Sagacity(url, durability="deferred")
    with sg.saga(saga_id):
        book("A")
        if point == "after-return":
            die()
        if point in ("before-next-commit", "after-next-commit"):
            kill_in_insert(sg, after=point == "after-next-commit", when=lambda rows: True)
        elif point == "before-end-commit":
            kill_in_insert(sg, after=False, when=lambda rows: rows[-1].tool_name == "sagacity:saga")
        elif point == "before-compensation-commit":
            kill_in_insert(sg, after=False, when=lambda rows: any(r.tool_name == "saga" for r in rows))
            raise RuntimeError("the agent gave up")
        book("B")
    raise AssertionError(f"{point}: the process was to die before the saga ended")


if __name__ == "__main__":
    main(*sys.argv[1:4])
