"""Journaling a denied call: its INTENT with the verdict and the FAILED that closes it, one commit.

The two entries land together or not at all (``Journal.commit`` after the saga's tail), so a
denied call is never left as an open INTENT that would read as in doubt. The FAILED's payload is
``denied by policy: <reason>``: the call never ran and it is not a failure of the saga.
"""

from __future__ import annotations

from sagacity._engine import Engine
from sagacity._payloads import DENIED
from sagacity.chain import GENESIS_HASH
from sagacity.errors import AppendConflictError, SagaClosedError, SagaExistsError
from sagacity.guardrails._verdict import Verdict
from sagacity.model import Entry, Phase

__all__ = ["REFUSED_RESUME", "denied_rows", "deny_call"]

#: The first line of the denied INTENT journaled for a resume the kill switch refused.
REFUSED_RESUME = "refused resume seq="


def denied_rows(
    tool: str, input: str, verdict: Verdict, first: str = ""
) -> list[tuple[str, Phase, str, str]]:
    """The INTENT (payload: ``first`` line if any, then the verdict) and its closing FAILED."""
    payload = f"{first}\n{verdict.lines}" if first else verdict.lines
    return [(tool, Phase.INTENT, input, payload), (tool, Phase.FAILED, input, DENIED + verdict.reason)]


def deny_call(
    engine: Engine,
    saga_id: str,
    tool: str,
    input: str,
    verdict: Verdict,
    *,
    new_saga: bool = False,
    first: str = "",
) -> list[Entry]:
    """``new_saga``: the denial must be the saga's first entries (``SagaExistsError`` otherwise).
    ``first``: a line before the verdict in the INTENT (``refused resume seq=<n>``)."""
    journal = engine.journal
    rows = denied_rows(tool, input, verdict, first)
    for _ in range(journal.max_append_attempts):
        if journal.is_closed(saga_id):
            raise SagaClosedError(
                f"saga {saga_id!r} is being compensated (or has ended): {tool} was not started"
            )
        tail = journal.read(engine.store.tail, saga_id)
        if new_saga and tail is not None:
            raise SagaExistsError(f"saga {saga_id!r} already has entries (seq 1 to {tail.seq})")
        after = (tail.seq, tail.hash) if tail is not None else (0, GENESIS_HASH)
        landed = journal.commit(saga_id, after, rows)
        if landed is not None:
            return landed
    raise AppendConflictError(f"the denial of {tool} in saga {saga_id!r} lost every race for the next seq")
