"""Cursors for paging the saga list and the approval queue: where a page ended, as an opaque string.

The saga list is ordered by (updated_at, saga_id), newest first, the approval queue by
(created_at, saga_id, journal_seq), oldest first, or another order (expiry, saga id, tool). A
cursor names the last item of a page by that
key, so the next page starts after it however the list grew or shrank meanwhile (an offset would
skip or repeat items, and cost its own size). The text is URL-safe base64 of a JSON array, so it
survives a query string and a shell unquoted; callers treat it as opaque.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import NamedTuple

from sagacity.errors import InvalidValueError

_FORMAT = "%Y-%m-%dT%H:%M:%S.%f"


def _encode(moment: datetime, *rest: str | int | None) -> str:
    raw = json.dumps([moment.strftime(_FORMAT), *rest], separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii").rstrip("=")


def _decode(cursor: str) -> list[object]:
    """The JSON array a cursor holds; ``ValueError`` (or a decoding error) if it holds none."""
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    parts = json.loads(raw.decode("utf-8"))
    if not isinstance(parts, list) or not parts or not isinstance(parts[0], str):
        raise ValueError("not a cursor")
    return parts


class ApprovalRequestKey(NamedTuple):
    """What places a request in the approval queue, whichever order it is read in."""

    created_at: datetime
    saga_id: str
    journal_seq: int
    expires_at: datetime | None
    tool_name: str


_UNREADABLE = (binascii.Error, UnicodeError, ValueError, TypeError)


def encode_cursor(updated_at: datetime, saga_id: str) -> str:
    """The saga-list cursor after the saga ``saga_id`` last updated at ``updated_at`` (naive UTC)."""
    return _encode(updated_at, saga_id)


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """(updated_at, saga_id) of a saga-list cursor; ``InvalidValueError`` if it is not one we made."""
    try:
        moment, saga_id = _decode(cursor)
        if not isinstance(moment, str) or not isinstance(saga_id, str):
            raise ValueError("not a pair of strings")
        return datetime.strptime(moment, _FORMAT), saga_id
    except _UNREADABLE as exc:
        raise InvalidValueError(
            f"after={cursor[:80]!r} is not a saga-list cursor: pass the cursor of the last saga of a "
            'page (SagaSummary.cursor, or the list\'s "next")'
        ) from exc


def encode_request_cursor(request: ApprovalRequestKey) -> str:
    """The approval-queue cursor after ``request``: every field the queue can be sorted by, so
    one cursor goes on in any order (:mod:`sagacity._queue`)."""
    expires = request.expires_at.strftime(_FORMAT) if request.expires_at is not None else None
    return _encode(request.created_at, request.saga_id, request.journal_seq, expires, request.tool_name)


def decode_request_cursor(cursor: str) -> ApprovalRequestKey:
    """Where an approval-queue cursor points; ``InvalidValueError`` if it is not one we made (a
    saga-list cursor included)."""
    try:
        moment, saga_id, seq, expires, tool = _decode(cursor)
        if not isinstance(moment, str) or not isinstance(saga_id, str) or type(seq) is not int:
            raise ValueError("not a (time, saga id, seq, ...) tuple")
        if not isinstance(tool, str) or not (expires is None or isinstance(expires, str)):
            raise ValueError("not a (..., expiry, tool) tuple")
        until = datetime.strptime(expires, _FORMAT) if expires is not None else None
        return ApprovalRequestKey(datetime.strptime(moment, _FORMAT), saga_id, seq, until, tool)
    except _UNREADABLE as exc:
        raise InvalidValueError(
            f"after={cursor[:80]!r} is not an approval-queue cursor: pass the cursor of the last "
            "request of a page (PendingApproval.cursor, or the X-Next-Cursor header of "
            "GET /approvals)"
        ) from exc
