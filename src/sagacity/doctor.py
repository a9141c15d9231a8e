"""The doctor: what in a journal needs a human, as findings a person or a cron job can act on.

Each check is a pure function from what the journal says (folded states, in-doubt calls, pending
requests, verifications) to :class:`Finding` values that name the saga, the seq, what is wrong
and what to do. :func:`diagnose` gathers those inputs through the public facade and writes nothing
unless asked to expire overdue approval requests.

States younger than ``older_than`` are left out: an INTENT written a second ago belongs to a call
that is probably still running, and a saga compensating right now is not stuck. Only what has
stayed that way longer than the threshold needs a person.

Public for the surfaces that show findings (the ``sagacity doctor`` command, the HTTP API, a
cron job's own report): :func:`human_duration` words an age as the findings do, and
:func:`lag_finding` judges a journal running ahead of its last cosigned log checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from shlex import quote
from typing import Any, Protocol

from sagacity._index import SagaIndex, ScanIndex
from sagacity._state import SagaState, fold
from sagacity.chain import Verification, utc_now, verify
from sagacity.model import ApprovalRequest, Entry, FindingKind, InDoubtCall, Phase, Progress, SagaStatus
from sagacity.stores.base import Watch
from sagacity.tools import ToolRegistry

__all__ = [
    "DEFAULT_OLDER_THAN",
    "Diagnosis",
    "Finding",
    "diagnose",
    "human_duration",
    "lag_finding",
]

#: How long an unfinished state may last before the doctor calls it a finding.
DEFAULT_OLDER_THAN = timedelta(minutes=5)
#: Abandoned-looking sagas asked about in one liveness probe (bounds what a ``--full`` run keeps).
_LIVENESS_BATCH = 500


class _Liveness(Protocol):
    def live_among(self, saga_ids: Sequence[str]) -> set[str]: ...


class Examined(Protocol):
    """What the doctor reads and asks of a journal: a ``Sagacity`` is one. A protocol, so the
    doctor sits below the facade that offers it instead of importing it."""

    @property
    def registry(self) -> ToolRegistry: ...
    @property
    def index(self) -> SagaIndex | ScanIndex: ...
    @property
    def engine(self) -> _Liveness: ...
    def pending_approvals(self) -> list[ApprovalRequest]: ...
    def expire_approvals(self, now: datetime | None = None) -> list[ApprovalRequest]: ...
    def in_doubt(self) -> list[InDoubtCall]: ...
    def saga_ids(self) -> list[str]: ...
    def entries(self, saga_id: str) -> list[Entry]: ...


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing a human must look at: where it is, what is wrong, what to do next."""

    kind: FindingKind
    saga_id: str
    seq: int | None
    detail: str
    action: str

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": str(self.kind),
            "sagaId": self.saga_id,
            "seq": self.seq,
            "detail": self.detail,
            "action": self.action,
        }


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """Everything one doctor run found, and what it did (``expired``: requests it journaled)."""

    findings: list[Finding]
    sagas_checked: int
    recent: int = 0
    expired: list[ApprovalRequest] = field(default_factory=list)
    #: In-doubt calls and compensations among the findings whose tool declares a reconciler in
    #: this process (``sagacity sagas reconcile`` may settle them without a human).
    reconcilable: int = 0


def tools_needed(state: SagaState, registry: ToolRegistry) -> list[str]:
    """Tools of the saga's executed calls that are not registered in this process.

    Compensating a saga looks up every executed call's tool (whether it declares a compensation
    cannot be known otherwise), so a command that may compensate checks this before writing.
    """
    missing = {c.intent.tool_name for c in state.executed if registry.find(c.intent.tool_name) is None}
    return sorted(missing)


def reconciler_of(call: InDoubtCall, registry: ToolRegistry) -> str | None:
    """The name of the reconciler this process has for an in-doubt call (or its undo), if any."""
    spec = registry.find(call.tool_name)
    if spec is None:
        return None
    found = spec.compensation_reconciler if call.kind == "compensation" else spec.reconciler
    return found.name if found is not None else None


