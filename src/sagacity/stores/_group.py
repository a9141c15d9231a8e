"""Group commit: appends arriving from many threads at once are written by one of them, together.

Each durable commit costs one fsync (SQLite) or one WAL flush and round trip (PostgreSQL). When
several threads append at once, one of them, the *leader*, writes every queued row in one
statement and one commit; the others wait. The rules, and what breaks without each:

- No caller returns before the commit that holds its row has returned: a waiter is released only
  after the leader's write finished. An INTENT is never acknowledged before it is durable.
- A lone writer leads at once, with a batch of one: there is no timer or linger, so the
  single-saga latency pays nothing for the batching. Given ``write_one``, it writes its row
  through that directly, with no request object or wake-up bookkeeping: the path of every
  append of a single saga, where each Python step between two fsyncs is paid (a cold cache
  after the fsync) several times over.
- After its write the leader hands leadership to the oldest waiter and wakes only the requests
  it finished (one lock per request, not ``notify_all``): with 64 threads, waking all of them per
  batch made each take the GIL only to sleep again, and the leader queued behind them for it.
- While any request is queued a leader is active, so no request is ever stranded.
- A batch is at most ``max_batch`` rows, so one statement stays within the drivers' parameter
  limits; the rest wait for the next leader.

:class:`RowWriter` is the writing half, one for every SQL store: it turns a batch into statements
on the store's one writer connection, in the store's dialect.

The same queue batches the MariaDB store's lease-session calls (``GET_LOCK`` / ``RELEASE_LOCK``
as the columns of one ``SELECT``): one round trip per queue of callers, as with appends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import sagacity._otel_hooks as _otel_hooks
import sagacity._telemetry as _telemetry
from sagacity.errors import StoreError, StoreUnavailableError
from sagacity.model import Entry

if TYPE_CHECKING:
    from sagacity.stores._dialect import Cursor, Dialect

C = TypeVar("C", bound="Cursor")

#: Rows per statement: 256 x 8 parameters stays far below SQLite's 32,766 and PostgreSQL's 65,535.
MAX_BATCH = 256

_allocate_lock = threading.Lock


class Pending:
    """One queued request: the leader fills in ``inserted`` or ``error``, then sets ``done``.

    A journal row's request carries its ``entry``; a request of another queue on this class (the
    MariaDB lease session's calls) carries None, its ``params`` saying what to do, and
    ``inserted`` its True/False answer.
    """

    __slots__ = ("done", "entry", "error", "inserted", "params", "rows", "wake")

    def __init__(self, entry: Entry | None, params: tuple[Any, ...], rows: int = 1) -> None:
        self.entry = entry
        self.params = params
        #: More than 1: ``params`` are that many rows' to write all or none (``insert_together``).
        self.rows = rows
        self.inserted = False
        self.error: BaseException | None = None
        self.done = False
        # Held while the request waits; released by the leader that finished it or made it leader.
        self.wake: threading.Lock | None = None

    @property
    def key(self) -> tuple[str, int]:
        assert self.entry is not None, "only a journal row has a key"
        return (self.entry.saga_id, self.entry.seq)

    def outcome(self) -> bool:
        if self.error is not None:
            raise self.error
        return self.inserted


class GroupCommit:
    """The leader/follower queue; ``write`` stores a batch and sets each request's outcome."""

    @classmethod
    def over(
        cls,
        rows: RowWriter,
        take: Callable[[], C],
        give: Callable[[C, bool], None],
        max_batch: int = MAX_BATCH,
    ) -> GroupCommit:
        """The group commit of a SQL store: ``rows`` writes on the store's one writer connection.

        ``take()`` lends its cursor (connecting first if needed; raising if the store is closed);
        ``give(cursor, lost)`` takes it back after each write, dropping the connection if ``lost``.
        """

        def write_one(params: tuple[Any, ...]) -> bool:
            cur = take()
            lost = False
            try:
                return rows.one(cur, params)
            except StoreUnavailableError:
                lost = True
                raise
            finally:
                give(cur, lost)

        def write(batch: list[Pending]) -> None:
            cur = take()
            lost = True
            try:
                lost = rows.batch(cur, batch) is not None
            finally:
                give(cur, lost)

        def write_together(params: tuple[Any, ...], count: int) -> bool:
            cur = take()
            lost = False
            try:
                return rows.together(cur, params, count)
            except StoreUnavailableError:
                lost = True
                raise
            finally:
                give(cur, lost)

        return cls(write, max_batch, write_one=write_one, write_together=write_together)

    def __init__(
        self,
        write: Callable[[list[Pending]], None],
        max_batch: int = MAX_BATCH,
        *,
        write_one: Callable[[tuple[Any, ...]], bool] | None = None,
        write_together: Callable[[tuple[Any, ...], int], bool] | None = None,
        journal: bool = True,
    ) -> None:
        """``journal=False``: a queue of other calls than appends (the MariaDB lease session's),
        whose batches telemetry must not count as the journal's. ``write_together(params, n)``
        writes n rows all or none and says whether they went in (``insert_together``)."""
        self._write = write
        self._write_together = write_together
        self._journal = journal
        # Writes one row's params and says whether it went in (raising the store's error): the
        # lone writer's path. Without it a lone row is written as a batch of one.
        self._write_one = write_one
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._queue: list[Pending] = []
        self._leading = False
        #: The largest batch written so far (tests read it to prove a multi-row write happened).
        self.largest_batch = 0

    def insert_together(self, params: tuple[Any, ...], count: int) -> bool:
        """Write ``count`` rows (``params`` one after the other) all or none, in the queue like
        any append: a saga's START with its first entry, a decision's rows. Outside the queue, on
        a connection of their own, they would contend with the leader for the database's write
        lock (SQLite: a busy wait) on every saga start. True if they went in, False if a key was
        taken (nothing written)."""
        assert self._write_together is not None, "this queue writes rows one request each"
        return self.insert(None, params, count)

    def insert(self, entry: Entry | None, params: tuple[Any, ...], rows: int = 1) -> bool:
        """Write ``params`` (in a batch with whatever is queued meanwhile); the request's answer."""
        with self._lock:
            if self._leading:
                request = Pending(entry, params, rows)
                wake = request.wake = _allocate_lock()
                wake.acquire()
                self._queue.append(request)
            else:
                self._leading = True
                wake = None
        if wake is None:
            # Alone: write our own row now, then pass the leadership on.
            if not self.largest_batch:
                self.largest_batch = 1
            if _telemetry.active and self._journal:
                _otel_hooks.batch_written(1)
            try:
                if rows > 1:
                    assert self._write_together is not None
                    return self._write_together(params, rows)
                if self._write_one is not None:
                    return self._write_one(params)
                request = Pending(entry, params)
                self._write([request])
                return request.outcome()
            finally:
                self._pass_on()
        try:
            wake.acquire()  # until a leader finished our row, or handed us the leadership
        except BaseException:
            self._abandon(request)
            raise
        if not request.done:
            self._lead(self._take())
        return request.outcome()

    def _take(self) -> list[Pending]:
        with self._lock:
            batch = self._queue[: self._max_batch]
            del self._queue[: self._max_batch]
        return batch

    def _abandon(self, request: Pending) -> None:
        """A waiter interrupted (KeyboardInterrupt in the main thread) must not strand the queue.

        Without this, leadership handed to it would never be taken and every later append in the
        process would wait forever. Its own row may still be written by a running batch.
        """
        assert request.wake is not None
        with self._lock:
            if not request.wake.acquire(blocking=False):
                if request in self._queue:
                    self._queue.remove(request)  # never written
                return  # or already in a running batch, which finishes without us
            if request.done:
                return
        self._lead(self._take())  # leadership was handed to us: lead before re-raising

    def queued(self) -> int:
        """Requests waiting for a leader (for tests)."""
        with self._lock:
            return len(self._queue)

    def _pass_on(self) -> None:
        """Wake the oldest waiter to lead next, or stand down when none waits."""
        with self._lock:
            if self._queue:
                successor = self._queue[0].wake
                assert successor is not None
                successor.release()
            else:
                self._leading = False

    def _lead_together(self, requests: list[Pending]) -> None:
        """Rows that must land all or none, after the batch's single rows. Several requests go
        first as one statement (atomic: every request's rows land, or none do); if that fails
        (a key taken by one of them, a value refused) each is written alone, so only the
        request at fault fails. A lost connection fails them all: each caller reads back."""
        if not requests:
            return
        write = self._write_together
        assert write is not None
        if len(requests) > 1 and sum(r.rows for r in requests) <= 4 * MAX_BATCH:  # parameter limits
            try:
                landed = write(tuple(v for r in requests for v in r.params), sum(r.rows for r in requests))
            except StoreUnavailableError as exc:
                for request in requests:
                    request.error = copy_error(exc)
                return
            except Exception:  # noqa: BLE001 - each alone below says which request it was
                landed = False
            if landed:
                for request in requests:
                    request.inserted = True
                return
        for request in requests:
            try:
                request.inserted = write(request.params, request.rows)
            except BaseException as exc:  # noqa: BLE001 - released with its reason
                request.error = exc

    def _all_at_once(self, batch: list[Pending]) -> bool:
        """Single rows and all-or-none requests in one plain statement, one commit: a saga start
        (its START with its first entry) then costs the sagas appending meanwhile no second
        fsync. True when every row went in; else nothing was written (a key taken, a value
        refused) and the batch is written the usual way, single rows and requests apart. A lost
        connection fails them all: each caller reads back."""
        write = self._write_together
        if write is None or sum(r.rows for r in batch) > 4 * MAX_BATCH:  # parameter limits
            return False
        try:
            landed = write(tuple(v for r in batch for v in r.params), sum(r.rows for r in batch))
        except StoreUnavailableError as exc:
            for request in batch:
                request.error = copy_error(exc)
            return True
        except Exception:  # noqa: BLE001 - the usual way below says which request it was
            return False
        if landed:
            for request in batch:
                request.inserted = True
        return landed

    def _lead(self, batch: list[Pending]) -> None:
        self.largest_batch = max(self.largest_batch, len(batch))
        if _telemetry.active and self._journal:
            _otel_hooks.batch_written(len(batch))
        single = [request for request in batch if request.rows == 1]
        try:
            if single and len(single) < len(batch) and self._all_at_once(batch):
                return
            if single:
                try:
                    self._write(single)
                except BaseException as exc:  # noqa: BLE001 - every waiter must be released, with a reason
                    for request in single:
                        request.error = exc if len(single) == 1 else copy_error(exc)
            self._lead_together([request for request in batch if request.rows > 1])
        finally:
            # Hand over before waking the finished: the next batch's commit starts sooner.
            self._pass_on()
            for request in batch:
                request.done = True  # before its wake: a woken waiter reads it
                if request.wake is not None:
                    request.wake.release()


