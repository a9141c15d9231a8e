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

Liveness leases (:class:`LiveLeases`) answer the other question the journal cannot: is a living
process running this saga right now? They are shared, held from a saga's start to its end, and
read by every process's status reads (``Capability.LIVENESS``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar, cast

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


_PerFile = TypeVar("_PerFile")
#: The one object per lock file in this process (``_one_per_file``), by the file's real path.
_by_path: dict[str, object] = {}
_by_path_lock = threading.Lock()


def _one_per_file(kind: Callable[[str], _PerFile], database: str, suffix: str) -> _PerFile:
    """The one ``kind`` for the lock file beside ``database`` (named ``<real path><suffix>``) in
    this process: POSIX record locks belong to the process and all drop when it closes *any*
    descriptor of the file, so every store on one database must share one open file."""
    path = os.path.realpath(database) + suffix
    with _by_path_lock:
        found = _by_path.get(path)
        if found is None:
            found = _by_path[path] = kind(path)
        return cast(_PerFile, found)


class FileLeases:
    """Leases for one SQLite database file, shared by every store on it in this process.

    POSIX record locks belong to the process and are all dropped when it closes *any*
    descriptor of the file, so the file is opened once per process and never closed.
    """

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
        return _one_per_file(cls, database, "-sagacity-lease")

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


# -- liveness: which sagas a living process is running ---------------------------------------------