def in_doubt_findings(
    calls: Iterable[InDoubtCall], older_than: timedelta, registry: ToolRegistry | None = None
) -> tuple[list[Finding], int]:
    """In-doubt calls and compensations older than the threshold; also how many were younger.
    One whose tool has a reconciler in ``registry`` says to run it first."""
    findings, recent = [], 0
    for call in calls:
        if call.age < older_than:
            recent += 1
            continue
        where = f"{quote(call.saga_id)} {call.seq}"
        named = reconciler_of(call, registry) if registry is not None else None
        if named is not None:
            findings.append(
                Finding(
                    FindingKind.IN_DOUBT_COMPENSATION
                    if call.kind == "compensation"
                    else FindingKind.IN_DOUBT_CALL,
                    call.saga_id,
                    call.seq,
                    f"{'compensation of ' if call.kind == 'compensation' else ''}{call.tool_name} "
                    f"{call.input} started {human_duration(call.age)} ago and has no outcome; "
                    f"its reconciler {named} can ask the external system",
                    f"`sagacity sagas reconcile {quote(call.saga_id)} --import MODULE` settles it if "
                    f"the system knows; else check by hand and `sagacity sagas resolve {where} ...`",
                )
            )
        elif call.kind == "compensation":
            findings.append(
                Finding(
                    FindingKind.IN_DOUBT_COMPENSATION,
                    call.saga_id,
                    call.seq,
                    f"compensation of {call.tool_name} (undoing seq {call.compensates_seq}) started "
                    f"{human_duration(call.age)} ago and has no outcome; the saga's earlier "
                    "steps wait for it (strict reverse order)",
                    f"check whether it took effect, then `sagacity sagas resolve {where} "
                    "--happened` or `--did-not-happen`",
                )
            )
        else:
            findings.append(
                Finding(
                    FindingKind.IN_DOUBT_CALL,
                    call.saga_id,
                    call.seq,
                    f"{call.tool_name} {call.input} started {human_duration(call.age)} ago "
                    "and has no outcome",
                    f"check whether it took effect, then `sagacity sagas resolve {where} "
                    "--happened --result TEXT` or `--did-not-happen`",
                )
            )
    return findings, recent


def lag_finding(journal_entries: int, cosigned: int, max_lag: int) -> Finding | None:
    """The journal running more than ``max_lag`` entries ahead of the last cosigned log checkpoint.

    Entries past that checkpoint are the window in which a forged saga would only look "added";
    a growing lag means the checkpointer or its witnesses stopped.
    """
    ahead = journal_entries - cosigned
    if ahead <= max_lag:
        return None
    return Finding(
        FindingKind.CHECKPOINT_LAG,
        "",
        None,
        f"the journal holds {journal_entries} entries, the last cosigned log checkpoint covers {cosigned}: "
        f"{ahead} ahead, more than the bound of {max_lag}",
        "check that `sagacity checkpoint` runs and that its witnesses answer (its log says why not)",
    )


def expired_findings(requests: Iterable[ApprovalRequest], now: datetime) -> list[Finding]:
    """Pending requests past their expiry that the journal does not yet record as expired."""
    return [
        Finding(
            FindingKind.EXPIRED_APPROVAL,
            r.saga_id,
            r.journal_seq,
            f"approval request for {r.tool_name} expired at {r.expires_at:%Y-%m-%d %H:%M:%S} UTC "
            "and is still pending",
            "`sagacity doctor --expire` journals the expiry and compensates the saga",
        )
        for r in requests
        if r.expires_at is not None and now >= r.expires_at
    ]


def chain_finding(saga_id: str, verification: Verification) -> Finding | None:
    """A broken hash chain: the journal was altered or damaged after it was written."""
    if verification.valid:
        return None
    return Finding(
        FindingKind.BROKEN_CHAIN,
        saga_id,
        None,
        f"hash chain broken at seq {verification.break_at_index + 1}: {verification.message}",
        "treat the journal as tampered with: compare with an export or backup "
        f"(`sagacity verify {quote(saga_id)}`)",
    )


