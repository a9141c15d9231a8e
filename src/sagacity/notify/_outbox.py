"""The outbox: every delivery's claims and outcomes, as a hash chain of their own.

The notifier keeps its state where the kill switch and the meters keep theirs: in the journal,
in the reserved saga ``sagacity:notify`` (tool ``saga``, phase EXECUTED), so every process on
the store reads the same outbox, it survives any crash, and it is evidence like the rest (who
was told what, when, after how many attempts). A delivery is one event for one target (a
channel, and an address for email); its id is ``<event id>:<target>``. Rows (docs/journal.md):

=========  ==============================================  =====================================
payload    input                                           written
=========  ==============================================  =====================================
opened     ``{}``; payload ``switch_after=<seq>``          once, by the first notifier: kill-switch
                                                           changes up to that seq are history
claim      ``{"delivery","channel","to","event"}`` (the    before a send, fenced on the tail
           first claim; later ones ``{"delivery"}``)
delivered  ``{"delivery"}``                                the target took it
failed     ``{"delivery"}``; ``retry_at=``, ``error=``     an attempt failed; retried from then
dead       ``{"delivery"}``; ``error=``                    the last attempt failed: dead letter
requeued   ``{"delivery"}``; ``by=`` the person who asked  a dead letter sent again: due at once,
                                                           with ``max_attempts`` more attempts
=========  ==============================================  =====================================

Every payload has the lines ``notify=<what>``, ``by=<notifier>`` and ``attempt=<n>``.

**Each delivery by one notifier.** A claim is a compare-and-append on the chain's tail, as a
decision is (``Journal.commit``): two notifiers that read the same tail both try to append right
after it, one lands, the other reads what landed and claims only what is still unclaimed. No
in-process lock carries this, so two processes, or two machines, race safely.

**None lost.** A claim with no outcome belongs to a notifier that died mid-delivery (its liveness
lease is gone) or hung (the claim is older than ``claim_timeout``); any notifier claims it again
(the next attempt) and sends it again, under the same event id, which the receiver drops if the
first send did arrive.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sagacity._journal import Journal
from sagacity._payloads import SAGA_TOOL, payload_attribute
from sagacity.chain import GENESIS_HASH
from sagacity.errors import AppendConflictError, DeadLetterNotFoundError
from sagacity.model import Entry, Phase
from sagacity.notify._config import Target
from sagacity.notify._events import Event, EventKind, iso
from sagacity.stores.base import LivenessStore

__all__ = ["OUTBOX_SAGA", "Delivery", "Outbox", "OutboxStatus", "notifier_lease"]

OUTBOX_SAGA = "sagacity:notify"
#: What the rows say in their ``notify=`` line.
OPENED, CLAIM, DELIVERED, FAILED, DEAD = "opened", "claim", "delivered", "failed", "dead"
REQUEUED = "requeued"
#: Deliveries claimed in one append: bounds the row batch and how long one claim's sends take.
CLAIM_BATCH = 50
_ISO = "%Y-%m-%dT%H:%M:%S.%fZ"


def notifier_lease(notifier: str) -> str:
    """The liveness lease a running notifier holds: gone when its process is."""
    return f"sagacity:notifier:{notifier}"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event for one target, as the outbox says now."""

    id: str
    event: dict[str, Any]
    target: Target
    state: str
    attempt: int
    by: str
    at: datetime
    retry_at: datetime | None = None
    error: str = ""
    #: Attempts made before the last requeue: a requeued dead letter gets ``max_attempts`` more.
    attempts_before: int = 0

    @property
    def attempts_now(self) -> int:
        """Attempts since the delivery was first claimed or last requeued."""
        return self.attempt - self.attempts_before

    @property
    def kind(self) -> EventKind:
        return EventKind(self.event["type"])

    def to_json(self) -> dict[str, Any]:
        return {
            "delivery": self.id,
            "event": self.event["id"],
            "type": self.event["type"],
            "sagaId": self.event.get("sagaId"),
            "target": self.target.key,
            "state": self.state,
            "attempt": self.attempt,
            "by": self.by,
            "at": iso(self.at),
            "retryAt": iso(self.retry_at),
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class OutboxStatus:
    """What ``sagacity notify status`` prints: the chain's cursor and where deliveries stand."""

    cursor: int
    switch_after: int | None
    delivered: int
    in_flight: list[Delivery] = field(default_factory=list)
    retrying: list[Delivery] = field(default_factory=list)
    dead: list[Delivery] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "cursor": self.cursor,
            "switchAfter": self.switch_after,
            "delivered": self.delivered,
            "inFlight": [d.to_json() for d in self.in_flight],
            "retrying": [d.to_json() for d in self.retrying],
            "deadLetters": [d.to_json() for d in self.dead],
        }


