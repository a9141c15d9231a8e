"""The engine: one store's journal, tool registry and decision protocol, below every runtime module.

Every decision (approve, reject, resume's INTENT, expiry, void, in-doubt resolution, the start and
steps of a compensation) goes through :meth:`Engine.decide`: it is made on a state folded from the
journal and appended only right after the entry that state ends with (a compare-and-append on
``(saga_id, seq)``, which the primary key gives us). If another writer, in any process or machine,
appended first, the engine reads what was appended, and the decision is made again on the new
state, or refused. In-process locks carry no correctness here: two ``Sagacity`` instances on
one database are treated exactly like two machines.

Ordinary tool INTENT/EXECUTED appends keep the journal's fast path (``Journal.append``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from sagacity._journal import Journal
from sagacity._state import SagaState, fold
from sagacity.chain import utc_now
from sagacity.errors import (
    AppendConflictError,
    ApprovalNotFoundError,
    StoreUnavailableError,
)
from sagacity.model import ApprovalRequest, Entry, Phase
from sagacity.stores.base import Capability, Store, capable
from sagacity.tools import ToolRegistry

#: One entry a decision appends: (tool_name, phase, input, payload).
Row = tuple[str, Phase, str, str]
#: Who else runs a saga (``Engine.other_runner``).
Runner = Literal["here", "there", "none", "unknown"]


class Guarding(Protocol):
    """What the runtime asks of the guard the engine carries (``sagacity.guardrails.Guard``).

    Typed here, by what is called, so the journal level need not know the guardrails above it;
    a verdict is the guardrails' own and passes through opaque (the runtime that reads one names
    its type)."""

    def check_start(self, saga_id: str) -> None: ...

    def judge(
        self,
        saga_id: str,
        tool: str,
        input: str,
        *,
        irreversible: bool,
        approvals: int = 1,
        principal: str | None = None,
        dry: bool = False,
        with_intent: bool = False,
    ) -> Any: ...

    def settled(self, verdict: Any, landed: Sequence[Entry] | None) -> None: ...

    def judge_resume(self, saga_id: str, tool: str, input: str, principal: str | None = None) -> Any: ...

    def record_outcome(self, saga_id: str, tool: str, principal: str | None, *, failed: bool) -> None: ...

    def give_back_verdict(self, saga_id: str, verdict: Any) -> None: ...

    def approvers_for(self, tool: str, rule: str | None) -> tuple[tuple[str, ...], frozenset[str]] | None: ...


def age(since: datetime, now: datetime | None = None) -> timedelta:
    return (now or utc_now()) - since


class Engine:
    """The journal of one store, the registry its tools are found in, and the sagas live here."""

    def __init__(
        self, store: Store, journal: Journal, registry: ToolRegistry, approval_ttl: timedelta | None
    ) -> None:
        self.store = store
        self.journal = journal
        self.registry = registry
        self.approval_ttl = approval_ttl
        #: The guardrails policy every call is judged by (``sagacity.guardrails``), if any.
        self.guard: Guarding | None = None
        # Sagas running in this process (for leaving them out of this process's own ``recover``),
        # each also holding its liveness lease on a store that offers them, so that every
        # process can tell them RUNNING (``is_live``).
        self._live: dict[str, int] = {}
        self._live_lock = threading.Lock()
        self._liveness = capable(store, Capability.LIVENESS)

    # -- reading ----------------------------------------------------------------------------------
    def snapshot(self, saga_id: str) -> SagaState:
        """The saga's state, folded from its whole journal (the one full read of an operation)."""
        return fold(saga_id, self.journal.iter_entries(saga_id))

    def refresh(self, state: SagaState) -> SagaState:
        """Bring ``state`` up to date with the entries appended since it was read."""
        for entry in self.journal.entries_after(state.saga_id, state.last_seq):
            state.apply(entry)
        return state

    def request(self, saga_id: str, seq: int) -> ApprovalRequest:
        request = self.find_request(saga_id, seq)
        if request is None:
            raise ApprovalNotFoundError(f"no pending approval request for saga {saga_id!r} seq {seq}")
        return request

    def find_request(self, saga_id: str, seq: int) -> ApprovalRequest | None:
        return self.journal.read(self.store.get_approval_request, saga_id, seq)

    def drop_request(self, saga_id: str, seq: int) -> bool:
        """Delete a request row (working state); True for the one caller that deleted it.

        Also True when a delete met a lost connection (a failover, a killed backend) and the
        retry found the row gone: that delete may have committed unheard, and refusing then
        would leave the gate approved with no request anyone could resume. The fenced entry
        the caller appends next decides between racers, as it always does.
        """
        unheard: list[StoreUnavailableError] = []

        def delete() -> bool:
            try:
                return self.store.delete_approval_request(saga_id, seq)
            except StoreUnavailableError as exc:
                unheard.append(exc)
                raise

        return self.journal.read(delete) or bool(unheard)

    # -- writing ----------------------------------------------------------------------------------
    def decide(self, state: SagaState, choose: Callable[[SagaState], list[Row]]) -> list[Entry]:
        """Append what ``choose`` decides on ``state``, fenced; on a lost race, re-read and re-decide.

        ``choose`` is pure: it returns the rows to append (none: nothing to do) or raises a
        refusal. ``state`` is kept current, including the appended entries. Outcomes this
        process holds for the saga (``Journal.hold``) are decided on and written with it; the
        entries returned are the decision's own.
        """
        for _ in range(self.journal.max_append_attempts):
            held = self.journal.take_held(state.saga_id)
            if held:
                landed, carried = self._carrying(state, choose, held)
            else:
                rows = choose(state)
                if not rows:
                    return []
                landed = self.journal.commit(state.saga_id, (state.last_seq, state.last_hash), rows)
                carried = 0
            if landed is not None:
                for entry in landed:
                    state.apply(entry)
                return landed[carried:]
            self.refresh(state)
        raise AppendConflictError(
            f"decision on saga {state.saga_id!r} lost the race for the next seq "
            f"{self.journal.max_append_attempts} times; nothing was written"
        )

    def _carrying(
        self, state: SagaState, choose: Callable[[SagaState], list[Row]], held: list[Row]
    ) -> tuple[list[Entry] | None, int]:
        """A decision made with this process's held outcomes of the saga (``Journal.hold``)
        taken into account and written first in its insert (a saga's END rides with its last
        call's outcome): what landed, outcomes included, and how many of it are outcomes. The
        outcomes are given back when nothing was written."""
        after = (state.last_seq, state.last_hash)
        try:
            carried = self.journal.draft(state.saga_id, after, held)
            seen = state.fork()
            for entry in carried:
                seen.apply(entry)
            rows = choose(seen)
        except BaseException:
            self.journal.restore_held(state.saga_id, held)
            raise
        # An insert not confirmed raises here: the outcomes are not given back (they may have
        # landed), and their INTENTs read in doubt, as when an outcome's own append fails.
        landed = self.journal.commit(state.saga_id, after, rows, carried)
        if landed is None:
            self.journal.restore_held(state.saga_id, held)
        return landed, len(carried)

    def append(self, state: SagaState, tool_name: str, phase: Phase, input: str, payload: str) -> Entry:
        """Append on the fast path (an outcome, never a decision) and keep ``state`` current."""
        entry = self.journal.append(state.saga_id, tool_name, phase, input, payload)
        if entry.seq == state.last_seq + 1:
            state.apply(entry)
        else:
            self.refresh(state)
        return entry

    def lease(self, saga_id: str, *, wait: bool) -> AbstractContextManager[bool]:
        """The saga's lease (``stores/_lease.py``): held by every compensation run."""
        return self.store.lease(saga_id, wait=wait)

    # -- sagas live: in this process, or in any process on the store ----------------------------
    def enter(self, saga_id: str) -> None:
        """A saga starts or resumes here: count it, and take its liveness lease (once per saga
        and process; the one round trip a saga's start pays for it, none per call)."""
        with self._live_lock:
            self._live[saga_id] = self._live.get(saga_id, 0) + 1
        if self._liveness is not None:
            try:
                self.journal.read(self._liveness.hold_live, saga_id)
            except BaseException:
                self._forget(saga_id)
                raise

    def leave(self, saga_id: str) -> None:
        if self._liveness is not None:
            self._liveness.release_live(saga_id)
        self._forget(saga_id)

    def _forget(self, saga_id: str) -> None:
        with self._live_lock:
            left = self._live.get(saga_id, 1) - 1
            if left:
                self._live[saga_id] = left
            else:
                self._live.pop(saga_id, None)

    def is_live_here(self, saga_id: str) -> bool:
        """Whether the saga runs in this process (through this engine)."""
        with self._live_lock:
            return saga_id in self._live

    def is_running(self, saga_id: str) -> bool:
        """Whether a process is known to be running the saga (its status is then RUNNING, and
        ``recover`` leaves it alone): today, one live in this process. Every status read asks
        here (``_state.status_of``), so a cross-process liveness proof plugs in at this one place."""
        return self.is_live(saga_id)

    def live(self) -> set[str]:
        """The sagas live in this process right now."""
        with self._live_lock:
            return set(self._live)

    def is_live(self, saga_id: str) -> bool:
        """Whether a living process, this one or another on the store, runs the saga now."""
        return bool(self.live_among([saga_id]))

    def other_runner(self, saga_id: str) -> Runner:
        """Asked from inside a run of the saga (which holds its liveness lease itself): who else
        runs it — ``"here"`` (another run in this process), ``"there"`` (another living process
        on the store), ``"none"``, or ``"unknown"`` (the store has no ``Capability.LIVENESS``)."""
        with self._live_lock:
            if self._live.get(saga_id, 0) > 1:
                return "here"
        if self._liveness is None:
            return "unknown"
        return "there" if self.journal.read(self._liveness.live_elsewhere, [saga_id]) else "none"

    def live_among(self, saga_ids: Sequence[str]) -> set[str]:
        """Which of ``saga_ids`` a living process runs now: this process's own, and, where the
        store offers liveness leases (``Capability.LIVENESS``), every other process's, read in
        one query. Without them only this process's are known."""
        here = self.live()
        found = {sid for sid in saga_ids if sid in here}
        rest = [sid for sid in saga_ids if sid not in here]
        if rest and self._liveness is not None:
            found |= self.journal.read(self._liveness.live_among, rest)
        return found