def state_findings(
    state: SagaState, pending_seqs: set[int], now: datetime, older_than: timedelta, *, live: bool = False
) -> list[Finding]:
    """Findings read from one saga's folded journal: stuck or failed compensation, lost requests,
    a saga abandoned between calls (``live``: a living process runs it, so it is not)."""
    sid = state.saga_id
    idle = now - state.last_timestamp if state.last_timestamp is not None else timedelta(0)
    status = state.status
    findings = []
    if status is SagaStatus.ABANDONED and not live and idle >= older_than:
        on_abandon = state.start_facts.get("onAbandon", "compensate")
        findings.append(
            Finding(
                FindingKind.ABANDONED_SAGA,
                sid,
                None,
                "the saga started and never ended, and no process runs it: its process stopped "
                f"between calls (no entry for {human_duration(idle)})",
                f"`sagacity sagas recover {quote(sid)} --import MODULE` "
                + (
                    "compensates what it did (its start facts say onAbandon=compensate)"
                    if on_abandon == "compensate"
                    else "lists it (onAbandon=report): decide by hand, then compensate or resolve it"
                ),
            )
        )
    if status is SagaStatus.COMPENSATING and idle >= older_than:
        findings.append(
            Finding(
                FindingKind.STUCK_COMPENSATING,
                sid,
                state.failure.seq if state.failure is not None else None,
                f"compensation started and has not finished; no entry for {human_duration(idle)}",
                f"`sagacity sagas recover {quote(sid)} --import MODULE` finishes it from the journal",
            )
        )
    if status is SagaStatus.COMPENSATION_FAILED:
        for comp in sorted(state.compensations.values(), key=lambda c: c.executed_seq):
            if comp.outcome is not None and comp.outcome.phase == Phase.COMPENSATION_FAILED:
                findings.append(
                    Finding(
                        FindingKind.COMPENSATION_FAILED,
                        sid,
                        comp.outcome.seq,
                        f"{comp.outcome.tool_name}: {comp.outcome.payload_text}",
                        f"undo the effect of seq {comp.executed_seq} by hand; the journal keeps the "
                        "record (`--ignore compensation_failed` once handled)",
                    )
                )
    if status is SagaStatus.AWAITING_APPROVAL:
        for gate in state.open_gates:
            waited = now - gate.entry.timestamp
            if gate.entry.seq not in pending_seqs and waited >= older_than:
                findings.append(
                    Finding(
                        FindingKind.GATE_WITHOUT_REQUEST,
                        sid,
                        gate.entry.seq,
                        f"{gate.entry.tool_name} awaits approval in the journal but has no pending "
                        "request (a process stopped between the gate's entry and its request, or "
                        "between consuming it and journaling the resume)",
                        "`sagacity sagas recover` puts the request back from the journal; then "
                        "approve or reject it",
                    )
                )
    return findings