def copy_error(exc: BaseException) -> BaseException:
    """A fresh exception per waiter: one instance raised in many threads would share a traceback."""
    if not isinstance(exc, StoreError):
        exc = StoreError(f"group commit failed: {exc!r}")
    copy = type(exc)(*exc.args)
    copy.__cause__ = exc
    return copy


def first_of_each_key(batch: list[Pending]) -> list[Pending]:
    """The batch without repeated (saga_id, seq); each repeat is marked not inserted.

    Written one by one, a repeat would find its key taken (by the first of the batch, or by a row
    already stored), so it writes nothing and returns False, exactly as the Store contract says.
    """
    seen: set[tuple[str, int]] = set()
    unique: list[Pending] = []
    for request in batch:
        key = request.key
        if key in seen:
            request.inserted = False
        else:
            seen.add(key)
            unique.append(request)
    return unique


class RowWriter:
    """Writes the group commit's rows on one connection and sets each request's outcome.

    - A row alone is one autocommit INSERT: its own durable transaction, one round trip.
    - A batch is one multi-row INSERT in autocommit: one transaction, one fsync or WAL flush.
      ``optimistic``: first as a plain INSERT, which is a single step where no key is taken (the
      common case; SQLite's ``sqlite3_step`` count mattered, BENCHMARKS.md); only if it fails on
      a taken key (writing nothing) again skipping taken keys and returning those written. Not
      optimistic (PostgreSQL, where the round trip is the cost): skipping from the start. A
      dialect that cannot skip taken keys (MariaDB/MySQL) writes each row alone after a failure.
    - A statement that meets a failed connection (``StoreUnavailableError``) may or may not have
      committed: every caller of the batch gets that error and resolves its own row by reading it
      back (``Journal._confirm``); the store drops the connection. Any other error fails the
      statement whole, and each row is then written alone, so a row the database refuses fails
      alone.
    """

    def __init__(
        self,
        dialect: Dialect,
        translate: Callable[[BaseException], StoreError],
        *,
        render: Callable[[str], str] | None = None,
        optimistic: bool = True,
    ) -> None:
        """``translate``: the store's one translation of driver errors. ``render``: statements'
        ``?`` placeholders as the writer's cursor takes them (default: the dialect's)."""
        self._dialect = dialect
        self._errors = dialect.errors
        self._translate = translate
        self._render = render or dialect.sql
        self._one = self._render(dialect.insert_entry())
        self._optimistic = optimistic or not dialect.on_conflict
        self._statements: dict[tuple[int, bool], str] = {}

    def _rows(self, count: int, skip_taken: bool) -> str:
        found = self._statements.get((count, skip_taken))
        if found is None:
            found = self._statements[(count, skip_taken)] = self._render(
                self._dialect.insert_rows(count, skip_taken=skip_taken)
            )
        return found

    def one(self, cur: Cursor, params: Sequence[Any]) -> bool:
        """Write one row; False if its key was taken. Raises the store's error."""
        try:
            cur.execute(self._one, params)
        except self._errors as exc:
            if self._dialect.lost(exc):
                return False
            raise self._translate(exc) from exc
        return cur.rowcount == 1

    def together(self, cur: Cursor, params: Sequence[Any], count: int) -> bool:
        """Write ``count`` rows as one plain multi-row INSERT in autocommit: one statement is
        atomic, so a taken key fails it whole, writing nothing (False). Raises the store's error."""
        try:
            cur.execute(self._rows(count, False), params)
        except self._errors as exc:
            if self._dialect.lost(exc):
                return False
            raise self._translate(exc) from exc
        return True

    def batch(self, cur: Cursor, batch: list[Pending]) -> StoreError | None:
        """Write the batch, setting every request's outcome; the error if the connection failed."""
        rows = batch if len(batch) == 1 else first_of_each_key(batch)
        if len(rows) == 1:
            return self._alone(cur, rows[0])
        params = [value for request in rows for value in request.params]
        dialect = self._dialect
        try:
            if self._optimistic:
                try:
                    cur.execute(self._rows(len(rows), False), params)
                except self._errors as exc:
                    if not dialect.lost(exc):
                        raise
                else:
                    for request in rows:
                        request.inserted = True
                    return None
                # A key was taken; the statement was rolled back whole.
                if not dialect.on_conflict:
                    return self._each(cur, rows)
            cur.execute(self._rows(len(rows), True), params)
            # fetchall() runs the statement to its end: its implicit transaction has committed.
            landed = {(saga_id, int(seq)) for saga_id, seq in cur.fetchall()}
        except self._errors as exc:
            error = self._translate(exc)
            error.__cause__ = exc
            if isinstance(error, StoreUnavailableError):
                for request in rows:
                    request.error = copy_error(error)
                return error
            return self._each(cur, rows)
        for request in rows:
            request.inserted = request.key in landed
        return None

    def _alone(self, cur: Cursor, request: Pending) -> StoreError | None:
        try:
            request.inserted = self.one(cur, request.params)
        except StoreError as exc:
            request.error = exc
            return exc if isinstance(exc, StoreUnavailableError) else None
        return None

    def _each(self, cur: Cursor, rows: list[Pending]) -> StoreError | None:
        """Each row alone; after a failed connection the rest get its error unwritten."""
        for n, request in enumerate(rows):
            lost = self._alone(cur, request)
            if lost is not None:
                for rest in rows[n + 1 :]:
                    rest.error = copy_error(lost)
                return lost
        return None
