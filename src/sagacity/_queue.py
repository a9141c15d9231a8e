"""The approval queue's orders: every pending request reachable a page at a time, in any order.

A queue is read whole from the request table (it is small working state), so sorting and
filtering it costs no extra query; what costs is folding a saga's journal, done only for the
requests shown, or for every candidate when a filter reads the journal (requester, "needs me").
Each order is total (it ends on the request's identity), so a cursor names one place in it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sagacity._paging import ApprovalRequestKey
from sagacity.errors import InvalidValueError
from sagacity.model import ApprovalRequest

#: The queue's orders, each a key over what a cursor keeps. "created" is the default: the
#: longest waiting first (descending: the newest first).
ORDERS: dict[str, Callable[[ApprovalRequestKey], tuple[Any, ...]]] = {
    "created": lambda k: (k.created_at, k.saga_id, k.journal_seq),
    # The soonest to expire first; a request that never expires after every one that does.
    "expires": lambda k: (
        k.expires_at is None,
        k.expires_at or datetime.min,
        k.created_at,
        k.saga_id,
        k.journal_seq,
    ),
    "saga": lambda k: (k.saga_id, k.journal_seq),
    "tool": lambda k: (k.tool_name, k.created_at, k.saga_id, k.journal_seq),
}


def queue_order(sort: str, descending: bool) -> Callable[[ApprovalRequestKey], tuple[Any, ...]]:
    """The key of order ``sort``; ``InvalidValueError`` naming the orders otherwise."""
    if not isinstance(sort, str) or sort not in ORDERS:
        raise InvalidValueError(f"sort must be one of {', '.join(map(repr, ORDERS))}, not {sort!r}")
    if not isinstance(descending, bool):
        raise InvalidValueError(f"descending must be True or False, not {descending!r}")
    return ORDERS[sort]


def arrange(requests: list[ApprovalRequest], sort: str, descending: bool) -> list[ApprovalRequest]:
    """``requests`` in order ``sort``, reversed when ``descending``."""
    key = queue_order(sort, descending)
    return sorted(requests, key=lambda r: key(r.queue_key), reverse=descending)


def past(key: ApprovalRequestKey, after: ApprovalRequestKey, sort: str, descending: bool) -> bool:
    """Whether ``key`` comes after the cursor ``after`` in order ``sort``."""
    order = ORDERS[sort]
    return order(key) < order(after) if descending else order(key) > order(after)
