"""A saga's state folded from its journal alone: calls, gates, compensations, status.

Pure: entries in, a :class:`SagaState` out. Status, compensation planning, approval checks,
recovery and the doctor all read the journal through this one fold, so they can never disagree.
The payloads' spellings, written and read, are :mod:`sagacity._payloads`'s; this module links them.

How entries are linked (documented in docs/journal.md):

* An EXECUTED or FAILED entry closes the oldest open INTENT with the same tool name and input
  (concurrent calls interleave; identical concurrent calls are interchangeable).
* A compensation's INTENT has the payload ``compensates seq=<n>`` and its COMPENSATED or
  COMPENSATION_FAILED entry the payload ``compensated effect seq=<n>`` (the Java library's
  wording) / ``compensation of effect seq=<n> failed: <error>``; ``n`` is the EXECUTED entry's seq.
* A resumed call's INTENT has the payload ``resumes seq=<n>`` (``n`` the AWAITING_APPROVAL seq),
  followed by `` by=<identity>`` when the caller named who resumed.
* A call an agent framework made carries the framework's call id: a line ``call_id=<id>`` in the
  payload of its INTENT (alone, or after the ``resumes`` line) or AWAITING_APPROVAL; a gate may add
  ``on_reject=continue`` (a rejection tells the model instead of compensating). The latest call
  or gate journaled under an id is what that id refers to (:attr:`SagaState.keyed`).
* A FAILED whose payload starts ``control flow: `` closes its INTENT without being a failure: the
  framework's control flow (a retry request, a pause) left the tool, nothing is to compensate.
  So does one starting ``denied by policy: ``: the guardrails policy denied the call, it never
  ran (``sagacity.guardrails``; its verdict lines are in the INTENT's payload).
* Decisions (tool ``approval-gate``) name what they decide in their input:
  ``{"seq":n,"inputHash":h}`` for a gate, ``{"seq":n,"resolution":"EXECUTED"|"FAILED"|...}`` for a
  human resolving an in-doubt INTENT (the outcome entry follows it).
* Saga-level entries (tool ``saga``): FAILED marks the start of compensation with the reason;
  COMPENSATED or COMPENSATION_FAILED marks its end.
* The saga's lifecycle (tool ``sagacity:saga``): its START is an INTENT at seq 1 whose input is
  the start facts as compact JSON (``{"onAbandon":"compensate","principal":"alice"}``), written
  in one insert with the saga's first call; its END is an EXECUTED with the same input whose
  payload says how the saga ended (``{"status":"COMPLETED"}``). A call after an END (a saga
  continued on purpose) opens the saga again. A saga without a START (journaled by an older
  version, or by another implementation) has no lifecycle: its status is read as it always was.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from sagacity._payloads import (
    CALL_ID,
    COMPENSATES,
    DEFINITION_LINE,
    EFFECT_SEQ,
    GATE_TOOL,
    HOLD_VERDICT,
    LIFE_TOOL,
    NOT_FAILURES,
    ON_ABANDON,
    ON_ABANDON_REPORT,
    ON_REJECT,
    ON_REJECT_CONTINUE,
    REQUESTER,
    REQUESTER_MAY_NOT_APPROVE,
    RESUMES,
    SAGA_TOOL,
    parse_decision_payload,
    payload_attribute,
    sha256_hex,
)
from sagacity.chain import GENESIS_HASH
from sagacity.model import Entry, Phase, SagaStatus


@dataclass
class Call:
    """One tool call: its INTENT and, once known, its outcome."""

    intent: Entry
    outcome: Entry | None = None
    gate_seq: int | None = None
    resolved_by: str = ""
    call_id: str | None = None

    @property
    def executed(self) -> bool:
        return self.outcome is not None and self.outcome.phase == Phase.EXECUTED

    @property
    def failed(self) -> bool:
        """FAILED, and not the framework's control flow: a failure of the saga."""
        outcome = self.outcome
        if outcome is None or outcome.phase != Phase.FAILED:
            return False
        return not outcome.payload.startswith(NOT_FAILURES)

    @property
    def passed(self) -> bool:
        """Closed by the framework's control flow (FAILED ``control flow: ...``) or denied by the
        policy (FAILED ``denied by policy: ...``): not done, not failed."""
        outcome = self.outcome
        if outcome is None or outcome.phase != Phase.FAILED:
            return False
        return outcome.payload.startswith(NOT_FAILURES)