def diagnose(
    sg: Examined,
    *,
    older_than: timedelta = DEFAULT_OLDER_THAN,
    now: datetime | None = None,
    expire: bool = False,
    full: bool = False,
    progress: Progress | None = None,
) -> Diagnosis:
    """Run every check; with ``expire``, first journal overdue approval expiries.

    The sagas checked are those the saga index flags for attention (in doubt, compensating,
    compensation failed, awaiting approval, chain broken when last folded): the others cannot
    hold a finding, so a run costs the same at any journal size. The index refolds and
    re-verifies every saga whose journal changed, also through SQL behind the library's back
    (PostgreSQL's triggers; SQLite refuses such changes). ``full`` re-verifies every chain and
    folds every journal instead, for damage no trigger saw (a restored backup, a file edited in
    place): time in proportion to the journal; a break it finds is noted in the saga index, so
    lists and counters show it from then on.

    Expiring compensates the affected sagas, which needs their tools registered; when any is
    missing nothing is expired and the requests stay findings that say which tools to import.
    Read-only unless ``expire``. ``progress(sagas done, sagas, entries read)`` is called after each
    saga checked (a progress bar's feed).
    """
    now = now or utc_now()
    expired: list[ApprovalRequest] = []
    blocked: dict[tuple[str, int], list[str]] = {}
    if expire:
        due = [r for r in sg.pending_approvals() if r.expires_at is not None and now >= r.expires_at]
        for request in due:
            missing = tools_needed(fold(request.saga_id, sg.entries(request.saga_id)), sg.registry)
            if missing:
                blocked[(request.saga_id, request.journal_seq)] = missing
        if due and not blocked:
            expired = sg.expire_approvals(now)
    pending = sg.pending_approvals()
    findings = []
    for overdue in expired_findings(pending, now):
        needs = blocked.get((overdue.saga_id, overdue.seq or 0))
        if needs:
            overdue = replace(  # noqa: PLW2901 - the same finding with the action that unblocks it
                overdue,
                action=f"import the module(s) defining {', '.join(needs)} so the saga can compensate: "
                "`sagacity doctor --expire --import MODULE`",
            )
        findings.append(overdue)
    doubts = sg.in_doubt()
    in_doubt, recent = in_doubt_findings(doubts, older_than, sg.registry)
    findings.extend(in_doubt)
    reconcilable = sum(1 for c in doubts if c.age >= older_than and reconciler_of(c, sg.registry) is not None)
    pending_by_saga: dict[str, set[int]] = {}
    for r in pending:
        pending_by_saga.setdefault(r.saga_id, set()).add(r.journal_seq)
    journals: Iterable[tuple[str, list[Entry]]]
    if full:
        every = sg.saga_ids()
        saga_count = len(every)
        journals = ((sid, sg.entries(sid)) for sid in every)  # one at a time: memory stays flat
    else:
        flagged = [row.saga_id for row in sg.index.watched(Watch.ATTENTION)]
        saga_count = sum(sg.index.counts().values())
        journals = sg.index.journals(flagged).items()  # read together, a few statements
    total = saga_count if full else len(flagged)
    findings.extend(
        journal_findings(sg, journals, pending_by_saga, now, older_than, progress, total, note_breaks=full)
    )
    findings.sort(key=lambda f: (f.saga_id, f.seq if f.seq is not None else -1, f.kind))
    return Diagnosis(findings, saga_count, recent, expired, reconcilable)


def journal_findings(
    sg: Examined,
    journals: Iterable[tuple[str, list[Entry]]],
    pending_by_saga: dict[str, set[int]],
    now: datetime,
    older_than: timedelta,
    progress: Progress | None,
    total: int,
    *,
    note_breaks: bool = False,
) -> list[Finding]:
    """What each journal read says (its chain, its folded state); sagas that look abandoned are
    asked about in one liveness probe per batch, not one each. With ``note_breaks`` (journals read
    past the index), a broken chain found is noted in the saga index for every list to show."""
    findings: list[Finding] = []
    checked = read = 0
    abandoned: list[SagaState] = []

    def judge_abandoned() -> None:
        live = sg.engine.live_among([state.saga_id for state in abandoned])
        for state in abandoned:
            pending_seqs = pending_by_saga.get(state.saga_id, set())
            findings.extend(state_findings(state, pending_seqs, now, older_than, live=state.saga_id in live))
        abandoned.clear()

    for sid, entries in journals:
        verification = verify(entries)
        found = chain_finding(sid, verification)
        if found is not None:
            findings.append(found)
            if note_breaks:
                sg.index.note_broken(sid, verification.break_at_index)
        state = fold(sid, entries)
        if state.status is SagaStatus.ABANDONED:
            abandoned.append(state)
            if len(abandoned) >= _LIVENESS_BATCH:
                judge_abandoned()
        else:
            findings.extend(state_findings(state, pending_by_saga.get(sid, set()), now, older_than))
        checked, read = checked + 1, read + len(entries)
        if progress is not None:
            progress(checked, total, read)
    if abandoned:
        judge_abandoned()
    return findings


def human_duration(delta: timedelta) -> str:
    """A short human duration: ``45s``, ``12m``, ``3h 5m``, ``2d 4h``."""
    seconds = max(0, int(delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m"
    return f"{secs}s"
