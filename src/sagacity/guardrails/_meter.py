"""Meters: budgets and rate limits as hash chains of their own, fenced like every decision.

A meter is a saga reserved for it, ``sagacity:meter:<rule id>:<scope>`` (scope ``global``,
``tool=<name>``, ``principal=<who>`` or ``agent=<name>``). Each debit and each give-back is an
entry in that chain (tool ``saga``, phase EXECUTED), appended only right after the tail entry it
was decided on — the compare-and-append on ``(saga_id, seq)`` that decisions use
(``Journal.commit``). Two processes or machines racing for the last of a budget both read the
same tail; one lands, the other finds the tail moved, reads it again and is refused on the new
sum. A budget is never overspent. The tail is checked against its predecessor before anything
is decided on its sums, so a tail rewritten behind the library (its budget reopened) is refused.

Each entry carries the meter's sums by slice of the window (60 slices), so a decision reads one
entry, the tail, whatever the journal's size. The window sum counts the current slice and the 60
before it: at least the whole window, and up to one slice more (never less: it fails closed).
Entry payload lines::

    debit=<amount> | credit=<amount>     what this entry took or gave back
    slice=<n>                            the slice it counts in (slice = epoch µs // width)
    width=<µs>                           the slice width (window / 60)
    total=<decimal>                      the window's sum after this entry
    slices={"<n>":"<sum>",...}           the window's sums by slice, after this entry
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from sagacity._journal import Journal, Rider
from sagacity._payloads import SAGA_TOOL, payload_attribute
from sagacity.chain import GENESIS_HASH, entry_hash
from sagacity.errors import AppendConflictError, SagacityError
from sagacity.guardrails._rules import Budget, Rule, Scope
from sagacity.guardrails._verdict import DEBIT, Debit, parse_verdict
from sagacity.model import Entry, Phase

__all__ = [
    "DEBIT",
    "METER_PREFIX",
    "STREAK_PREFIX",
    "Meter",
    "MeterReading",
    "Planned",
    "Streaks",
    "give_back_call",
    "meter_id",
    "streak_id",
]

METER_PREFIX = "sagacity:meter:"
STREAK_PREFIX = "sagacity:streak:"
SLICES = 60
_log = logging.getLogger("sagacity.guardrails")
_ZERO = Decimal(0)


def _scope(per: Scope, tool: str, principal: str | None, agent: str | None) -> str:
    if per is Scope.GLOBAL:
        return "global"
    value = {Scope.TOOL: tool, Scope.PRINCIPAL: principal, Scope.AGENT: agent}[per]
    return f"{per}={value or '-'}"


def meter_id(rule: Rule, tool: str, principal: str | None, agent: str | None) -> str:
    """The meter saga a call counts in under ``rule``'s budget."""
    assert rule.budget is not None
    return f"{METER_PREFIX}{rule.id}:{_scope(rule.budget.per, tool, principal, agent)}"


def streak_id(rule: Rule, tool: str, principal: str | None, agent: str | None) -> str:
    """The chain counting ``rule``'s failures in a row (``sagacity:streak:<rule>:<scope>``)."""
    assert rule.failures is not None
    return f"{STREAK_PREFIX}{rule.id}:{_scope(rule.failures.per, tool, principal, agent)}"


class Streaks:
    """Failures in a row, as chains of their own: an entry (tool ``saga``, EXECUTED, payload
    ``streak=<n>``) whenever the count changes — each failure, and the first success after one —
    appended after the tail it was read from (compare-and-append), so racing processes count
    every outcome. Reading the count is one read of the tail."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def current(self, streak: str) -> int:
        tail = self.journal.read(self.journal.store.tail, streak)
        text = payload_attribute(tail.payload, "streak=") if tail is not None else None
        return int(text) if text and text.isdigit() else 0

    def record(self, streak: str, *, failed: bool, about: dict[str, str]) -> None:
        for _ in range(self.journal.max_append_attempts):
            tail = self.journal.read(self.journal.store.tail, streak)
            text = payload_attribute(tail.payload, "streak=") if tail is not None else None
            now = int(text) if text and text.isdigit() else 0
            after = now + 1 if failed else 0
            if after == now:
                return  # a success after a success: nothing changes, nothing is written
            row = (
                SAGA_TOOL,
                Phase.EXECUTED,
                json.dumps(about, separators=(",", ":"), sort_keys=True),
                f"streak={after}",
            )
            at = (tail.seq, tail.hash) if tail is not None else (0, GENESIS_HASH)
            if self.journal.commit(streak, at, [row]) is not None:
                return
        raise AppendConflictError(f"{streak!r}: every attempt to count an outcome lost the race")


def _now_micros() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True, slots=True)
class MeterReading:
    """A meter's tail: where the next entry must land, and the window's sums by slice."""

    seq: int
    hash: str
    width: int
    slices: dict[int, Decimal]

    def kept(self, width: int, now: int) -> dict[int, Decimal]:
        """The slices still inside the window at ``now`` (in ``width`` slices; a meter whose
        window changed counts everything it had in the current slice: over, never under)."""
        current = now // width
        if width != self.width:
            total = sum(self.slices.values(), _ZERO)
            return {current: total} if total else {}
        return {k: v for k, v in self.slices.items() if k >= current - SLICES}


def read_meter(entry: Entry | None) -> MeterReading:
    if entry is None:
        return MeterReading(0, GENESIS_HASH, 0, {})
    raw = payload_attribute(entry.payload, "slices=")
    width = payload_attribute(entry.payload, "width=")
    slices = {int(k): Decimal(v) for k, v in json.loads(raw).items()} if raw else {}
    return MeterReading(entry.seq, entry.hash, int(width) if width else 0, slices)


#: A planned debit's slice width and the window's sums after it: the meter's tail once it lands.
Sums = tuple[int, dict[int, Decimal]]


@dataclass(frozen=True, slots=True)
class Planned:
    """A debit decided on a meter's tail, to be written in the same insert as the call's INTENT
    (``Journal.append_with``): it lands with the call, or neither does. ``sums``: what the meter
    holds after it, kept as the meter's tail when it lands (its payload is not parsed back)."""

    rider: Rider
    debit: Debit
    sums: Sums