@dataclass
class Compensation:
    """The compensation of one EXECUTED entry: its INTENT and, once known, its outcome."""

    executed_seq: int
    intent: Entry | None = None
    outcome: Entry | None = None

    def may_run(self, *, idempotent: bool) -> bool:
        """False once it has an outcome, or once it started unless it is safe to repeat (in doubt)."""
        return self.intent is None or (self.outcome is None and idempotent)


@dataclass
class Gate:
    """An AWAITING_APPROVAL entry and the decisions naming it."""

    entry: Entry
    approvals: dict[str, list[str]] = field(default_factory=dict)  # input hash -> approvers
    rejection: Entry | None = None
    resumed: Call | None = None

    @property
    def call_id(self) -> str | None:
        return payload_attribute(self.entry.payload, CALL_ID)

    @property
    def continues_on_reject(self) -> bool:
        """A rejection tells the model and the saga goes on (journaled on the gate by an adapter)."""
        return payload_attribute(self.entry.payload, ON_REJECT) == ON_REJECT_CONTINUE

    @property
    def requester(self) -> str | None:
        """Who asked for the gated call (the saga's principal when it was gated), if journaled."""
        return payload_attribute(self.entry.payload, REQUESTER) or None

    @property
    def definition(self) -> str | None:
        """``sha256:<hex>`` of the tool's definition the gate was made under (None in older journals)."""
        return payload_attribute(self.entry.payload, DEFINITION_LINE) or None

    @property
    def requester_may_not_approve(self) -> bool:
        """The gate's separation rule: its requester's own approval does not count, and is refused."""
        return payload_attribute(self.entry.payload, REQUESTER_MAY_NOT_APPROVE) == "true"

    @property
    def input_hash(self) -> str:
        return sha256_hex(self.entry.input)

    @property
    def held_by(self) -> str | None:
        """The policy rule that held the call (its ``verdict=hold rule=<id>`` line), if one did."""
        verdict = payload_attribute(self.entry.payload, HOLD_VERDICT)
        return verdict.split(" ", 1)[0] if verdict else None

    def approvers(self, input_hash: str) -> list[str]:
        return self.approvals.get(input_hash, [])

    @property
    def open(self) -> bool:
        """Neither rejected nor resumed: still waiting for a decision or a resume."""
        return self.rejection is None and self.resumed is None


