"""The gauges: pending approvals, the oldest one's age and in-doubt calls, read from each store a
live ``Sagacity`` watches, when a metric reader collects.

Seam for the derived index (#12): the gauges read through the functions given to :func:`watch`;
today pending approvals are one read of the request table and in-doubt calls a fold of every saga,
and swapping those functions for index reads makes both O(1).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagacity._otel_instruments import INSTRUMENTS, failed
from sagacity.chain import utc_now

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Observation

    from sagacity.model import ApprovalRequest


def register(meter: Any, observation: Any) -> None:
    """Make the gauges on ``meter`` (``observation``: the API's ``Observation`` class)."""
    spec = {i.name: i for i in INSTRUMENTS}

    def gauge(name: str, callback: Callable[[CallbackOptions], Iterable[Observation]]) -> None:
        i = spec[name]
        meter.create_observable_gauge(name, callbacks=[callback], unit=i.unit, description=i.description)

    gauge("sagacity.approvals.pending", lambda _: _observe_pending(observation, count=True))
    gauge("sagacity.approvals.oldest_age", lambda _: _observe_pending(observation, count=False))
    gauge("sagacity.calls.in_doubt", lambda _: _observe_in_doubt(observation))


@dataclass
class _Watched:
    store: str
    pending: Callable[[Any], Sequence[ApprovalRequest]]
    in_doubt: Callable[[Any], int]


_watched: weakref.WeakKeyDictionary[Any, _Watched] = weakref.WeakKeyDictionary()
_watched_lock = threading.Lock()


def watch(
    owner: Any,
    store: str,
    *,
    pending: Callable[[Any], Sequence[ApprovalRequest]],
    in_doubt: Callable[[Any], int],
) -> None:
    """Report ``owner``'s pending approvals and in-doubt calls in the gauges while it lives.

    ``pending(owner)`` reads the request table (it holds only what is pending) and
    ``in_doubt(owner)`` the saga index's in-doubt rows (a partial index): neither grows with the
    journal. Kept by weak reference; costs nothing until a metric reader collects.
    """
    with _watched_lock:
        _watched[owner] = _Watched(store, pending, in_doubt)


def unwatch(owner: Any) -> None:
    with _watched_lock:
        _watched.pop(owner, None)


def _stores() -> list[tuple[Any, _Watched]]:
    """One watched owner per store (two ``Sagacity`` on one database report it once)."""
    with _watched_lock:
        items = list(_watched.items())
    seen: dict[str, tuple[Any, _Watched]] = {}
    for owner, w in items:
        seen.setdefault(w.store, (owner, w))
    return list(seen.values())


def _observe_pending(observation: Any, *, count: bool) -> Iterator[Observation]:
    now = utc_now()
    for owner, w in _stores():
        try:
            pending = w.pending(owner)
        except Exception:  # noqa: BLE001 - a store down: no observation this time
            failed("the pending-approvals gauge")
            continue
        attrs = {"sagacity.store": w.store}
        if count:
            yield observation(len(pending), attrs)
        else:
            oldest = min((r.created_at for r in pending), default=None)
            yield observation(max(0.0, (now - oldest).total_seconds()) if oldest else 0.0, attrs)


def _observe_in_doubt(observation: Any) -> Iterator[Observation]:
    """In-doubt calls, summed over the saga index's in-doubt sagas at each collection."""
    for owner, w in _stores():
        try:
            value = w.in_doubt(owner)
        except Exception:  # noqa: BLE001 - a store down: no observation this time
            failed("the in-doubt gauge")
            continue
        yield observation(value, {"sagacity.store": w.store})
