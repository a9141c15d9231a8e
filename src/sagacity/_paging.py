"""Cursors for paging the saga list: where a page ended, as an opaque string.

The list is ordered by (updated_at, saga_id), newest first, and a cursor names the last saga of
a page by that key, so the next page is a range read that costs the same at any depth (an
offset would cost its own size). The text is URL-safe base64 of a JSON pair, so it survives a
query string and a shell unquoted; callers treat it as opaque.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime

from sagacity.errors import InvalidValueError

_FORMAT = "%Y-%m-%dT%H:%M:%S.%f"


def encode_cursor(updated_at: datetime, saga_id: str) -> str:
    """The cursor after the saga ``saga_id`` last updated at ``updated_at`` (naive UTC)."""
    raw = json.dumps([updated_at.strftime(_FORMAT), saga_id], separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """(updated_at, saga_id) of a cursor; ``InvalidValueError`` if it is not one we made."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        moment, saga_id = json.loads(raw.decode("utf-8"))
        if not isinstance(moment, str) or not isinstance(saga_id, str):
            raise ValueError("not a pair of strings")
        return datetime.strptime(moment, _FORMAT), saga_id
    except (binascii.Error, UnicodeError, ValueError, TypeError) as exc:
        raise InvalidValueError(
            f"after={cursor[:80]!r} is not a saga-list cursor: pass the cursor of the last saga of a "
            'page (SagaSummary.cursor, or the list\'s "next")'
        ) from exc