@dataclass
class SagaState:
    """Everything the journal says about one saga, up to the entry at ``last_seq``.

    Built by :func:`fold` and kept current with :meth:`apply`, one entry at a time, so an
    operation reads a saga once and afterwards only the entries appended since (``last_seq``
    and ``last_hash`` are where a fenced decision must append next).
    """

    saga_id: str
    entry_count: int = 0
    calls: list[Call] = field(default_factory=list)
    gates: dict[int, Gate] = field(default_factory=dict)
    compensations: dict[int, Compensation] = field(default_factory=dict)
    failure: Entry | None = None
    finished: Entry | None = None
    orphans: list[Entry] = field(default_factory=list)
    first_timestamp: datetime | None = None
    last_timestamp: datetime | None = None
    last_seq: int = 0
    last_hash: str = GENESIS_HASH
    #: In-doubt INTENT seq -> resolver, for a resolution decision whose outcome is still to come.
    resolving: dict[int, str] = field(default_factory=dict)
    #: A framework's call id -> the latest call or gate journaled under it.
    keyed: dict[str, Call | Gate] = field(default_factory=dict)
    #: The saga's START entry (seq 1), None for a saga journaled without a lifecycle.
    start: Entry | None = None
    #: The start facts (the START's input as a JSON object): ``onAbandon``, ``principal``.
    start_facts: dict[str, Any] = field(default_factory=dict)
    #: The END entry nothing has begun after (None: not ended, or a later call opened it again).
    ended: Entry | None = None
    #: The gate's REJECTED decision that started the compensation: a rejection ended the saga.
    rejected: Entry | None = None
    #: The latest REJECTED decision on a gate (to tell whether it started the compensation).
    last_rejection: Entry | None = None
    #: Every decision entry (tool ``approval-gate``) with the seq it decides (None: unreadable).
    decisions: list[tuple[Entry, int | None]] = field(default_factory=list)
    #: The calls still without an outcome by (tool name, input), oldest first: those an outcome
    #: may close. Finding them by scanning ``calls`` made folding a saga quadratic in its calls
    #: (8,000 calls took 0.3 s, 32,000 several seconds).
    unanswered: dict[tuple[str, str], list[Call]] = field(default_factory=dict)

    @property
    def executed(self) -> list[Call]:
        """Calls that executed, in order of execution (their EXECUTED seq)."""
        done = [c for c in self.calls if c.executed]
        return sorted(done, key=lambda c: c.outcome.seq if c.outcome else 0)

    @property
    def open_calls(self) -> list[Call]:
        """Calls with an INTENT and no outcome: in doubt once their process is gone."""
        return [c for c in self.calls if c.outcome is None]

    @property
    def open_compensations(self) -> list[Compensation]:
        return [c for c in self.compensations.values() if c.intent is not None and c.outcome is None]

    @property
    def open_gates(self) -> list[Gate]:
        return [g for g in self.gates.values() if g.open]

    @property
    def failed_calls(self) -> list[Call]:
        """Calls that failed (a FAILED that is the framework's control flow is not a failure)."""
        return [c for c in self.calls if c.failed]

    @property
    def closed(self) -> bool:
        """Compensation started or the saga ended: no new call may begin in it."""
        return self.failure is not None or self.finished is not None

    @property
    def compensating(self) -> bool:
        """Compensation started (or is due after a failed call) and has not finished."""
        return self.finished is None and (self.failure is not None or bool(self.failed_calls))

    @property
    def status(self) -> SagaStatus:
        """The status the journal alone gives (no process is known to be running the saga)."""
        return status_of(self)

    @property
    def principal(self) -> str | None:
        """The principal the saga was started for, as its start facts journal it."""
        principal = self.start_facts.get("principal")
        return principal if isinstance(principal, str) and principal else None

    @property
    def on_abandon(self) -> str:
        """What ``recover`` does once the saga is abandoned: ``compensate`` or ``report`` (a
        value this version does not know is reported: a human decides)."""
        chosen = self.start_facts.get("onAbandon")
        return chosen if chosen in ON_ABANDON else ON_ABANDON_REPORT

    @property
    def abandoned(self) -> bool:
        """Started, not ended, and nothing is in flight, awaited or being compensated: unless a
        process is still running it between two calls, nobody will finish it."""
        return (
            self.start is not None
            and self.ended is None
            and self.finished is None
            and not self.compensating
            and not self.open_calls
            and not self.open_compensations
            and not self.open_gates
        )

    def fork(self) -> SagaState:
        """A copy that :meth:`apply` moves on without moving this one (a decision drafted on
        entries that may not land). The containers and the records ``apply`` changes (calls,
        gates, compensations) are copied, each once, so that ``keyed`` and a gate's ``resumed``
        still name the copy's own; entries, and the start facts, are never changed and are
        shared. ``copy.deepcopy`` did the same, copying every entry too, at ~20x the cost: it
        was half the CPU of a saga in the deferred durability mode. ``FORKED_FIELDS`` lists the
        fields this knows (a test holds it to the dataclass)."""
        twin = _clone(self)
        calls = {id(c): _clone(c) for c in self.calls}
        gates: dict[int, Gate] = {}
        by_id: dict[int, Call | Gate] = dict(calls)
        for seq, gate in self.gates.items():
            forked = by_id[id(gate)] = gates[seq] = _clone(gate)
            forked.approvals = {digest: list(names) for digest, names in gate.approvals.items()}
            if gate.resumed is not None:
                forked.resumed = calls.get(id(gate.resumed), gate.resumed)
        twin.calls = list(calls.values())
        twin.gates = gates
        twin.compensations = {seq: _clone(comp) for seq, comp in self.compensations.items()}
        twin.orphans = list(self.orphans)
        twin.resolving = dict(self.resolving)
        twin.keyed = {key: by_id.get(id(found), found) for key, found in self.keyed.items()}
        twin.decisions = list(self.decisions)
        twin.unanswered = {key: [calls[id(c)] for c in waiting] for key, waiting in self.unanswered.items()}
        return twin

    def apply(self, entry: Entry) -> None:
        """Take the saga's next entry into account (entries must come in seq order)."""
        self.entry_count += 1
        self.last_seq = entry.seq
        self.last_hash = entry.hash
        self.last_timestamp = entry.timestamp
        if self.first_timestamp is None:
            self.first_timestamp = entry.timestamp
        if entry.tool_name == LIFE_TOOL:
            _life(self, entry)
            return
        if entry.tool_name == SAGA_TOOL and entry.phase != Phase.INTENT:
            if entry.phase == Phase.FAILED and self.failure is None:
                self.failure = entry
                rejection = self.last_rejection
                if rejection is not None and rejection.seq == entry.seq - 1:
                    self.rejected = rejection  # appended in one batch: the rejection started it
            elif entry.phase in (Phase.COMPENSATED, Phase.COMPENSATION_FAILED):
                self.finished = entry
            return
        if entry.tool_name == GATE_TOOL:
            _decide(self, entry)
            return
        phase = entry.phase
        if phase == Phase.INTENT:
            _intent(self, entry)
        elif phase in (Phase.EXECUTED, Phase.FAILED):
            _outcome(self, entry)
        elif phase in (Phase.COMPENSATED, Phase.COMPENSATION_FAILED):
            match = EFFECT_SEQ.search(entry.payload)
            if match is None:
                self.orphans.append(entry)
                return
            comp = self.compensations.setdefault(int(match.group(1)), Compensation(int(match.group(1))))
            comp.outcome = entry
        elif phase == Phase.AWAITING_APPROVAL:
            self.ended = None  # a gate after the END: the saga was continued
            gate = self.gates[entry.seq] = Gate(entry)
            if entry.payload and (call_id := gate.call_id) is not None:
                self.keyed[call_id] = gate


