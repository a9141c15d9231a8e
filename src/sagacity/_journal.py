"""The only writer of journal rows: seq assignment, hashing, and the bounded retry of SPEC §4.

The common case costs one round trip. Each saga's tail (seq, hash) is cached in the process, so an
append builds the next row and inserts it directly. The store's primary key on (saga_id, seq) is
what orders writers: an insert that finds its seq taken (another thread, process or machine got
there first) writes nothing, and the append re-reads the tail and tries again with the next seq,
up to ``max_append_attempts`` times. An append is never dropped silently: it lands or raises.

A saga this process has not seen starts optimistically at seq 1; if the saga exists the insert
loses once and the tail is read. An insert whose connection died is *in doubt*: it is resolved by
reading the row back (ours, by hash: done; another's: lost the race; none: insert again).

Two things are not retried blindly against a newer tail:

- A *decision* (``commit``) is built on a state the caller read; it lands only at the seq right
  after that state, or not at all, and the caller reads again and decides again (SPEC §4).
- The INTENT (or AWAITING_APPROVAL) that begins a call: the cached tail is itself a
  compare-and-append, and when it loses, the entries appended meanwhile are read; if one of them
  starts or ends the saga's compensation (another process rejected a gate, recovered the saga),
  the call is refused before its tool runs. The saga stays marked closed in the cache.

A call's outcome may be *held* (``hold``: the deferred durability mode, docs/guide.md): it is not
written on its own but rides in the insert of the saga's next entry from this process (an append
or a decision), all or none. Until then the journal reads the call as in flight; a process that
dies first leaves its INTENT without an outcome, which is what a crash during the call leaves.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

import sagacity._otel_hooks as _otel_hooks
import sagacity._telemetry as _telemetry
import sagacity.chain as chain
from sagacity._json import escape_text, require_storable
from sagacity._payloads import LIFE_TOOL
from sagacity._state import closes_saga
from sagacity.errors import (
    AppendConflictError,
    InvalidValueError,
    SagaClosedError,
    SagaExistsError,
    SagaNotFoundError,
    StoreUnavailableError,
    StoreWriteRefusedError,
)
from sagacity.model import Entry, Phase
from sagacity.stores._deadline import DEADLINE, WAIT_LIMIT
from sagacity.stores.base import Capability, Store, capable

T = TypeVar("T")

#: Default bound on lost races per append: generous, since a loss means another append landed.
DEFAULT_APPEND_ATTEMPTS = 1000
#: Default bound on attempts when the database connection fails.
DEFAULT_RECONNECT_ATTEMPTS = 6
#: Writes refused by a database that still answers reads (a full disk) before an append gives
#: up: about 0.3 s of pauses, not the whole reconnect budget.
_WRITE_REFUSALS = 2
_STRIPES = 1024
_EPOCH = datetime(1970, 1, 1)
_ONE_MICROSECOND = timedelta(microseconds=1)
_PHASE_TEXT = {phase: phase.value for phase in Phase}
#: Saga tails remembered per stripe (128 x 1024 stripes: ~131k sagas in all).
_TAILS_PER_STRIPE = 128
#: The tail of a saga with no entries: seq 0, the chain's genesis hash, not closed.
_NO_TAIL = (0, chain.GENESIS_HASH, False)
#: Phases that begin a call: refused once the saga's compensation started.
_BEGINS_CALL = frozenset({Phase.INTENT, Phase.AWAITING_APPROVAL})

#: One row to journal: (tool_name, phase, input, payload).
Row = tuple[str, Phase, str, str]

Tail = tuple[int, str, bool]
"""A saga's cached tail: its last seq and hash, and whether its compensation started."""

Rider = tuple[str, tuple[int, str], tuple[str, Phase, str, str]]
"""An entry of another chain written in the same insert as an append (``Journal.append_with``):
its saga, the (seq, hash) it must land right after, and its (tool_name, phase, input, payload)."""


class SagaStart:
    """A saga starting in this process: its START entry's input (the start facts), journaled in
    one insert with the saga's first entry, if that entry lands at seq 1 (``Journal.starting``)."""

    __slots__ = ("entry", "input", "landed", "users")

    def __init__(self, input: str) -> None:
        self.input = input
        self.landed = False
        self.users = 1
        #: The START as stored, once it landed (the run that wrote it knows its saga without a read).
        self.entry: Entry | None = None


