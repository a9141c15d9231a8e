"""The hooks the journal and the stores call as they write: the append-duration and batch-size
histograms, the verification-failure counter, and the *sink* that tells a span what was journaled.

How spans learn journal facts without the call path passing them on: the journal calls
:func:`appended` / :func:`committed` with every entry it lands, and they go to the sink that is
current in this context (a ``ContextVar``): the tool-call or decision span that was entered around
the work. Context variables follow ``await``, tasks and ``asyncio.to_thread``, so an INTENT
appended in a worker thread reaches the span of the call that made it. Each hook is called only
while ``_telemetry.active``, and swallows its own errors.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sagacity._telemetry as _telemetry
from sagacity._otel_instruments import failed

if TYPE_CHECKING:
    from sagacity.model import Entry

_APPEND = {"sagacity.journal.operation": "append"}
_DECISION = {"sagacity.journal.operation": "decision"}


class Sink:
    """Journal facts for one span, from the entries appended while it is current."""

    __slots__ = ("claimed", "first", "intent_seq", "last", "saga_id")

    def __init__(self, saga_id: str | None) -> None:
        self.saga_id = saga_id
        #: A framework's span this call enriched (so a nested call of the tool opens its own).
        self.claimed: object = None
        self.intent_seq: int | None = None
        self.first: Entry | None = None
        self.last: Entry | None = None

    def entry(self, entry: Entry) -> None:
        if self.saga_id is not None and entry.saga_id != self.saga_id:
            return
        if entry.tool_name == _LIFE_TOOL:
            return  # the saga's START (in its first call's insert) or END: not the call's entry
        if self.first is None:
            self.first = entry
        if entry.phase == "INTENT" and self.intent_seq is None:
            self.intent_seq = entry.seq
        else:
            self.last = entry

    def journal_attributes(self, entry: Entry | None) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        if self.intent_seq is not None:
            attrs["sagacity.journal.intent_seq"] = self.intent_seq
        if entry is not None:
            attrs["sagacity.journal.seq"] = entry.seq
            attrs["sagacity.journal.phase"] = str(entry.phase)
            attrs["sagacity.journal.hash"] = entry.hash
        return attrs


#: The tool name of a saga's START and END entries (``_state.LIFE_TOOL``).
_LIFE_TOOL = "sagacity:saga"
current_sink: contextvars.ContextVar[Sink | None] = contextvars.ContextVar("sagacity_otel_sink", default=None)
#: Links the resumed call's span carries (to the span that gated it), set by the resume operation.
resume_links: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar(
    "sagacity_otel_resume_links", default=()
)


def appended(entry: Entry, started: float) -> None:
    """The journal appended ``entry`` (``started`` by ``time.perf_counter()``)."""
    t = _telemetry.live
    if t is None:
        return
    try:
        if t.append_duration is not None:
            t.append_duration.record(time.perf_counter() - started, _APPEND)
        sink = current_sink.get()
        if sink is not None:
            sink.entry(entry)
    except Exception:  # noqa: BLE001 - telemetry never fails an append
        failed("appended")


def committed(entries: Sequence[Entry], started: float) -> None:
    """The journal committed a fenced decision's ``entries``."""
    t = _telemetry.live
    if t is None:
        return
    try:
        if t.append_duration is not None:
            t.append_duration.record(time.perf_counter() - started, _DECISION)
        sink = current_sink.get()
        if sink is not None:
            for entry in entries:
                sink.entry(entry)
    except Exception:  # noqa: BLE001
        failed("committed")


def batch_written(size: int) -> None:
    """A group-commit leader wrote ``size`` entries in one statement."""
    t = _telemetry.live
    if t is not None and t.batch_size is not None:
        try:
            t.batch_size.record(size)
        except Exception:  # noqa: BLE001
            failed("batch_written")


def verification_failed(kind: str) -> None:
    """A verification found a broken chain (``chain``) or a journal not extending its checkpoint."""
    t = _telemetry.live
    if t is not None and t.verifications is not None:
        try:
            t.verifications.add(1, {"sagacity.verification.kind": kind})
        except Exception:  # noqa: BLE001
            failed("verification_failed")
