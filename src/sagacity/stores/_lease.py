"""Saga leases: who is compensating a saga right now, across threads and processes.

The journal says what was decided; it cannot say whether the process that journaled a
compensation's INTENT is still running it. A lease answers that: a compensation run holds its
saga's lease until it ends, and the lease dies with its holder (a crashed process, a dropped
connection), so ``recover`` that *gets* the lease knows every compensation INTENT without an
outcome belongs to a runner that is gone. Correctness of who decides what still comes from the
fenced appends; the lease only tells the living from the dead.

- In one process: a lock per saga id (threads).
- SQLite: a POSIX record lock (``lockf``) on one byte of a file beside the database, at an
  offset taken from the saga id's SHA-256. The kernel drops it when the process dies.
- PostgreSQL: a session-level advisory lock (``stores/postgres.py``), dropped with the session.
- MariaDB/MySQL: a ``GET_LOCK`` named lock (``stores/mysql.py``), dropped with the session.
"""

from __future__ import annotations

import errno
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ClassVar

from sagacity.errors import StoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: leases hold within one process only
    fcntl = None  # type: ignore[assignment]


def lease_key(saga_id: str) -> int:
    """A signed 64-bit key for the saga (PostgreSQL's advisory lock key space)."""
    digest = hashlib.sha256(b"sagacity-lease:" + saga_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class LocalLeases:
    """One lock per saga id for the threads of this process; idle locks are forgotten."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, saga_id: str, *, wait: bool) -> Iterator[bool]:
        with self._lock:
            lock, users = self._held.get(saga_id) or (threading.Lock(), 0)
            self._held[saga_id] = (lock, users + 1)
        try:
            got = lock.acquire(blocking=wait)
            try:
                yield got
            finally:
                if got:
                    lock.release()
        finally:
            with self._lock:
                lock, users = self._held[saga_id]
                if users == 1:
                    del self._held[saga_id]
                else:
                    self._held[saga_id] = (lock, users - 1)


class FileLeases:
    """Leases for one SQLite database file, shared by every store on it in this process.

    POSIX record locks belong to the process and are all dropped when it closes *any*
    descriptor of the file, so the file is opened once per process and never closed.
    """

    _by_path: ClassVar[dict[str, FileLeases]] = {}
    _by_path_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = LocalLeases()
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600) if fcntl is not None else -1
        except OSError as exc:
            raise StoreError(
                f"cannot open the lease file {path} beside the SQLite journal ({exc.strerror}): "
                "compensating a saga and recover() lock a byte in it, so it must exist writable "
                "for this process, or its folder must be writable so that it can be created"
            ) from exc

    @classmethod
    def for_database(cls, database: str) -> FileLeases:
        path = os.path.realpath(database) + "-sagacity-lease"
        with cls._by_path_lock:
            leases = cls._by_path.get(path)
            if leases is None:
                leases = cls._by_path[path] = cls(path)
            return leases

    @contextmanager
    def hold(self, saga_id: str, *, wait: bool) -> Iterator[bool]:
        with self._local.hold(saga_id, wait=wait) as got:
            if not got or fcntl is None:
                yield got
                return
            offset = lease_key(saga_id) & 0x7FFF_FFFF_FFFF  # a byte in the first 128 TiB
            flags = fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB
            try:
                fcntl.lockf(self._fd, flags, 1, offset)
            except OSError as exc:
                if exc.errno not in (errno.EACCES, errno.EAGAIN):
                    raise
                yield False
                return
            try:
                yield True
            finally:
                fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, offset)


class SessionLeases:
    """Leases as a database server's session locks (PostgreSQL advisory locks, MariaDB/MySQL
    ``GET_LOCK``), all of this process's on one dedicated session, so holders never take the
    connections their own reads and writes need; the server drops them with the session.

    Threads of this process queue on a local lock per saga; the session lock, taken once per saga
    per process, excludes other processes. As the session is shared, a lock another process holds
    is polled with a non-blocking try (backing off to 0.1 s), never waited for on the session.
    """

    def __init__(self, try_lock: Callable[[str], bool], unlock: Callable[[str], object]) -> None:
        """``try_lock(saga_id)``: take the saga's session lock without waiting, True if taken.
        ``unlock(saga_id)``: release it (a ``StoreError`` there is ignored: a dead session has
        released every lock it held)."""
        self._local = LocalLeases()
        self._try_lock = try_lock
        self._unlock = unlock

    @contextmanager
    def hold(self, saga_id: str, *, wait: bool) -> Iterator[bool]:
        with self._local.hold(saga_id, wait=wait) as got:
            if not got:
                yield False
                return
            delay = 0.005
            while not self._try_lock(saga_id):
                if not wait:
                    yield False
                    return
                time.sleep(delay)
                delay = min(0.1, delay * 2)
            try:
                yield True
            finally:
                try:
                    self._unlock(saga_id)
                except StoreError:
                    pass  # a dead session has released every lock it held
