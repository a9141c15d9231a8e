"""The notifier: a loop that reads events off the journal and delivers each through the outbox.

One round (:meth:`Notifier.run_once`): read the outbox's new rows; derive the events not told
yet (the approval queue and the kill switch every round, the doctor's findings every ``scan``);
route them to their targets; claim what is due in one fenced append (new deliveries, retries
whose time came, claims of notifiers that died); send each claimed delivery and journal its
outcome. A failed attempt is retried after ``backoff`` doubled per attempt (at most
``max_backoff``); after ``max_attempts`` it is a dead letter. :meth:`Notifier.run` repeats rounds
every ``poll`` until stopped. Any number of notifiers may run on one store: the fenced claim
gives each delivery to one of them.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sagacity.chain import utc_now
from sagacity.checks import require_identity
from sagacity.notify._channels import DeliveryError, Sender, send
from sagacity.notify._config import NotifyConfig, Target
from sagacity.notify._events import Event
from sagacity.notify._outbox import DEAD, DELIVERED, FAILED, Delivery, Outbox, OutboxStatus, notifier_lease
from sagacity.notify._routing import targets
from sagacity.notify._watch import Watcher
from sagacity.stores.base import Capability, capable

if TYPE_CHECKING:
    from sagacity._sagacity import Sagacity

__all__ = ["Notifier", "Round", "outbox_status", "requeue_dead_letters", "retry_delay"]

_log = logging.getLogger("sagacity.notify")


def retry_delay(attempt: int, backoff: timedelta, max_backoff: timedelta) -> timedelta:
    """How long after failed attempt ``attempt`` (1, 2, ...) the next one is due: ``backoff``
    doubled per attempt, never more than ``max_backoff``."""
    delay: timedelta = backoff * 2 ** (attempt - 1)
    return min(delay, max_backoff)


@dataclass(frozen=True, slots=True)
class Round:
    """What one round did: deliveries claimed, and how each attempt ended."""

    claimed: int = 0
    delivered: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)


class Notifier:
    """Delivers the events of ``sg``'s journal as ``config`` routes them.

    ``name`` identifies this notifier in the outbox (default: host, process id and a random
    part, so a restarted process is a new notifier and its predecessor's claims are taken over).
    ``sender`` replaces the channels' senders (tests, or a channel of your own).
    """

    def __init__(
        self, sg: Sagacity, config: NotifyConfig, *, name: str | None = None, sender: Sender | None = None
    ) -> None:
        self.sg = sg
        self.config = config
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._liveness = capable(sg.store, Capability.LIVENESS)
        self.outbox = Outbox(sg.journal, self.name, self._liveness)
        self.watcher = Watcher(sg, config)
        self._send = sender or send
        self._untargeted: set[str] = set()  # events no route sends anywhere (asked once a process)
        self._scanned: datetime | None = None
        self._started = False

    def start(self) -> None:
        """Hold this notifier's liveness lease and open the outbox (the first notifier writes
        where the kill switch's history ends). Called by the first round."""
        if self._started:
            return
        if self._liveness is not None:
            self.sg.journal.read(self._liveness.hold_live, notifier_lease(self.name))
        self.outbox.open(self.watcher.switch_tail())
        self._started = True

    def close(self) -> None:
        """Give back the liveness lease (a claim left open is taken over by the next notifier)."""
        if self._started and self._liveness is not None:
            self._liveness.release_live(notifier_lease(self.name))
        self._started = False

    def __enter__(self) -> Notifier:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one round -----------------------------------------------------------------------------------
    def events(
        self, now: datetime, *, outbox: Outbox | None = None, queue: bool = True, scan: bool | None = None
    ) -> list[Event]:
        """The events not told yet, as of ``now``: the approval queue's and the kill switch's
        (``queue``), the doctor's findings (``scan``; None: when ``scan`` has passed since the last)."""
        outbox = outbox or self.outbox

        def known(event_id: str) -> bool:
            return outbox.knows(event_id) or event_id in self._untargeted

        found: list[Event] = []
        if queue:
            found, pending = self.watcher.requests(now, known)
            found += self.watcher.ended(list(outbox.announced()), pending, now, known)
            found += self.watcher.switch_changes(outbox.switch_after or 0, known)
        if scan is None:
            scan = self._scanned is None or now - self._scanned >= self.config.scan
        if scan:
            self._scanned = now
            found += self.watcher.findings(now, known)
        return found

    def run_once(self, now: datetime | None = None) -> Round:
        """One round: derive, route, claim, send, journal each outcome."""
        return self._round(self.outbox, now or utc_now(), queue=True, scan=None)

    def _round(self, outbox: Outbox, now: datetime, *, queue: bool, scan: bool | None) -> Round:
        self.start()
        outbox.refresh()
        fresh: list[tuple[Event, Target]] = []
        for event in self.events(now, outbox=outbox, queue=queue, scan=scan):
            routed = targets(event, self.config)
            if not routed:
                self._untargeted.add(event.id)
            fresh += [(event, target) for target in routed]
        claimed = outbox.claim(fresh, now, self.config.claim_timeout)
        done = Round(len(claimed))
        for delivery in claimed:
            outcome = self._deliver(outbox, delivery, now)
            {DELIVERED: done.delivered, FAILED: done.failed, DEAD: done.dead}[outcome].append(delivery.id)
        return done

    def _deliver(self, outbox: Outbox, delivery: Delivery, now: datetime) -> str:
        channel = self.config.channels.get(delivery.target.channel)
        try:
            if channel is None:
                raise DeliveryError(f"no channel {delivery.target.channel!r} in {self.config.source}")
            self._send(channel, delivery.target, Event.from_body(delivery.event), self.config)
        except DeliveryError as exc:
            return self._failed(outbox, delivery, str(exc), now)
        except Exception as exc:  # noqa: BLE001 - a sender's bug must not stop the other deliveries
            _log.exception("notifier: sending %s failed unexpectedly", delivery.id)
            return self._failed(outbox, delivery, f"{type(exc).__name__}: {exc}", now)
        outbox.record(delivery, DELIVERED)
        return DELIVERED

    def _failed(self, outbox: Outbox, delivery: Delivery, error: str, now: datetime) -> str:
        if delivery.attempts_now >= self.config.max_attempts:
            _log.warning(
                "notifier: %s is a dead letter after %d attempts: %s", delivery.id, delivery.attempt, error
            )
            outbox.record(delivery, DEAD, error=error)
            return DEAD
        delay = retry_delay(delivery.attempts_now, self.config.backoff, self.config.max_backoff)
        outbox.record(delivery, FAILED, retry_at=now + delay, error=error)
        return FAILED

    # -- the loop ----------------------------------------------------------------------------------
    def run(self, stop: threading.Event | None = None) -> None:
        """Run until ``stop`` is set: the approval queue, the kill switch and retries every
        ``poll``; the doctor's scan every ``scan``, on a thread of its own, so a request is never
        held up behind a scan of the flagged sagas. The scan's thread folds the outbox on its
        own (a second ``Outbox`` under this notifier's name): the two share no mutable state,
        and each claim is fenced on the chain as another process's would be. A round that fails
        (the store unreachable) is logged and the next one tries again."""
        stop = stop or threading.Event()
        self.start()
        scans = threading.Thread(
            target=self._loop,
            args=(stop, Outbox(self.sg.journal, self.name, self._liveness), self.config.scan, False, True),
            name=f"sagacity-notify-scan-{self.name}",
            daemon=True,
        )
        scans.start()
        try:
            self._loop(stop, self.outbox, self.config.poll, True, False)
        finally:
            stop.set()
            scans.join()
            self.close()

    def _loop(self, stop: threading.Event, outbox: Outbox, every: timedelta, queue: bool, scan: bool) -> None:
        while not stop.is_set():
            try:
                self._round(outbox, utc_now(), queue=queue, scan=scan)
            except Exception:  # noqa: BLE001 - the loop outlives a store outage
                _log.exception("notifier: a round failed; trying again in %s", every)
            stop.wait(every.total_seconds())

    def status(self) -> OutboxStatus:
        self.outbox.refresh()
        return self.outbox.status()


def requeue_dead_letters(sg: Sagacity, deliveries: Sequence[str] | None = None, *, by: str) -> list[Delivery]:
    """Send dead letters again, once the cause is mended (a receiver's secret, an SMTP login):
    the named deliveries (``None``: every dead letter) are due at the next round of any notifier,
    with ``max_attempts`` more attempts. ``by`` is journaled as who asked. A named delivery that
    is not a dead letter raises ``DeadLetterNotFoundError`` and nothing is journaled; two people
    requeueing one letter at once requeue it once."""
    return Outbox(sg.journal, "requeue", None).requeue(deliveries, require_identity(by))


def outbox_status(sg: Sagacity) -> OutboxStatus:
    """Where the outbox stands (no file needed): its cursor, claims in flight, retries, dead letters."""
    outbox = Outbox(sg.journal, "status", None)
    outbox.refresh()
    return outbox.status()