def _payload(what: str, by: str, attempt: int, **extra: str) -> str:
    lines = [f"notify={what}", f"by={by}", f"attempt={attempt}"]
    lines += [f"{key}={' '.join(value.split())}" for key, value in extra.items()]
    return "\n".join(lines)


class Outbox:
    """The chain folded as far as this process read it (``refresh`` reads what is new)."""

    def __init__(self, journal: Journal, notifier: str, liveness: LivenessStore | None) -> None:
        self.journal = journal
        self.notifier = notifier
        self.liveness = liveness
        self.seq = 0
        self.hash = GENESIS_HASH
        self.switch_after: int | None = None
        self.deliveries: dict[str, Delivery] = {}
        self.events: dict[str, dict[str, Any]] = {}  # event id -> body

    # -- reading -----------------------------------------------------------------------------------
    def refresh(self) -> None:
        for entry in self.journal.entries_after(OUTBOX_SAGA, self.seq):
            self._apply(entry)

    def _apply(self, entry: Entry) -> None:
        self.seq, self.hash = entry.seq, entry.hash
        what = payload_attribute(entry.payload, "notify=")
        try:
            data = json.loads(entry.input)
        except ValueError:
            return  # not the outbox's row: a fold never fails on a stranger
        if what == OPENED:
            after = payload_attribute(entry.payload, "switch_after=")
            self.switch_after = int(after) if after and after.isdigit() else 0
            return
        if not isinstance(data, dict) or not isinstance(data.get("delivery"), str):
            return
        did = data["delivery"]
        by = payload_attribute(entry.payload, "by=") or ""
        attempt_text = payload_attribute(entry.payload, "attempt=") or "0"
        attempt = int(attempt_text) if attempt_text.isdigit() else 0
        known = self.deliveries.get(did)
        if known is None:
            if what != CLAIM or not isinstance(data.get("event"), dict):
                return
            event = data["event"]
            self.events[str(event.get("id"))] = event
            target = Target(str(data.get("channel")), data.get("to"))
            self.deliveries[did] = Delivery(did, event, target, CLAIM, attempt, by, entry.timestamp)
            return
        if known.state == DELIVERED:
            return  # delivered is final, whatever a slower duplicate writes after it
        if what == REQUEUED:
            if known.state == DEAD:  # written fenced on a tail where it was dead; else a stranger's
                self.deliveries[did] = replace(
                    known,
                    state=FAILED,
                    by=by,
                    at=entry.timestamp,
                    retry_at=entry.timestamp,
                    error=f"requeued by {by}",
                    attempts_before=known.attempt,
                )
            return
        retry = payload_attribute(entry.payload, "retry_at=")
        self.deliveries[did] = replace(
            known,
            state=what or known.state,
            attempt=max(attempt, known.attempt),
            by=by,
            at=entry.timestamp,
            retry_at=datetime.strptime(retry, _ISO) if retry else None,
            error=payload_attribute(entry.payload, "error=") or "",
        )

    def knows(self, event_id: str) -> bool:
        return event_id in self.events

    def announced(self) -> Iterable[tuple[tuple[str, int, str], dict[str, Any]]]:
        """The requests told of (by an ``approval.requested`` claimed), with what was told."""
        for body in self.events.values():
            if body.get("type") == EventKind.APPROVAL_REQUESTED and body.get("sagaId") is not None:
                data = body.get("data") or {}
                yield (str(body["sagaId"]), int(body["seq"]), str(data.get("inputHash"))), data

    # -- writing: every write is appended right after the tail read ----------------------------------
    def open(self, switch_tail: int) -> None:
        """Write the ``opened`` row if no notifier did yet (fenced: one wins)."""
        self.refresh()
        if self.seq:
            if self.switch_after is None:
                self.switch_after = 0
            return
        row = (
            SAGA_TOOL,
            Phase.EXECUTED,
            "{}",
            f"notify={OPENED}\nby={self.notifier}\nswitch_after={switch_tail}",
        )
        landed = self.journal.commit(OUTBOX_SAGA, (0, GENESIS_HASH), [row])
        for entry in landed or ():
            self._apply(entry)
        self.refresh()

    def claim(
        self, fresh: Sequence[tuple[Event, Target]], now: datetime, claim_timeout: timedelta
    ) -> list[Delivery]:
        """Claim what is due: new deliveries, retries whose time came, claims of dead or hung
        notifiers. Fenced on the tail; on a lost race the chain is read again and only what is
        still due is claimed."""
        for _ in range(self.journal.max_append_attempts):
            rows, chosen = self._choose(fresh, now, claim_timeout)
            if not rows:
                return []
            landed = self.journal.commit(OUTBOX_SAGA, (self.seq, self.hash), rows)
            if landed is not None:
                for entry in landed:
                    self._apply(entry)
                return [self.deliveries[did] for did in chosen]
            self.refresh()
        raise AppendConflictError(
            f"{OUTBOX_SAGA!r}: every attempt to claim deliveries lost the race for the next seq"
        )

    def _choose(
        self, fresh: Sequence[tuple[Event, Target]], now: datetime, claim_timeout: timedelta
    ) -> tuple[list[tuple[str, Phase, str, str]], list[str]]:
        rows: list[tuple[str, Phase, str, str]] = []
        chosen: list[str] = []
        for event, target in fresh:
            did = f"{event.id}:{target.key}"
            if did in self.deliveries or did in chosen or len(chosen) >= CLAIM_BATCH:
                continue
            body = {"delivery": did, "channel": target.channel, "to": target.recipient, "event": event.body()}
            rows.append((SAGA_TOOL, Phase.EXECUTED, _compact(body), _payload(CLAIM, self.notifier, 1)))
            chosen.append(did)
        stale = self._stale(now, claim_timeout)
        for delivery in self.deliveries.values():
            if len(chosen) >= CLAIM_BATCH:
                break
            due = (
                delivery.state == FAILED and delivery.retry_at is not None and now >= delivery.retry_at
            ) or (delivery.id in stale)
            if due:
                body = {"delivery": delivery.id}
                rows.append(
                    (
                        SAGA_TOOL,
                        Phase.EXECUTED,
                        _compact(body),
                        _payload(CLAIM, self.notifier, delivery.attempt + 1),
                    )
                )
                chosen.append(delivery.id)
        return rows, chosen

    def _stale(self, now: datetime, claim_timeout: timedelta) -> set[str]:
        """Claims without outcome whose notifier is gone (its lease dropped), or older than
        ``claim_timeout`` (a notifier that hung, or this one's own claim whose outcome could not
        be journaled)."""
        open_claims = [d for d in self.deliveries.values() if d.state == CLAIM]
        others = sorted({notifier_lease(d.by) for d in open_claims if d.by != self.notifier})
        alive = set(others)
        if others and self.liveness is not None:
            alive = self.journal.read(self.liveness.live_among, others)
        return {
            d.id
            for d in open_claims
            if now - d.at >= claim_timeout or (d.by != self.notifier and notifier_lease(d.by) not in alive)
        }

    def requeue(self, deliveries: Sequence[str] | None, by: str) -> list[Delivery]:
        """Send dead letters again (``None``: every one): each is due at once, with a fresh
        ``max_attempts``. Fenced on the tail, as a claim is: of two people requeueing one letter,
        or a requeue racing anything else, one lands and the other is judged on what landed. A
        named delivery that is not a dead letter (unknown, delivered, already requeued) refuses
        the whole request and nothing is journaled."""
        for _ in range(self.journal.max_append_attempts):
            self.refresh()
            dead = [d for d in self.deliveries.values() if d.state == DEAD]
            if deliveries is not None:
                wanted = list(dict.fromkeys(deliveries))
                for did in wanted:
                    found = self.deliveries.get(did)
                    if found is None:
                        raise DeadLetterNotFoundError(
                            f"no delivery {did!r} in the outbox; nothing was requeued"
                        )
                    if found.state != DEAD:
                        raise DeadLetterNotFoundError(
                            f"delivery {did!r} is not a dead letter (it is {found.state}"
                            f"{', ' + found.error if found.error else ''}); nothing was requeued"
                        )
                dead = [self.deliveries[did] for did in wanted]
            if not dead:
                return []
            rows = [
                (SAGA_TOOL, Phase.EXECUTED, _compact({"delivery": d.id}), _payload(REQUEUED, by, d.attempt))
                for d in dead
            ]
            landed = self.journal.commit(OUTBOX_SAGA, (self.seq, self.hash), rows)
            if landed is not None:
                for entry in landed:
                    self._apply(entry)
                return [self.deliveries[d.id] for d in dead]
        raise AppendConflictError(f"{OUTBOX_SAGA!r}: every attempt to requeue lost the race for the next seq")

    def record(
        self, delivery: Delivery, what: str, *, retry_at: datetime | None = None, error: str = ""
    ) -> None:
        """Journal an attempt's outcome (an outcome is a fact, not a decision: appended on the
        tail, however far it moved)."""
        extra: dict[str, str] = {}
        if retry_at is not None:
            extra["retry_at"] = retry_at.strftime(_ISO)
        if error:
            extra["error"] = error[:500]
        self.journal.append(
            OUTBOX_SAGA,
            SAGA_TOOL,
            Phase.EXECUTED,
            _compact({"delivery": delivery.id}),
            _payload(what, self.notifier, delivery.attempt, **extra),
        )

    def status(self) -> OutboxStatus:
        by_state: dict[str, list[Delivery]] = {}
        for delivery in self.deliveries.values():
            by_state.setdefault(delivery.state, []).append(delivery)
        return OutboxStatus(
            self.seq,
            self.switch_after,
            len(by_state.get(DELIVERED, [])),
            by_state.get(CLAIM, []),
            by_state.get(FAILED, []),
            by_state.get(DEAD, []),
        )


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