def _require_row(saga_id: str, tool_name: str, input: str) -> None:
    """Refuse what no journal can hold; the common case (plain ASCII strs without NUL, which are
    storable) in one expression, skipping the three ``require_storable`` calls."""
    if not (
        type(saga_id) is str
        and type(tool_name) is str
        and type(input) is str
        and saga_id.isascii()
        and tool_name.isascii()
        and input.isascii()
        and "\x00" not in saga_id
        and "\x00" not in tool_name
        and "\x00" not in input
    ):
        require_storable("saga_id", saga_id)
        require_storable("tool_name", tool_name)
        require_storable("input", input)
    if not saga_id:
        raise InvalidValueError("saga_id must not be empty")


def _check_open(
    saga_id: str, seq: int, closed: bool, tool_name: str, phase: Phase, *, new_saga: bool
) -> None:
    """Refuse an append the cached tail already rules out: a new saga's first entry in a saga
    that has entries, or a call beginning (or an END) once the saga's compensation started."""
    if seq and new_saga:
        raise SagaExistsError(f"saga {saga_id!r} already has entries (seq 1 to {seq})")
    if closed and (phase in _BEGINS_CALL or tool_name == LIFE_TOOL):
        raise _closed_error(saga_id, tool_name)


def _remember(tails: dict[str, Tail], saga_id: str, tail: Tail) -> None:
    """Cache ``tail`` as the saga's in a stripe's part of the cache (its lock held).

    Re-inserted at the end, so the part forgets the saga least recently appended to first.
    """
    tails.pop(saga_id, None)
    tails[saga_id] = tail
    if len(tails) > _TAILS_PER_STRIPE:
        del tails[next(iter(tails))]


