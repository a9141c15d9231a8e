"""Approval gates as the journal tells them: requested, approved by whom, rejected, resumed, outcome.

Pure: a saga's entries in, one :class:`GateView` per AWAITING_APPROVAL entry out. It reads the
journal formats documented in docs/journal.md (decision inputs ``{"seq":n,"inputHash":h}``,
``approver=`` / ``reason=`` payloads, a resumed call's INTENT payload ``resumes seq=n``, and an
EXECUTED or FAILED entry closing the oldest open INTENT with the same tool and input).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from sagacity.model import Entry, Phase

__all__ = ["GateView", "gate_views"]

_GATE_TOOL = "approval-gate"
_RESUMES = re.compile(r"^resumes seq=(\d+)")


@dataclass(frozen=True, slots=True)
class GateView:
    """One approval gate and what became of it."""

    seq: int
    tool_name: str
    input: str
    input_hash: str
    approvers: tuple[str, ...] = ()
    rejection: str | None = None  # the REJECTED decision's payload (approver= / reason=)
    resumed_seq: int | None = None  # the resumed call's INTENT
    outcome: Entry | None = None  # EXECUTED or FAILED of the resumed call

    @property
    def state(self) -> str:
        """``awaiting``, ``rejected``, ``executed``, ``failed`` or ``in doubt``."""
        if self.rejection is not None:
            return "rejected"
        if self.resumed_seq is None:
            return "awaiting"
        if self.outcome is None:
            return "in doubt"
        return "executed" if self.outcome.phase == Phase.EXECUTED else "failed"


def _decision(entry: Entry) -> tuple[int, str] | None:
    try:
        data = json.loads(entry.input)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("seq"), int) or "inputHash" not in data:
        return None
    return data["seq"], str(data["inputHash"])


def _approver(payload: str) -> str:
    first = payload.split("\n", 1)[0]
    return first.removeprefix("approver=") if first.startswith("approver=") else ""


@dataclass(slots=True)
class _Gate:
    entry: Entry
    input_hash: str
    approvers: list[str]
    rejection: str | None = None
    resumed_seq: int | None = None
    outcome: Entry | None = None

    def view(self) -> GateView:
        e = self.entry
        return GateView(
            e.seq,
            e.tool_name,
            e.input,
            self.input_hash,
            tuple(self.approvers),
            self.rejection,
            self.resumed_seq,
            self.outcome,
        )


def gate_views(entries: Iterable[Entry]) -> list[GateView]:
    """Every gate of the saga, in seq order."""
    gates: dict[int, _Gate] = {}
    resumed_by_intent: dict[int, int] = {}
    open_intents: dict[tuple[str, str], deque[Entry]] = {}
    for entry in entries:
        phase = entry.phase
        if phase == Phase.AWAITING_APPROVAL:
            digest = hashlib.sha256(entry.input.encode("utf-8")).hexdigest()
            gates[entry.seq] = _Gate(entry, digest, [])
        elif entry.tool_name == _GATE_TOOL and phase in (Phase.APPROVED, Phase.REJECTED):
            decided = _decision(entry)
            gate = gates.get(decided[0]) if decided is not None else None
            if gate is None or decided is None or decided[1] != gate.input_hash:
                continue
            if phase == Phase.APPROVED:
                name = _approver(entry.payload)
                if name and name not in gate.approvers:
                    gate.approvers.append(name)
            else:
                gate.rejection = entry.payload
        elif phase == Phase.INTENT:
            if entry.payload.startswith("compensates seq="):
                continue
            open_intents.setdefault((entry.tool_name, entry.input), deque()).append(entry)
            match = _RESUMES.match(entry.payload)
            if match is not None and int(match.group(1)) in gates:
                gates[int(match.group(1))].resumed_seq = entry.seq
                resumed_by_intent[entry.seq] = int(match.group(1))
        elif phase in (Phase.EXECUTED, Phase.FAILED):
            waiting = open_intents.get((entry.tool_name, entry.input))
            if waiting:
                intent = waiting.popleft()
                gate_seq = resumed_by_intent.get(intent.seq)
                if gate_seq is not None:
                    gates[gate_seq].outcome = entry
    return [gates[seq].view() for seq in sorted(gates)]
