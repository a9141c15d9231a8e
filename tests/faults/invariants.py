"""What must hold after faults, checked on the journal itself and on the recorded effects.

Jepsen's method: the workload's processes record what the library acknowledged to them (ACKS) and
what their tools actually did (EFFECTS); at the end every saga's journal is read back and compared
with both. Each broken promise is one line in the returned list of violations, so a run reports
them all rather than the first.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from sagacity import Entry, Phase, Sagacity, SagaResult, SagaStatus

#: Tools whose executed effect a compensation must undo when their saga compensates.
COMPENSATABLE = {"fault_reserve", "fault_charge"}
#: Statuses in which an executed, compensatable effect may stay undone.
MAY_KEEP_EFFECTS = {SagaStatus.COMPLETED, SagaStatus.AWAITING_APPROVAL, SagaStatus.IN_DOUBT}
_OUTCOMES = {Phase.EXECUTED, Phase.FAILED}


@dataclass
class Report:
    sagas: int = 0
    entries: int = 0
    effects: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    status_of: dict[str, str] = field(default_factory=dict)
    in_doubt: int = 0
    acked_entries: int = 0
    violations: list[str] = field(default_factory=list)


def read_lines(paths: Iterable[Path]) -> list[str]:
    lines: list[str] = []
    for path in paths:
        if path.exists():
            lines.extend(line for line in path.read_text(errors="replace").splitlines() if line)
    return lines


def read_acks(paths: Iterable[Path]) -> list[dict[str, Any]]:
    records = []
    for line in read_lines(paths):
        try:
            records.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a kill mid-write (one write, so only a partial last one)
    return records


def recover_after_stop(url: str, effects: Path) -> list[SagaResult]:
    """What cron does next, once every workload process has stopped: one ``recover()`` on
    ``url``, before ``check``. Every process has stopped, so a saga whose end could not be
    journaled (an outage longer than the retries, a process killed mid-saga) is abandoned for sure:
    it is compensated now (``abandoned_after=0``), as cron would once ``abandoned_after`` (10
    minutes by default) had passed. The compensations it runs record their effects in ``effects``,
    the run's ledger (workload.py's ``EFFECTS_ENV``), so ``check`` sees them; the workload's tools
    must be imported in this process."""
    previous = os.environ.get("SAGACITY_FAULT_EFFECTS")
    os.environ["SAGACITY_FAULT_EFFECTS"] = str(effects)
    try:
        with Sagacity(url) as sg:
            return sg.recover(abandoned_after=timedelta(0))
    finally:
        if previous is None:
            del os.environ["SAGACITY_FAULT_EFFECTS"]
        else:
            os.environ["SAGACITY_FAULT_EFFECTS"] = previous


def _decided_gate(entry: Entry) -> int | None:
    decided = json.loads(entry.input) if entry.input.startswith("{") else {}
    return None if "resolution" in decided else decided.get("seq")


def _call_outcomes(entries: list[Entry]) -> dict[int, Entry | None]:
    """Each call INTENT's outcome (or None): an outcome closes the oldest open INTENT of the same
    tool and input (docs/journal.md); compensation INTENTs are closed by COMPENSATED/_FAILED."""
    open_calls: dict[tuple[str, str], list[int]] = defaultdict(list)
    open_comps: dict[int, int] = {}
    outcome: dict[int, Entry | None] = {}
    for e in entries:
        if e.tool_name in ("saga", "approval-gate", "sagacity:saga"):  # not tool calls: the saga's own
            continue
        if e.phase == Phase.INTENT:
            outcome[e.seq] = None
            if e.payload.startswith("compensates seq="):
                open_comps[int(e.payload.split("=", 1)[1].split()[0])] = e.seq
            else:
                open_calls[(e.tool_name, e.input)].append(e.seq)
        elif e.phase in _OUTCOMES:
            waiting = open_calls[(e.tool_name, e.input)]
            if waiting:
                outcome[waiting.pop(0)] = e
        elif e.phase in (Phase.COMPENSATED, Phase.COMPENSATION_FAILED):
            undone = int(e.payload.rsplit("seq=", 1)[1].split()[0])
            if undone in open_comps:
                outcome[open_comps.pop(undone)] = e
    return outcome


def check(
    sg: Sagacity, effects_paths: Iterable[Path], acks_paths: Iterable[Path], *, expect_kinds: bool = True
) -> Report:
    """Every promise, on every saga of the journal; violations listed in the report."""
    report = Report()
    bad = report.violations.append
    effects: dict[str, Counter[tuple[str, int, str]]] = defaultdict(Counter)
    for line in read_lines(effects_paths):
        kind, saga_id, seq, tool_name, _pid = line.split(" ")
        effects[saga_id][(kind, int(seq), tool_name)] += 1
        report.effects[kind] += 1
    acks = read_acks(acks_paths)
    acked: dict[tuple[str, int], set[str]] = defaultdict(set)
    for record in acks:
        if "entry" in record:
            saga_id, seq, digest = record["entry"]
            acked[(saga_id, seq)].add(digest)
    report.acked_entries = len(acked)

    saga_ids = set(sg.saga_ids())
    for saga_id in set(effects) | {s for s, _ in acked}:
        if saga_id not in saga_ids:
            bad(f"{saga_id}: effects or acknowledged appends, but no journal at all")
    in_doubt_listed: dict[str, set[int]] = defaultdict(set)
    for call in sg.in_doubt():
        in_doubt_listed[call.saga_id].add(call.seq)
    report.in_doubt = sum(len(s) for s in in_doubt_listed.values())

    for saga_id in sorted(saga_ids):
        entries = sg.entries(saga_id)
        report.sagas += 1
        report.entries += len(entries)
        seqs = [e.seq for e in entries]
        if seqs != list(range(1, len(seqs) + 1)):
            bad(f"{saga_id}: seqs are not 1..{len(seqs)} without gaps: {seqs}")
        verification = sg.verify(saga_id)
        if not verification.valid:
            bad(f"{saga_id}: chain does not verify: {verification.message}")
        by_seq = {e.seq: e for e in entries}
        for (a_saga, a_seq), digests in acked.items():
            if a_saga == saga_id:
                stored = by_seq.get(a_seq)
                if stored is None:
                    bad(f"{saga_id}: acknowledged entry seq {a_seq} is missing")
                elif stored.hash not in digests or len(digests) > 1:
                    bad(f"{saga_id}: acknowledged entry seq {a_seq} differs ({digests} vs {stored.hash})")
        status = sg.status(saga_id)
        report.statuses[str(status)] += 1
        report.status_of[saga_id] = str(status)
        if status is SagaStatus.AWAITING_APPROVAL and not sg.pending_approvals(saga_id):
            bad(
                f"{saga_id}: AWAITING_APPROVAL with no pending request "
                "(doctor: gate_without_request): no approver will see it"
            )
        _check_saga(saga_id, entries, status, effects.get(saga_id, Counter()), in_doubt_listed[saga_id], bad)

    for record in acks:
        _check_ack(sg, record, saga_ids, bad)
    return report


def _check_saga(
    saga_id: str,
    entries: list[Entry],
    status: SagaStatus,
    effects: Counter[tuple[str, int, str]],
    listed: set[int],
    bad: Any,
) -> None:
    by_seq = {e.seq: e for e in entries}
    outcomes = _call_outcomes(entries)
    for (kind, seq, tool_name), times in effects.items():
        if times > 1:
            bad(f"{saga_id}: {kind} of seq {seq} ({tool_name}) happened {times} times")
    # Each effect done is journaled: its INTENT came first, and it is EXECUTED or in doubt.
    for kind, seq, tool_name in effects:
        if kind != "do":
            continue
        intent = by_seq.get(seq)
        if intent is None or intent.phase != Phase.INTENT or intent.tool_name != tool_name:
            bad(f"{saga_id}: {tool_name} acted at seq {seq}, which is not its INTENT ({intent})")
            continue
        ended = outcomes.get(seq)
        if ended is None:
            if seq not in listed:
                bad(f"{saga_id}: {tool_name} acted at seq {seq}, no outcome, and in_doubt() omits it")
        elif ended.phase != Phase.EXECUTED:
            bad(f"{saga_id}: {tool_name} acted at seq {seq} but the journal says {ended.phase}")
    # Each EXECUTED call really acted; each COMPENSATED really undid; open INTENTs are listed.
    for seq, ended in outcomes.items():
        intent = by_seq[seq]
        compensates = intent.payload.startswith("compensates seq=")
        if ended is None:
            if seq not in listed:
                bad(f"{saga_id}: INTENT seq {seq} ({intent.tool_name}) has no outcome and is not listed")
            continue
        if compensates:
            undone = int(intent.payload.split("=", 1)[1].split()[0])
            did = effects[("undo", undone, intent.tool_name)]
            if ended.phase == Phase.COMPENSATED and did != 1:
                bad(f"{saga_id}: COMPENSATED seq {undone} but its compensation acted {did} times")
        elif ended.phase == Phase.EXECUTED and not effects[("do", seq, intent.tool_name)]:
            bad(f"{saga_id}: EXECUTED at seq {ended.seq} for INTENT {seq} but the tool never acted")
    claims = Counter(
        e.payload.split()[1]
        for e in entries
        if e.phase == Phase.INTENT and e.payload.startswith("compensates")
    )
    for claim, times in claims.items():
        if times > 1:
            bad(f"{saga_id}: {claim} claimed by {times} compensation INTENTs")
    for kind, seq, tool_name in effects:
        if kind == "undo" and not any(
            e.phase == Phase.INTENT and e.payload.startswith(f"compensates seq={seq}") for e in entries
        ):
            bad(f"{saga_id}: {tool_name} seq {seq} was undone without a compensation INTENT")
    # An executed, compensatable effect stays undone only in a saga that did not compensate.
    for kind, seq, tool_name in effects:
        executed = outcomes.get(seq)
        if kind == "do" and tool_name in COMPENSATABLE and executed is not None:
            undone = effects[("undo", executed.seq, tool_name)]  # a compensation names the EXECUTED
            if not undone and status not in MAY_KEEP_EFFECTS:
                bad(f"{saga_id}: {tool_name} seq {seq} executed, never undone, and the saga is {status}")
            if undone and status is SagaStatus.COMPLETED:
                bad(f"{saga_id}: {tool_name} seq {seq} was undone in a saga that reads COMPLETED")
    # The fence: no gate both rejected and resumed (its irreversible tool run).
    for gate in (e.seq for e in entries if e.phase == Phase.AWAITING_APPROVAL):
        decisions = [e for e in entries if e.tool_name == "approval-gate" and _decided_gate(e) == gate]
        rejected = [e for e in decisions if e.phase == Phase.REJECTED]
        resumes = [
            e for e in entries if e.phase == Phase.INTENT and e.payload.startswith(f"resumes seq={gate}")
        ]
        if len(resumes) > 1:
            bad(f"{saga_id}: gate {gate} resumed {len(resumes)} times")
        if len(rejected) > 1:
            bad(f"{saga_id}: gate {gate} rejected {len(rejected)} times")
        if rejected and resumes:
            bad(f"{saga_id}: gate {gate} was both rejected and resumed")
        wired = sum(n for (kind, _, tool), n in effects.items() if kind == "do" and tool == "fault_wire")
        if rejected and wired:
            bad(f"{saga_id}: gate {gate} was rejected, yet the wire was sent")
    if status is SagaStatus.COMPENSATED and any(
        e.tool_name == "fault_wire" and e.phase == Phase.EXECUTED for e in entries
    ):
        bad(f"{saga_id}: compensated after its irreversible wire executed")


def _check_ack(sg: Sagacity, record: dict[str, Any], saga_ids: set[str], bad: Any) -> None:
    """An outcome reported to a caller is what the journal says."""
    op, saga_id, said = record.get("op"), record.get("saga"), record.get("status")
    if saga_id is None or said is None or "error" in record:
        return
    if saga_id not in saga_ids:
        bad(f"{saga_id}: {op} reported {said}, but the saga has no journal")
        return
    now = sg.status(saga_id)
    if said == str(SagaStatus.COMPLETED) and op == "run" and now not in (SagaStatus.COMPLETED,):
        bad(f"{saga_id}: run() returned COMPLETED, the journal now says {now}")
    if said == str(SagaStatus.COMPENSATED) and now is not SagaStatus.COMPENSATED:
        bad(f"{saga_id}: {op} returned COMPENSATED, the journal now says {now}")
    if op == "resume" and said == str(SagaStatus.COMPLETED):
        entries = sg.entries(saga_id)
        if not any(e.tool_name == "fault_wire" and e.phase == Phase.EXECUTED for e in entries):
            bad(f"{saga_id}: resume returned COMPLETED, but the wire has no EXECUTED")


def summary(report: Report) -> str:
    return (
        f"{report.sagas} sagas, {report.entries} entries, {report.acked_entries} acknowledged entries, "
        f"effects {dict(report.effects)}, statuses {dict(report.statuses)}, in doubt {report.in_doubt}, "
        f"{len(report.violations)} violations"
    )
