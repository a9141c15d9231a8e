"""The hash chain, byte-exact and self-contained.

This module imports nothing from the rest of the package, so an auditor can read it alone and a
verifier can be rebuilt from it (or from the README) in any language::

    hash(entry) = hex(SHA-256(F(prev) F(saga_id) F(str(seq)) F(tool_name) F(phase)
                              F(input) F(payload) F(ts)))
    F(s)        = decimal byte length of UTF-8(s) + ":" + UTF-8(s)
    ts          = "<whole seconds since the Unix epoch>.<microseconds, 6 digits>"   (UTC)
    prev        = the previous entry's hash; "0" * 64 for seq 1

Timestamps are truncated to whole microseconds before hashing *and* before writing, so what a store
reads back rehashes to what it stored.
"""

from __future__ import annotations

import hashlib
import importlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

__all__ = [
    "GENESIS_HASH",
    "PHASES",
    "ChainEntry",
    "Verification",
    "entry_hash",
    "frame",
    "timestamp_field",
    "to_utc_micros",
    "utc_now",
    "verify",
]

#: The ``prev`` of every saga's first entry.
GENESIS_HASH = "0" * 64

#: The eight phases, spelled as stored.
PHASES = frozenset(
    {
        "INTENT",
        "EXECUTED",
        "FAILED",
        "COMPENSATED",
        "COMPENSATION_FAILED",
        "AWAITING_APPROVAL",
        "APPROVED",
        "REJECTED",
    }
)

_EPOCH = datetime(1970, 1, 1)
_ONE_MICROSECOND = timedelta(microseconds=1)


def frame(value: str) -> bytes:
    """``F(s)``: the UTF-8 byte length in ASCII decimal, a colon, then the bytes.

    The length prefix makes the concatenation unambiguous: no choice of field values can make two
    different entries hash the same bytes.
    """
    data = value.encode("utf-8")
    return str(len(data)).encode("ascii") + b":" + data


def to_utc_micros(moment: datetime | int) -> datetime:
    """Return ``moment`` as a naive UTC datetime with whole microseconds.

    ``moment`` may be an aware datetime (converted to UTC), a naive datetime (taken as UTC already)
    or an ``int`` of nanoseconds since the epoch, as ``time.time_ns()`` gives; nanoseconds are
    truncated toward the past, never rounded, so the result never lies in the future of the event.
    """
    if isinstance(moment, int):
        micros = moment // 1000
        return _EPOCH + micros * _ONE_MICROSECOND
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def utc_now() -> datetime:
    """Now, as the journal stores time: naive UTC with whole microseconds (the one clock)."""
    return to_utc_micros(time.time_ns())


def timestamp_field(moment: datetime) -> str:
    """The ``ts`` hashed for a timestamp: ``"<epoch seconds>.<6-digit microseconds>"`` in UTC."""
    micros_total = (to_utc_micros(moment) - _EPOCH) // _ONE_MICROSECOND
    seconds, micros = divmod(micros_total, 1_000_000)
    return f"{seconds}.{micros:06d}"


def entry_hash(
    prev_hash: str,
    saga_id: str,
    seq: int,
    tool_name: str,
    phase: str,
    input: str,
    payload: str,
    timestamp: datetime,
) -> str:
    """SHA-256 (lowercase hex) of one entry chained to ``prev_hash``."""
    return _digest(
        prev_hash, saga_id, str(seq), tool_name, str(phase), input, payload, timestamp_field(timestamp)
    )


def _builtin_sha256() -> Callable[[bytes], Any]:
    """CPython's own SHA-256 (``_sha2`` from 3.12, ``_sha256`` before), or OpenSSL's without it."""
    for module in ("_sha2", "_sha256"):
        try:
            return importlib.import_module(module).sha256  # type: ignore[no-any-return]
        except (ImportError, AttributeError):
            continue
    return hashlib.sha256


#: The SHA-256 of an append: one short message, hashed right after the previous commit's fsync,
#: when no code is in cache. OpenSSL's is faster per byte (``verify`` keeps it) but sets up each
#: context through much more code: 4.4 µs against 1.6 µs there (BENCHMARKS.md, "Overhead,
#: closed"). The same digest, whichever computes it.
APPEND_SHA256 = _builtin_sha256()