_T = TypeVar("_T")


def _clone(record: _T) -> _T:
    """A shallow copy of a dataclass instance (``copy.copy`` goes through ``__reduce_ex__``,
    several times slower on a decision's hot path)."""
    twin = object.__new__(type(record))
    twin.__dict__.update(record.__dict__)
    return twin


#: The fields :meth:`SagaState.fork` copies or shares knowingly, per record it copies.
FORKED_FIELDS = {
    "SagaState": [
        "saga_id",
        "entry_count",
        "calls",
        "gates",
        "compensations",
        "failure",
        "finished",
        "orphans",
        "first_timestamp",
        "last_timestamp",
        "last_seq",
        "last_hash",
        "resolving",
        "keyed",
        "start",
        "start_facts",
        "ended",
        "rejected",
        "last_rejection",
        "decisions",
        "unanswered",
    ],
    "Call": ["intent", "outcome", "gate_seq", "resolved_by", "call_id"],
    "Gate": ["entry", "approvals", "rejection", "resumed"],
    "Compensation": ["executed_seq", "intent", "outcome"],
}


def status_of(state: SagaState, *, live: bool = False) -> SagaStatus:
    """The saga's status: the fold's, or ``RUNNING`` when a process is known to be running it
    (``live``: in this process today; ``Engine.is_running`` is where every reader asks).

    For a saga with a START: ABANDONED when it is started, not ended, and nothing is in flight,
    awaited or being compensated; REJECTED when a rejection started a compensation that then
    undid every step. A saga without a START reads as it always did (COMPLETED between calls).
    """
    if live:
        return SagaStatus.RUNNING
    if state.open_calls or state.open_compensations:
        return SagaStatus.IN_DOUBT
    finished = state.finished
    if finished is not None:
        if state.start is not None and state.rejected is not None and finished.phase == Phase.COMPENSATED:
            return SagaStatus.REJECTED
        return SagaStatus(finished.phase)
    if state.compensating:
        return SagaStatus.COMPENSATING
    if state.open_gates:
        return SagaStatus.AWAITING_APPROVAL
    if state.start is None or state.ended is not None:
        return SagaStatus.COMPLETED
    return SagaStatus.ABANDONED