class _Held:
    """One liveness key in this process: ``users`` holders, ``token`` what ``take`` returned,
    ``turns`` threads in a hold or release of it right now (forgotten once both are zero)."""

    __slots__ = ("lock", "token", "turns", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.token: object = None
        self.turns = 0
        self.users = 0


class LiveLeases:
    """The liveness leases this process holds on one store (``Capability.LIVENESS``).

    A saga running here (a run, a resume) holds its liveness lease from its start to its end, so
    every process on the store can tell a saga that is running from one whose process died.
    Unlike the compensation lease it is shared: several holders (a resume in one process while
    the run goes on in another) may hold one saga's at once. In this process each lease is
    taken once, when its first holder arrives, and given back when its last one leaves; holders
    are counted per ``key(saga_id)`` (two sagas that hash to one lock share it, so giving back
    one never drops the other's). ``take(key)`` returns what ``drop`` needs to give it back.
    Taking and giving back one key run under that key's lock, so a lease is never given back
    after a newer holder took it; distinct keys do not wait for each other, so a store whose
    ``take`` and ``drop`` are round trips can send concurrent ones together (MariaDB's lease
    session batches them). Correctness never rests on a liveness lease: it only tells reads
    (a status, a list, an adapter's resume helper) the living from the dead.
    """

    def __init__(
        self,
        key: Callable[[str], object],
        take: Callable[[object], object],
        drop: Callable[[object], object],
    ) -> None:
        self._key = key
        self._take = take
        self._drop = drop
        self._lock = threading.Lock()  # guards ``_held`` only; never held across take or drop
        self._held: dict[object, _Held] = {}

    def _enter(self, key: object) -> _Held:
        with self._lock:
            held = self._held.get(key)
            if held is None:
                held = self._held[key] = _Held()
            held.turns += 1
        held.lock.acquire()
        return held

    def _exit(self, key: object, held: _Held) -> None:
        held.lock.release()
        with self._lock:
            held.turns -= 1
            if not held.turns and not held.users:
                del self._held[key]

    def hold(self, saga_id: str) -> None:
        key = self._key(saga_id)
        held = self._enter(key)
        try:
            if not held.users:
                held.token = self._take(key)
            held.users += 1
        finally:
            self._exit(key, held)

    def release(self, saga_id: str) -> None:
        key = self._key(saga_id)
        held = self._enter(key)
        try:
            if not held.users:
                return
            held.users -= 1
            if not held.users:
                try:
                    self._drop(held.token)
                except StoreError:
                    pass  # a dead session or a closed store has given back every lease it held
        finally:
            self._exit(key, held)

    def held(self, saga_ids: Sequence[str]) -> set[str]:
        """Those of ``saga_ids`` this process holds."""
        with self._lock:
            return {sid for sid in saga_ids if (found := self._held.get(self._key(sid))) and found.users}

    def users(self, saga_id: str) -> int:
        """How many holders of the saga's lease (of its key) this process counts."""
        with self._lock:
            found = self._held.get(self._key(saga_id))
            return found.users if found is not None else 0

    def tokens(self) -> list[object]:
        """What every lease held here was taken as (to take them again on a new session)."""
        with self._lock:
            return [held.token for held in self._held.values() if held.users]


class FileLiveness:
    """Liveness leases for one SQLite database: shared POSIX record locks on a byte each of
    ``<db>-sagacity-live`` (apart from the compensation leases' file), one file per process.

    A probe asks the kernel (``F_GETLK``) whether another process holds a saga's byte; it takes
    nothing, so it never disturbs a holder, and costs a system call, no I/O. Locks of this
    process are not reported by the kernel: they are counted in :class:`LiveLeases`.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._fd_lock = threading.Lock()
        self.leases = LiveLeases(_live_offset, self._lock_byte, self._unlock_byte)

    @classmethod
    def for_database(cls, database: str) -> FileLiveness:
        return _one_per_file(cls, database, "-sagacity-live")

    def _descriptor(self, create: bool) -> int | None:
        """The one descriptor of the file in this process (closing any would drop every lock)."""
        with self._fd_lock:
            if self._fd is None and fcntl is not None:
                try:
                    self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
                except OSError as exc:
                    try:  # a reader in a folder it may not write still probes an existing file
                        self._fd = os.open(self.path, os.O_RDONLY)
                    except OSError:
                        if create:
                            raise StoreError(
                                f"cannot open the liveness file {self.path} beside the SQLite journal "
                                f"({exc.strerror}): a running saga locks a byte in it, so it must be "
                                "writable for this process, or its folder must be writable"
                            ) from exc
            return self._fd

    def _lock_byte(self, offset: object) -> object:
        fd = self._descriptor(create=True)
        if fd is not None:
            assert isinstance(offset, int)
            fcntl.lockf(fd, fcntl.LOCK_SH, 1, offset)
        return offset

    def _unlock_byte(self, offset: object) -> None:
        fd = self._descriptor(create=True)
        if fd is not None:
            assert isinstance(offset, int)
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)

    def live_among(self, saga_ids: Sequence[str]) -> set[str]:
        """Those of ``saga_ids`` a living process (this one included) holds."""
        found = self.leases.held(saga_ids)
        return found | self.in_other_processes([sid for sid in saga_ids if sid not in found])

    def in_other_processes(self, saga_ids: Sequence[str]) -> set[str]:
        """Those of ``saga_ids`` another living process holds (the kernel never reports this
        process's own locks)."""
        if fcntl is None or not saga_ids or not os.path.exists(self.path):
            return set()  # no process has ever held one here
        fd = self._descriptor(create=False)
        if fd is None:
            return set()
        return {sid for sid in saga_ids if _locked_elsewhere(fd, _live_offset(sid))}


#: ``struct flock`` as Linux lays it out on 64-bit machines (l_type, l_whence, l_start, l_len,
#: l_pid, padding).
_FLOCK = "hhqqi4x"


def _live_offset(saga_id: str) -> int:
    digest = hashlib.sha256(b"sagacity-live:" + saga_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") & 0x7FFF_FFFF_FFFF


def _locked_elsewhere(fd: int, offset: int) -> bool:
    """Whether another process holds a lock on the byte at ``offset`` (``F_GETLK``)."""
    query = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0)
    answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
    return bool(struct.unpack(_FLOCK, answer)[0] != fcntl.F_UNLCK)


def live_key(scope: str, saga_id: str) -> int:
    """A signed 64-bit key for a saga's liveness lock, apart from :func:`lease_key`'s; ``scope``
    keeps apart stores that share one lock space (PostgreSQL schemas of one database)."""
    text = f"sagacity-live:{scope}\0{saga_id}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big", signed=True)