class Journal:
    """Appends and reads hash-chained entries in one store."""

    def __init__(
        self,
        store: Store,
        *,
        max_append_attempts: int = DEFAULT_APPEND_ATTEMPTS,
        reconnect_attempts: int = DEFAULT_RECONNECT_ATTEMPTS,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        if max_append_attempts < 1 or reconnect_attempts < 1:
            raise InvalidValueError("max_append_attempts and reconnect_attempts must be at least 1")
        self.store = store
        self.max_append_attempts = max_append_attempts
        self.reconnect_attempts = reconnect_attempts
        #: Seconds one read waits for an unreachable store, retries included, when the context
        #: sets no limit: a server store's ``connect_timeout`` (None: the retries alone bound it).
        self.wait_limit: float | None = getattr(store, "wait_limit", None)
        self._clock = clock
        # Same-saga appends from this process queue on a stripe lock instead of racing through
        # the database; different sagas rarely share a stripe. Each stripe's lock also guards
        # its part of the tail cache, so an append takes one lock, not a process-wide one that
        # every thread's appends would queue on.
        self._stripes = [threading.Lock() for _ in range(_STRIPES)]
        self._tails: list[dict[str, Tail]] = [{} for _ in range(_STRIPES)]
        # A store that keeps timestamps as text may take an append's hashed stamp (SPEC §3's
        # ``ts``, "<epoch seconds>.<6 digits>") along with the entry, and build its text from
        # that more cheaply than from the datetime (``Capability.STAMPED_INSERT``).
        stamped = capable(store, Capability.STAMPED_INSERT)
        self._insert_at: Callable[[Entry, str], bool] | None = (
            None if stamped is None else stamped.insert_entry_at
        )
        # Sagas starting in this process: the first entry each one lands at seq 1 carries its
        # START with it (one insert, two rows). Looked up only when the tail is seq 0.
        self._starts: dict[str, SagaStart] = {}
        self._starts_lock = threading.Lock()
        # Outcomes held back (``hold``), per saga, until the saga's next insert carries them.
        # Whoever takes them writes them or puts them back; looked up only when not empty.
        self._held: dict[str, list[Row]] = {}
        self._held_lock = threading.Lock()

    # -- starting sagas --------------------------------------------------------------------------
    def starting(self, saga_id: str, facts: str) -> SagaStart:
        """Register the start facts of a saga a run starts here: whichever append or decision
        lands the saga's first entry writes its START (seq 1) before it, in the same insert.
        Two runs of one saga id in this process share the first registration."""
        with self._starts_lock:
            start = self._starts.get(saga_id)
            if start is None:
                start = self._starts[saga_id] = SagaStart(facts)
            else:
                start.users += 1
            return start

    def started(self, saga_id: str) -> None:
        """The run that registered ``starting`` ended: forget its facts."""
        with self._starts_lock:
            start = self._starts.get(saga_id)
            if start is not None:
                start.users -= 1
                if start.users <= 0:
                    del self._starts[saga_id]

    def _start_row(self, saga_id: str) -> SagaStart | None:
        if not self._starts:
            return None
        with self._starts_lock:
            start = self._starts.get(saga_id)
        return start if start is not None and not start.landed else None

    # -- outcomes held back (the deferred durability mode) ----------------------------------------
    def hold(self, saga_id: str, tool_name: str, phase: Phase, input: str, payload: str) -> None:
        """Keep a call's outcome to be written with the saga's next entry from this process
        (``append`` or ``commit``), or by ``release``. Checked now, so bad input fails here."""
        _require_row(saga_id, tool_name, input)
        if type(phase) is not Phase:
            phase = Phase(phase)
        row = (tool_name, phase, input, escape_text(payload))
        with self._held_lock:
            self._held.setdefault(saga_id, []).append(row)

    def take_held(self, saga_id: str) -> list[Row]:
        """The saga's held outcomes, now this caller's to write (or to ``restore_held``)."""
        if not self._held:
            return []
        with self._held_lock:
            return self._held.pop(saga_id, [])

    def restore_held(self, saga_id: str, rows: list[Row]) -> None:
        """Give back outcomes taken but not written (a lost race, a refusal), ahead of newer ones."""
        if rows:
            with self._held_lock:
                self._held[saga_id] = [*rows, *self._held.get(saga_id, [])]

    def release(self, saga_id: str | None = None) -> None:
        """Write the outcomes held for ``saga_id`` (every saga: None) on their own, now."""
        if not self._held:
            return
        with self._held_lock:
            sagas = list(self._held) if saga_id is None else [saga_id]
        for sid in sagas:
            held = self.take_held(sid)
            if held:
                self._append_rows(sid, held, None)

    # -- writing ---------------------------------------------------------------------------------
    def append(
        self,
        saga_id: str,
        tool_name: str,
        phase: Phase,
        input: str = "",
        payload: str = "",
        *,
        new_saga: bool = False,
        carried: list[Entry] | None = None,
    ) -> Entry:
        """Durably append one entry to ``saga_id``'s chain and return it as stored.

        ``payload`` may be any string (NUL and unpaired surrogates are escaped, see
        ``sagacity._json.escape_text``); the identifiers and input must be storable as they are.
        ``new_saga``: the entry must be the saga's first (seq 1); if the saga already has entries,
        ``SagaExistsError`` is raised and nothing is written.
        """
        started = time.perf_counter() if _telemetry.active else 0.0
        _require_row(saga_id, tool_name, input)
        if type(phase) is not Phase:
            phase = Phase(phase)
        stored_payload = escape_text(payload)
        if WAIT_LIMIT.get() is not None:
            # Writing: from here on this context waits for the store as long as the library
            # would, so what the entry starts is not abandoned half-way (stores/_deadline.py).
            WAIT_LIMIT.set(None)
        if self._held and not new_saga:
            held = self.take_held(saga_id)
            if held:
                return self._append_rows(saga_id, held, (tool_name, phase, input, stored_payload), carried)
        stripe = hash(saga_id) % _STRIPES
        tails = self._tails[stripe]
        with self._stripes[stripe]:
            seq, prev, closed = tails.get(saga_id) or _NO_TAIL
            for attempt in range(self.max_append_attempts):
                _check_open(saga_id, seq, closed, tool_name, phase, new_saga=new_saga)
                start = self._start_row(saga_id) if seq == 0 else None
                if start is not None:
                    entry, inserted = self._insert_started(
                        saga_id, start, tool_name, phase, input, stored_payload
                    )
                else:
                    entry, stamp = self._build(
                        saga_id, seq + 1, prev, tool_name, phase, input, stored_payload
                    )
                    try:
                        if self._insert_at is None:
                            inserted = self.store.insert_entry(entry)
                        else:
                            inserted = self._insert_at(entry, stamp)
                    except StoreUnavailableError as exc:
                        inserted = self._confirm([entry], exc)
                if inserted:
                    _remember(tails, saga_id, (entry.seq, entry.hash, closed))
                    if started:
                        _otel_hooks.appended(entry, started)
                    return entry
                seq, prev, closed = self._catch_up(saga_id, seq, closed)
                if attempt >= 3:
                    # Heavy contention: back off a little, with jitter, so writers spread out.
                    time.sleep(random.uniform(0, min(0.05, 0.0005 * attempt)))
        raise AppendConflictError(
            f"append to saga {saga_id!r} ({tool_name} {phase}) lost the race for the next seq "
            f"{self.max_append_attempts} times; nothing was written"
        )

    def _append_rows(
        self, saga_id: str, held: list[Row], last: Row | None, carried: list[Entry] | None = None
    ) -> Entry:
        """The held outcomes ``held`` and then ``last`` (None: the outcomes alone) in one insert
        at the saga's tail, retried like ``append`` when another writer took the seq. If ``last``
        begins a call in a saga whose compensation started, the outcomes are written alone and
        the call is refused (``SagaClosedError``): they record effects that happened. The
        outcomes as stored are added to ``carried``."""
        started = time.perf_counter() if _telemetry.active else 0.0
        stripe = hash(saga_id) % _STRIPES
        tails = self._tails[stripe]
        with self._stripes[stripe]:
            seq, prev, closed = tails.get(saga_id) or _NO_TAIL
            for attempt in range(self.max_append_attempts):
                refused = last is not None and closed and (last[1] in _BEGINS_CALL or last[0] == LIFE_TOOL)
                entries = self._chain(saga_id, seq, prev, held if refused or last is None else [*held, last])
                try:
                    inserted = self.store.insert_entries(entries)
                except StoreUnavailableError as exc:
                    # Not confirmed: the outcomes are not given back (they may have landed); their
                    # INTENT stays in doubt, as when an outcome's own append fails.
                    inserted = self._confirm(entries, exc)
                if inserted:
                    _remember(tails, saga_id, (entries[-1].seq, entries[-1].hash, closed))
                    if carried is not None:
                        carried.extend(entries[: len(held)])
                    if started:
                        _otel_hooks.committed(entries, started)
                    if refused:
                        raise _closed_error(saga_id, last[0] if last is not None else "")
                    return entries[-1]
                seq, prev, closed = self._catch_up(saga_id, seq, closed)
                if attempt >= 3:
                    time.sleep(random.uniform(0, min(0.05, 0.0005 * attempt)))
        self.restore_held(saga_id, held)
        raise AppendConflictError(
            f"append to saga {saga_id!r} (with {len(held)} held outcome(s)) lost the race for the "
            f"next seq {self.max_append_attempts} times; nothing was written"
        )

    def _chain(self, saga_id: str, seq: int, prev: str, rows: list[Row]) -> list[Entry]:
        """``rows`` built as the saga's entries after (``seq``, ``prev``), stamped now."""
        entries = []
        for tool_name, phase, text, payload in rows:
            seq += 1
            entry, _ = self._build(saga_id, seq, prev, tool_name, phase, text, payload)
            entries.append(entry)
            prev = entry.hash
        return entries

    def draft(self, saga_id: str, after: tuple[int, str], rows: list[Row]) -> list[Entry]:
        """``rows`` (payloads as held: escaped) as they would follow ``after``; written only
        when passed to ``commit`` as ``carried``."""
        return self._chain(saga_id, after[0], after[1], rows)

    def append_with(
        self,
        saga_id: str,
        tool_name: str,
        phase: Phase,
        input: str,
        payload: str,
        riders: Sequence[Rider],
        *,
        new_saga: bool = False,
    ) -> list[Entry] | None:
        """``append`` with entries of other chains (a budget's debits) in the same insert: all
        of them land with the entry, or none does; returns every entry written, the appended one
        last. One try: None, writing nothing, when any of them found its seq taken (the saga's
        tail is then re-read into the cache): what the riders were decided on may have moved, so
        the caller decides them again."""
        started = time.perf_counter() if _telemetry.active else 0.0
        _require_row(saga_id, tool_name, input)
        for rider_saga, _, (rider_tool, _, rider_input, _) in riders:
            _require_row(rider_saga, rider_tool, rider_input)
        if WAIT_LIMIT.get() is not None:
            WAIT_LIMIT.set(None)  # writing: wait for the store as long as the library would
        paid = []
        for rider_saga, (after, prev_hash), (rider_tool, rider_phase, rider_input, rider_payload) in riders:
            rider, _ = self._build(
                rider_saga,
                after + 1,
                prev_hash,
                rider_tool,
                rider_phase,
                rider_input,
                escape_text(rider_payload),
            )
            paid.append(rider)
        stripe = hash(saga_id) % _STRIPES
        tails = self._tails[stripe]
        with self._stripes[stripe]:
            seq, prev, closed = tails.get(saga_id) or _NO_TAIL
            _check_open(saga_id, seq, closed, tool_name, phase, new_saga=new_saga)
            start = self._start_row(saga_id) if seq == 0 else None
            own: list[Entry] = []
            if start is not None:
                first, _ = self._build(
                    saga_id, 1, chain.GENESIS_HASH, LIFE_TOOL, Phase.INTENT, start.input, ""
                )
                own.append(first)
                seq, prev = 1, first.hash
            entry, _ = self._build(saga_id, seq + 1, prev, tool_name, phase, input, escape_text(payload))
            written = [*paid, *own, entry]
            try:
                inserted = self.store.insert_entries(written)
            except StoreUnavailableError as exc:
                inserted = self._confirm(written, exc)
            if not inserted:
                seq = 0 if start is not None else seq
                _remember(tails, saga_id, self._catch_up(saga_id, seq, closed))
                return None
            if start is not None:
                start.entry = own[0]
                start.landed = True
            _remember(tails, saga_id, (entry.seq, entry.hash, closed))
        for rider in paid:
            self._advance(rider)
        if started:
            _otel_hooks.committed(written, started)
        return written

    def _advance(self, entry: Entry, closed: bool = False) -> None:
        """Cache ``entry`` as its saga's tail (``closed``: its compensation started at or before
        it), unless the cache already knows a later one."""
        stripe = hash(entry.saga_id) % _STRIPES
        with self._stripes[stripe]:
            tails = self._tails[stripe]
            cached = tails.get(entry.saga_id)
            if cached is None or cached[0] < entry.seq:
                closed = closed or closes_saga(entry) or (cached is not None and cached[2])
                _remember(tails, entry.saga_id, (entry.seq, entry.hash, closed))

    def _insert_started(
        self, saga_id: str, start: SagaStart, tool_name: str, phase: Phase, input: str, payload: str
    ) -> tuple[Entry, bool]:
        """The saga's START at seq 1 and the entry at seq 2, in one insert (all or none)."""
        first, _ = self._build(saga_id, 1, chain.GENESIS_HASH, LIFE_TOOL, Phase.INTENT, start.input, "")
        entry, _ = self._build(saga_id, 2, first.hash, tool_name, phase, input, payload)
        try:
            inserted = self.store.insert_entries([first, entry])
        except StoreUnavailableError as exc:
            inserted = self._confirm([first, entry], exc)
        if inserted:
            start.entry = first
            start.landed = True
        return entry, inserted

    def commit(
        self,
        saga_id: str,
        after: tuple[int, str],
        rows: list[tuple[str, Phase, str, str]],
        carried: list[Entry] | None = None,
    ) -> list[Entry] | None:
        """Append ``rows`` (tool_name, phase, input, payload) right after ``after`` (seq, hash),
        all of them or none: a decision's compare-and-append. ``carried``: held outcomes
        ``draft``-ed after ``after``, written first in the same insert.

        Returns the entries as stored (``carried`` included), or None, writing nothing, if the
        saga's tail is no longer ``after`` (another writer got there first): the caller must read
        again and decide again.
        """
        started = time.perf_counter() if _telemetry.active else 0.0
        for tool_name, _, text, _ in rows:
            require_storable("tool_name", tool_name)
            require_storable("input", text)
        require_storable("saga_id", saga_id)
        if WAIT_LIMIT.get() is not None:
            WAIT_LIMIT.set(None)  # writing: wait for the store as long as the library would
        seq, prev = after
        start = self._start_row(saga_id) if seq == 0 else None
        entries = list(carried or ())
        if entries:
            seq, prev = entries[-1].seq, entries[-1].hash
        closed = False
        if start is not None:  # the saga's first entries: its START goes first
            rows = [(LIFE_TOOL, Phase.INTENT, start.input, ""), *rows]
        for tool_name, phase, text, payload in rows:
            seq += 1
            entry, _ = self._build(saga_id, seq, prev, tool_name, Phase(phase), text, escape_text(payload))
            entries.append(entry)
            prev = entry.hash
            closed = closed or closes_saga(entry)
        try:
            inserted = self.store.insert_entries(entries)
        except StoreUnavailableError as exc:
            inserted = self._confirm(entries, exc)
        if not inserted:
            return None
        if start is not None:
            start.entry = entries[0]
            start.landed = True
        self._advance(entries[-1], closed)
        if started:
            _otel_hooks.committed(entries, started)
        return entries

    def is_closed(self, saga_id: str) -> bool:
        """Whether this process has seen the saga's compensation start (cheap; may be stale)."""
        stripe = hash(saga_id) % _STRIPES
        with self._stripes[stripe]:
            cached = self._tails[stripe].get(saga_id)
        return cached is not None and cached[2]

    def _build(
        self,
        saga_id: str,
        seq: int,
        prev: str,
        tool_name: str,
        phase: Phase,
        input: str,
        payload: str,
    ) -> tuple[Entry, str]:
        """The entry, stamped now, and its stamp as hashed (``ts``: "<seconds>.<6 digits>")."""
        # chain.entry_hash(..., chain.to_utc_micros(ns)) written out for the hot path: the
        # truncated microseconds give both the stored datetime and the hashed ``ts`` directly.
        micros = self._clock() // 1000
        seconds, fraction = divmod(micros, 1_000_000)
        ts = _EPOCH + micros * _ONE_MICROSECOND  # half the cost of timedelta(microseconds=...)
        phase_text = _PHASE_TEXT[phase]  # ``phase.value`` is two Python calls (enum descriptors)
        stamp = f"{seconds}.{fraction:06d}"
        digest = chain._digest(
            prev, saga_id, str(seq), tool_name, phase_text, input, payload, stamp, chain.APPEND_SHA256
        )
        return Entry(saga_id, seq, tool_name, phase_text, input, payload, ts, digest), stamp

    def _confirm(self, entries: list[Entry], failure: StoreUnavailableError) -> bool:
        """After an insert whose outcome is unknown: read the first row back, and insert again
        if absent (several entries are inserted all or none, so the first tells for all).

        True if these entries are now stored, False if another writer took their seq.
        """
        entry = entries[0]
        refusals = 1 if isinstance(failure, StoreWriteRefusedError) else 0
        for attempt in range(1, self.reconnect_attempts):
            time.sleep(min(2.0, 0.05 * 2**attempt))
            try:
                existing = self.store.get_entry(entry.saga_id, entry.seq)
            except StoreUnavailableError as exc:
                failure, refusals = exc, 0
                continue
            if existing is not None:
                # The lost connection did commit (our hash), or another writer won (theirs).
                return existing.hash == entry.hash
            if refusals >= _WRITE_REFUSALS:
                # The database reads but will not write (a full disk): waiting out the whole
                # reconnect budget rarely helps, and the caller must hear it now.
                raise StoreWriteRefusedError(
                    f"append to saga {entry.saga_id!r} seq {entry.seq} ({entry.tool_name} {entry.phase}) "
                    f"not written: the database answers reads but refused the write {refusals} times "
                    f"(is the disk full?): {failure}"
                ) from failure
            try:
                return self.store.insert_entries(entries)
            except StoreWriteRefusedError as exc:
                failure, refusals = exc, refusals + 1
            except StoreUnavailableError as exc:
                failure, refusals = exc, 0
        raise StoreUnavailableError(
            f"append to saga {entry.saga_id!r} seq {entry.seq} ({entry.tool_name} {entry.phase}) "
            f"not confirmed after {self.reconnect_attempts} attempts: {failure}"
        ) from failure

    # -- tail cache ------------------------------------------------------------------------------
    def _catch_up(self, saga_id: str, seq: int, closed: bool) -> Tail:
        """The tail after losing the race at ``seq + 1``: the entries appended since, read, so
        that one that starts or ends the saga's compensation closes it for new calls."""
        newer = self.read(self.store.read_entries, saga_id, seq, None)
        if not newer:  # nothing after ``seq``: the race was lost to a row not yet visible here
            tail = self.read(self.store.tail, saga_id)
            return _NO_TAIL if tail is None else (tail.seq, tail.hash, closed)
        closed = closed or any(closes_saga(e) for e in newer)
        return (newer[-1].seq, newer[-1].hash, closed)

    # -- reading ---------------------------------------------------------------------------------
    def read(self, operation: Callable[..., T], *args: object) -> T:
        """Run an idempotent store read, retrying while the database is unreachable.

        It gives up once the context's limit (``stores._deadline.limited_wait``: the CLI's and
        the HTTP server's) or else the store's ``wait_limit`` has passed, retries and pauses
        included: a database that is down fails the caller within its ``connect_timeout``.
        """
        limit = WAIT_LIMIT.get()
        if limit is None:
            limit = self.wait_limit
        if limit is not None:
            return self._read_within(limit, operation, args)
        for attempt in range(self.reconnect_attempts):
            try:
                return operation(*args)
            except StoreUnavailableError:
                if attempt + 1 == self.reconnect_attempts:
                    raise
                time.sleep(min(2.0, 0.05 * 2 ** (attempt + 1)))
        raise AssertionError("unreachable")

    def _read_within(self, limit: float, operation: Callable[..., T], args: tuple[object, ...]) -> T:
        """``read`` with at most ``limit`` seconds of waiting for an unreachable store.

        The deadline is published in ``DEADLINE`` so that a store waiting for a connection waits
        no longer than the time left. A retry whose pause would end past it is not started.
        """
        start = time.monotonic()
        deadline = start + limit
        token = DEADLINE.set(deadline)
        try:
            attempt = 0
            while True:
                try:
                    return operation(*args)
                except StoreUnavailableError as exc:
                    attempt += 1
                    pause = min(2.0, 0.05 * 2**attempt)
                    now = time.monotonic()
                    if attempt >= self.reconnect_attempts or now + pause >= deadline:
                        raise StoreUnavailableError(
                            f"gave up after {attempt} attempt{'s' if attempt > 1 else ''} in "
                            f"{now - start:.1f} s (wait limit {limit:g} s): {exc}"
                        ) from exc
                    time.sleep(pause)
        finally:
            DEADLINE.reset(token)

    def iter_entries(self, saga_id: str, batch: int = 1000) -> Iterator[Entry]:
        """Every entry of a saga in seq order, ``batch`` rows at a time: memory stays flat."""
        require_storable("saga_id", saga_id)
        after = 0
        while True:
            rows = self.read(self.store.read_entries, saga_id, after, batch)
            yield from rows
            if len(rows) < batch:
                return
            after = rows[-1].seq

    def entries_after(self, saga_id: str, seq: int) -> list[Entry]:
        """The saga's entries with a seq above ``seq``, in order (to bring a state up to date)."""
        return self.read(self.store.read_entries, saga_id, seq, None)

    def entries(self, saga_id: str) -> list[Entry]:
        """Every entry of a saga in seq order (an empty list for an unknown saga)."""
        require_storable("saga_id", saga_id)  # PostgreSQL would refuse a NUL with a driver error
        return self.read(self.store.read_entries, saga_id, 0, None)

    def require_saga(self, saga_id: str) -> None:
        """Raise ``SagaNotFoundError`` unless the saga has at least one entry."""
        require_storable("saga_id", saga_id)
        if (
            self.read(self.store.get_entry, saga_id, 1) is None
            and self.read(self.store.tail, saga_id) is None
        ):
            raise SagaNotFoundError(f"no journal entries for saga {saga_id!r}")

    def verify(self, saga_id: str) -> chain.Verification:
        """Recompute the saga's chain from the store, streaming."""
        result = chain.verify(self.iter_entries(saga_id))
        if result.entry_count == 0:
            raise SagaNotFoundError(f"no journal entries for saga {saga_id!r}")
        if not result.valid and _telemetry.active:
            _otel_hooks.verification_failed("chain")
        return result


def _closed_error(saga_id: str, tool_name: str) -> SagaClosedError:
    return SagaClosedError(
        f"saga {saga_id!r} is being compensated (or has ended): {tool_name} was not "
        "started and did not run; its journal is closed, start a new saga id"
    )