def fold(saga_id: str, entries: Iterable[Entry]) -> SagaState:
    """Read a saga's entries (seq order) into its state."""
    state = SagaState(saga_id)
    for entry in entries:
        state.apply(entry)
    return state


def misaligned(state: SagaState, rows: set[int]) -> bool:
    """Whether a saga's request rows (their seqs) differ from its open gates: a gate without its
    row, or a row of a gate the journal closed."""
    open_seqs = set() if state.closed else {g.entry.seq for g in state.open_gates}
    return bool(open_seqs - rows) or any(seq in state.gates and seq not in open_seqs for seq in rows)


def closes_saga(entry: Entry) -> bool:
    """Whether ``entry`` marks the start or end of the saga's compensation (no call may follow)."""
    return entry.tool_name == SAGA_TOOL and entry.phase in _CLOSING_PHASES


_CLOSING_PHASES = frozenset({Phase.FAILED, Phase.COMPENSATED, Phase.COMPENSATION_FAILED})


def _life(state: SagaState, entry: Entry) -> None:
    """A START (INTENT at seq 1, the start facts) or an END (EXECUTED) of the saga."""
    if entry.phase == Phase.INTENT and entry.seq == 1 and state.start is None:
        try:
            facts = json.loads(entry.input)
        except ValueError:
            facts = None
        if isinstance(facts, dict):
            state.start = entry
            state.start_facts = facts
            return
    elif entry.phase == Phase.EXECUTED and state.start is not None:
        state.ended = entry
        return
    state.orphans.append(entry)


def _intent(state: SagaState, entry: Entry) -> None:
    if entry.payload.startswith(COMPENSATES):
        executed_seq = _int(entry.payload.removeprefix(COMPENSATES))
        if executed_seq is None:
            state.orphans.append(entry)
            return
        state.compensations.setdefault(executed_seq, Compensation(executed_seq)).intent = entry
        return
    state.ended = None  # a call after the END: the saga was continued
    call = Call(entry)
    if entry.payload:
        call.call_id = payload_attribute(entry.payload, CALL_ID)
    gate = None
    if entry.payload.startswith(RESUMES):
        first = entry.payload.partition("\n")[0]
        seq_text, _, _resumed_by = first.removeprefix(RESUMES).partition(" by=")
        call.gate_seq = _int(seq_text)
        gate = state.gates.get(call.gate_seq) if call.gate_seq is not None else None
        if gate is not None:
            gate.resumed = call
    if call.call_id is not None and gate is None:
        state.keyed[call.call_id] = call  # a resumed call is found through its gate
    state.calls.append(call)
    state.unanswered.setdefault((entry.tool_name, entry.input), []).append(call)


def _outcome(state: SagaState, entry: Entry) -> None:
    key = (entry.tool_name, entry.input)
    waiting = state.unanswered.get(key)
    if not waiting:
        state.orphans.append(entry)
        return
    resolving = state.resolving
    at = next((n for n, c in enumerate(waiting) if c.intent.seq in resolving), 0) if resolving else 0
    call = waiting.pop(at)
    if not waiting:
        del state.unanswered[key]
    call.outcome = entry
    call.resolved_by = resolving.pop(call.intent.seq, "")


def _decide(state: SagaState, entry: Entry) -> None:
    try:
        decided = json.loads(entry.input)
    except ValueError:
        decided = None
    target = decided.get("seq") if isinstance(decided, dict) else None
    if not isinstance(target, int) or isinstance(target, bool):
        state.decisions.append((entry, None))
        state.orphans.append(entry)
        return
    assert isinstance(decided, dict)
    seq: int = target
    state.decisions.append((entry, seq))
    approver, _ = parse_decision_payload(entry.payload)
    if "resolution" in decided:
        state.resolving[seq] = approver
        return
    gate = state.gates.get(seq)
    if gate is None:
        state.orphans.append(entry)
    elif entry.phase == Phase.APPROVED:
        approvers = gate.approvals.setdefault(str(decided.get("inputHash", "")), [])
        if approver not in approvers:
            approvers.append(approver)
    elif entry.phase == Phase.REJECTED:
        state.last_rejection = entry
        if gate.rejection is None:
            gate.rejection = entry


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None
