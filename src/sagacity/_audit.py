"""The effect audit: does the world agree with the journal about the effects of finished sagas?

For every call a finished saga EXECUTED, the tool's reconciler is asked whether it happened; for
every call it COMPENSATED, the undo's reconciler whether the undo happened. Each effect gets a
verdict: CONFIRMED (the system agrees), DRIFT (it does not: an effect missing, an undo never
seen) or UNVERIFIABLE (no reconciler, *unknown*, an error, a timeout: never counted as fine).
The findings are journaled on a chain of their own, the reserved saga ``sagacity:audit``, one
entry each (tool ``saga``, EXECUTED), appended in one batch per saga audited.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable

from sagacity._engine import Engine, Row
from sagacity._payloads import AUDIT_SAGA, SAGA_TOOL, audit_payload, audit_row
from sagacity._reconcile import (
    DID_NOT_HAPPEN,
    HAPPENED,
    ask,
    context_of_call,
    context_of_undo,
    reconciler_for,
)
from sagacity._state import SagaState
from sagacity.chain import GENESIS_HASH
from sagacity.errors import AppendConflictError
from sagacity.model import EffectAudit, EffectVerdict, Phase, SagaStatus

#: The statuses of a finished saga: nothing more will happen to its effects.
FINISHED = (
    SagaStatus.COMPLETED,
    SagaStatus.COMPENSATED,
    SagaStatus.COMPENSATION_FAILED,
    SagaStatus.REJECTED,
)


def this_process() -> str:
    """Who ran an audit when nobody is named: this host and process."""
    return f"{socket.gethostname()} pid {os.getpid()}"


def audit(engine: Engine, states: Iterable[SagaState], timeout: float, auditor: str) -> list[EffectAudit]:
    """Audit the effects of ``states`` (finished sagas) and journal the findings."""
    found: list[EffectAudit] = []
    for state in states:
        if state.saga_id.startswith("sagacity:") or state.status not in FINISHED:
            continue
        mine = list(_effects(engine, state, timeout))
        if mine:
            rows = [
                (
                    SAGA_TOOL,
                    Phase.EXECUTED,
                    audit_row(f.saga_id, f.seq, f.tool_name, f.effect),
                    audit_payload(f.verdict, f.reconciler, f.evidence, auditor),
                )
                for f in mine
            ]
            _append_all(engine, rows)
            found.extend(mine)
    return found


def _effects(engine: Engine, state: SagaState, timeout: float) -> Iterable[EffectAudit]:
    for call in state.executed:
        assert call.outcome is not None
        comp = state.compensations.get(call.outcome.seq)
        undone = comp is not None and comp.outcome is not None and comp.outcome.phase == Phase.COMPENSATED
        ctx = context_of_undo(state, comp) if undone and comp is not None else context_of_call(state, call)
        if ctx is None:
            continue
        asked = ask(reconciler_for(engine.registry, ctx), ctx, timeout)
        if asked.answer == HAPPENED:
            verdict = EffectVerdict.CONFIRMED
        elif asked.answer == DID_NOT_HAPPEN:
            verdict = EffectVerdict.DRIFT
        else:
            verdict = EffectVerdict.UNVERIFIABLE
        evidence = (
            asked.evidence
            if asked.answer in (HAPPENED, DID_NOT_HAPPEN)
            else f"{asked.answer}: {asked.evidence}"
        )
        yield EffectAudit(
            state.saga_id,
            call.intent.seq,
            call.intent.tool_name,
            "COMPENSATED" if undone else "EXECUTED",
            verdict,
            asked.reconciler,
            evidence,
        )


def _append_all(engine: Engine, rows: list[Row]) -> None:
    """Append ``rows`` to the audit chain together. They are findings, not decisions on a state:
    a lost race for the next seq is retried on the new tail (bounded), as an append is."""
    journal = engine.journal
    for _ in range(journal.max_append_attempts):
        tail = journal.read(journal.store.tail, AUDIT_SAGA)
        after = (tail.seq, tail.hash) if tail is not None else (0, GENESIS_HASH)
        if journal.commit(AUDIT_SAGA, after, rows) is not None:
            return
    raise AppendConflictError(
        f"the audit's findings lost the race for the next seq of {AUDIT_SAGA!r} "
        f"{journal.max_append_attempts} times; nothing was written"
    )