class Meter:
    """Debits and give-backs on the meters of one journal.

    The tail of each meter this process last wrote (or read) is kept: a planned debit is decided
    on it without a read, and fenced on it like any debit, so a tail another process moved meanwhile
    makes the insert lose, the kept tail is dropped, and the call is judged again on a fresh read.
    """

    def __init__(self, journal: Journal, clock: Callable[[], int] = _now_micros) -> None:
        self.journal = journal
        self._clock = clock
        self._known: dict[str, MeterReading] = {}

    def reading(self, meter: str) -> MeterReading:
        """The meter's tail, checked against its predecessor (two reads); raises ``StoreError``
        when it cannot be read and ``SagacityError`` when the chain is broken there."""
        tail = self.journal.read(self.journal.store.tail, meter)
        if tail is not None:
            self._check(tail)
        return read_meter(tail)

    def plan(
        self, meter: str, budget: Budget, amount: Decimal, about: dict[str, str], *, force: bool = False
    ) -> tuple[Planned | None, Decimal]:
        """``take`` decided but not written: the debit (None: refused) as a row to insert with the
        call's INTENT, and the window's sum it was decided on (after it, when debited)."""
        width = _width(budget)
        reading = self._known.get(meter)
        kept = reading is not None
        while True:
            if reading is None:
                reading = self._known[meter] = self.reading(meter)
            now = self._clock()
            slices = reading.kept(width, now)
            total = sum(slices.values(), _ZERO)
            if total + amount <= budget.limit or force:
                break
            if not kept:
                return None, total
            # A refusal is not fenced: it is made on the meter as read now (a give-back elsewhere
            # may have made room), never on the kept tail.
            reading, kept = None, False
        current = now // width
        slices[current] = slices.get(current, _ZERO) + amount
        after = total + amount
        row = _row({**about, "amount": str(amount)}, f"debit={amount}", current, width, after, slices)
        rider: Rider = (meter, (reading.seq, reading.hash), row)
        return Planned(rider, Debit(meter, reading.seq + 1, amount), (width, slices)), after

    def settled(self, riders: Sequence[Rider], sums: Sequence[Sums], landed: Sequence[Entry] | None) -> None:
        """The planned debits ``riders`` (``sums``: each one's, from :meth:`plan`) landed as the
        first entries of ``landed``, kept as their meters' tails, or lost their race (None: the
        kept tails are dropped, so the next plan reads them)."""
        if landed is None:
            for meter, _, _ in riders:
                self._known.pop(meter, None)
            return
        for (meter, _, _), (width, slices), entry in zip(riders, sums, landed, strict=False):
            assert entry.saga_id == meter, "append_with writes the riders first, in order"
            self._known[meter] = MeterReading(entry.seq, entry.hash, width, slices)

    def _check(self, tail: Entry) -> None:
        """Refuse a tail whose hash does not follow from its predecessor's: its sums may have been
        rewritten (a budget reopened behind the library), and a debit is decided on them."""
        before = (
            self.journal.read(self.journal.store.get_entry, tail.saga_id, tail.seq - 1)
            if tail.seq > 1
            else None
        )
        prev = before.hash if before is not None else GENESIS_HASH
        fields = (
            tail.saga_id,
            tail.seq,
            tail.tool_name,
            tail.phase,
            tail.input,
            tail.payload,
            tail.timestamp,
        )
        if (tail.seq > 1 and before is None) or entry_hash(prev, *fields) != tail.hash:
            raise SagacityError(
                f"meter {tail.saga_id!r} is broken at seq {tail.seq} (its hash does not follow from its "
                "predecessor's): nothing is decided on it until it is repaired (see sagacity verify)"
            )

    def total(self, meter: str, budget: Budget) -> Decimal:
        """The window's sum right now."""
        width = _width(budget)
        return sum(self.reading(meter).kept(width, self._clock()).values(), _ZERO)

    def take(
        self, meter: str, budget: Budget, amount: Decimal, about: dict[str, str], *, force: bool = False
    ) -> tuple[Debit | None, Decimal]:
        """Debit ``amount`` if the window's sum stays within the limit (``force``: debit anyway,
        an approved call over a hold budget), fenced on the meter's tail. Returns the debit (None:
        refused) and the window's sum it was decided on (after it, when debited)."""
        width = _width(budget)
        self._known.pop(meter, None)  # it moves here without the kept tail
        for _ in range(self.journal.max_append_attempts):
            reading = self.reading(meter)
            now = self._clock()
            slices = reading.kept(width, now)
            total = sum(slices.values(), _ZERO)
            if total + amount > budget.limit and not force:
                return None, total
            current = now // width
            slices[current] = slices.get(current, _ZERO) + amount
            after = total + amount
            row = _row({**about, "amount": str(amount)}, f"debit={amount}", current, width, after, slices)
            landed = self.journal.commit(meter, (reading.seq, reading.hash), [row])
            if landed is not None:
                return Debit(meter, landed[0].seq, amount), after
        raise AppendConflictError(
            f"meter {meter!r}: every attempt to debit lost the race for the next seq; nothing was debited"
        )

    def give_back(self, debit: Debit, about: dict[str, str]) -> Entry | None:
        """Credit ``debit`` back (its call was compensated, or never ran), fenced. None when its
        slice has left the window (there is nothing to give back)."""
        taken = self.journal.read(self.journal.store.get_entry, debit.meter, debit.seq)
        if taken is None:
            return None
        slice_text = payload_attribute(taken.payload, "slice=")
        width_text = payload_attribute(taken.payload, "width=")
        if slice_text is None or width_text is None:
            return None
        taken_slice, width = int(slice_text), int(width_text)
        self._known.pop(debit.meter, None)  # it moves here without the kept tail
        for _ in range(self.journal.max_append_attempts):
            reading = self.reading(debit.meter)
            slices = reading.kept(width, self._clock())
            if taken_slice not in slices or reading.width != width:
                return None
            slices[taken_slice] = max(_ZERO, slices[taken_slice] - debit.amount)
            after = sum(slices.values(), _ZERO)
            about = {**about, "credits": str(debit.seq), "amount": str(debit.amount)}
            row = _row(about, f"credit={debit.amount}", taken_slice, width, after, slices)
            landed = self.journal.commit(debit.meter, (reading.seq, reading.hash), [row])
            if landed is not None:
                return landed[0]
        raise AppendConflictError(f"meter {debit.meter!r}: the give-back of seq {debit.seq} lost every race")