def _digest(
    prev: str,
    saga_id: str,
    seq: str,
    tool_name: str,
    phase: str,
    input_: str,
    payload: str,
    ts: str,
    sha256: Callable[[bytes], Any] = hashlib.sha256,
) -> str:
    """SHA-256 (lowercase hex) of ``F(f)`` for each field in order: the hash once ``ts`` is a string."""
    # The same bytes as b"".join(frame(f) for f in fields), built as one str and encoded once:
    # UTF-8 of a concatenation is the concatenation of the UTF-8s. When the whole text is ASCII
    # every field is, and a field's byte length is its length: one f-string, the hot path of every
    # append and verify (a %-format was as fast warm and half as fast right after an fsync).
    # Otherwise each field's length is counted in UTF-8 bytes.
    text = (
        f"{len(prev)}:{prev}{len(saga_id)}:{saga_id}{len(seq)}:{seq}{len(tool_name)}:{tool_name}"
        f"{len(phase)}:{phase}{len(input_)}:{input_}{len(payload)}:{payload}{len(ts)}:{ts}"
    )
    if not text.isascii():
        fields = (prev, saga_id, seq, tool_name, phase, input_, payload, ts)
        text = "".join([f"{len(f.encode('utf-8'))}:{f}" for f in fields])
    return sha256(text.encode("utf-8")).hexdigest()  # type: ignore[no-any-return]


class ChainEntry(Protocol):
    """What :func:`verify` needs of an entry (``sagacity.model.Entry`` fits, so does a row tuple
    wrapped in any object with these attributes)."""

    @property
    def saga_id(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def tool_name(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def input(self) -> str: ...
    @property
    def payload(self) -> str: ...
    @property
    def timestamp(self) -> datetime: ...
    @property
    def hash(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Verification:
    """The outcome of checking one chain.

    ``entry_count`` counts every entry read (also those after a break); ``break_at_index`` is the
    zero-based position of the first entry that fails, or -1 when the chain is whole.
    """

    valid: bool
    entry_count: int
    break_at_index: int
    message: str


def verify(entries: Iterable[ChainEntry]) -> Verification:
    """Check entries of one saga, in the order read, against the chain rule.

    An entry fails when its saga differs from the first entry's, its seq is not the previous seq
    plus one (starting at 1: a deleted or inserted row shows here), its phase is not one of the
    eight, or its stored hash differs from the hash recomputed over its fields and the previous
    entry's *stored* hash. Streams: memory stays flat however long the saga is.
    """
    prev = GENESIS_HASH
    saga_id: str | None = None
    count = 0
    first_break = -1
    message = ""
    for index, entry in enumerate(entries):
        count += 1
        if first_break >= 0:
            continue
        problem = _problem(entry, index, prev, saga_id)
        if problem:
            first_break, message = index, f"entry {index} (seq {entry.seq}): {problem}"
        saga_id = entry.saga_id if saga_id is None else saga_id
        prev = entry.hash
    if first_break >= 0:
        return Verification(False, count, first_break, message)
    if count == 0:
        return Verification(True, 0, -1, "no entries")
    return Verification(True, count, -1, f"chain intact: {count} entries")


def _problem(entry: ChainEntry, index: int, prev: str, saga_id: str | None) -> str:
    if saga_id is not None and entry.saga_id != saga_id:
        return f"belongs to saga {entry.saga_id!r}, not {saga_id!r}"
    if entry.seq != index + 1:
        return f"seq is {entry.seq}, expected {index + 1} (an entry is missing or out of place)"
    if str(entry.phase) not in PHASES:
        return f"unknown phase {entry.phase!r}"
    expected = entry_hash(
        prev,
        entry.saga_id,
        entry.seq,
        entry.tool_name,
        entry.phase,
        entry.input,
        entry.payload,
        entry.timestamp,
    )
    if expected != entry.hash:
        return f"hash mismatch: stored {entry.hash}, recomputed {expected}"
    return ""


def idempotency_key(saga_id: str, seq: int) -> str:
    """The stable key of the call whose INTENT is (saga_id, seq).

    ``"sgc_"`` + the first 40 hex digits of SHA-256 over the framed saga id and seq (the chain's
    framing, so ids holding any character cannot collide). 44 ASCII characters: short enough for
    payment APIs' idempotency headers, the same on every retry and after a restart.
    """
    digest = hashlib.sha256(b"sagacity-idempotency:" + frame(saga_id) + frame(str(seq))).hexdigest()
    return "sgc_" + digest[:40]