def _width(budget: Budget) -> int:
    return _slice_width(budget.window)


@functools.lru_cache(maxsize=256)
def _slice_width(window: timedelta) -> int:
    micros = int(window.total_seconds() * 1_000_000)
    return max(1, micros // SLICES)


#: ``json.dumps(about, separators=(",", ":"), sort_keys=True)`` without a new encoder per call.
_about_json = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode


def _row(
    about: dict[str, str], first: str, current: int, width: int, total: Decimal, slices: dict[int, Decimal]
) -> tuple[str, Phase, str, str]:
    # The JSON of {"<slice>": "<sum>"} written out: a slice is an int and a Decimal's str is
    # digits, sign, point and exponent, so neither needs escaping (test_meter_kept_tail.py reads
    # them back).
    sums = "{" + ",".join(f'"{k}":"{v}"' for k, v in sorted(slices.items()) if v) + "}"
    payload = f"{first}\nslice={current}\nwidth={width}\ntotal={total}\nslices={sums}"
    return (SAGA_TOOL, Phase.EXECUTED, _about_json(about), payload)


def give_back_call(journal: Journal, intent: Entry, executed_seq: int) -> None:
    """The call whose INTENT is ``intent`` was compensated: give back what it took, journaled.

    Needs no policy: the INTENT names its debits. A give-back that cannot be journaled is logged;
    the meter then over-counts, which fails closed.
    """
    verdict = parse_verdict(intent.payload)
    if verdict is None or not verdict.debits:
        return
    meter = Meter(journal)
    about = {"saga": intent.saga_id, "why": f"compensated effect seq={executed_seq}"}
    for debit in verdict.debits:
        try:
            meter.give_back(debit, about)
        except SagacityError as exc:
            _log.error("could not give back %s to %s: %s", debit.amount, debit.meter, exc)
