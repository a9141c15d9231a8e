"""What Sagacity emits, and the handles it emits through while telemetry is on.

:data:`INSTRUMENTS` is the table of metrics (docs/observability.md lists the same); :class:`Otel`
holds the tracer and the instruments made from it once a provider is configured (the switch,
``_telemetry``, makes one). Every hook swallows its own errors through :func:`failed` (logged once
per kind, logger ``sagacity.otel``): telemetry must never fail a saga.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagacity._version import __version__

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import Counter, Histogram, Meter, MeterProvider
    from opentelemetry.trace import Link, Span, Tracer, TracerProvider

log = logging.getLogger("sagacity.otel")


@dataclass(frozen=True)
class Instrument:
    """One metric Sagacity emits: its name, kind, unit and meaning (docs/observability.md)."""

    name: str
    kind: str  # counter | histogram | gauge
    unit: str
    description: str


INSTRUMENTS = (
    Instrument(
        "sagacity.tool.calls",
        "counter",
        "{call}",
        "Wrapped tool calls in sagas, by gen_ai.tool.name and sagacity.call.outcome "
        "(EXECUTED, FAILED, AWAITING_APPROVAL, REFUSED, IN_DOUBT).",
    ),
    Instrument(
        "sagacity.sagas", "counter", "{saga}", "Saga runs ended in this process, by sagacity.saga.status."
    ),
    Instrument(
        "sagacity.compensations",
        "counter",
        "{compensation}",
        "Compensation steps, by sagacity.compensation.outcome (COMPENSATED, SKIPPED, "
        "COMPENSATION_FAILED) and sagacity.tool.name.",
    ),
    Instrument(
        "sagacity.decisions",
        "counter",
        "{decision}",
        "Decisions asked of Sagacity, by sagacity.decision.kind (approve, reject, resume, expire, "
        "resolve, recover) and sagacity.decision.outcome (accepted, refused, not_found, failed).",
    ),
    Instrument(
        "sagacity.journal.append.duration",
        "histogram",
        "s",
        "Time to append to the journal durably, as the caller waits for it (group commit and lost "
        "races included), by sagacity.journal.operation (append, decision).",
    ),
    Instrument(
        "sagacity.journal.batch.size",
        "histogram",
        "{entry}",
        "Entries written per group-commit batch (SQLite and PostgreSQL stores).",
    ),
    Instrument(
        "sagacity.verification.failures",
        "counter",
        "{verification}",
        "Verifications that found a broken chain or a journal not extending its checkpoint, by "
        "sagacity.verification.kind (chain, checkpoint).",
    ),
    Instrument(
        "sagacity.approvals.pending",
        "gauge",
        "{request}",
        "Approval requests waiting for a decision or a resume, by sagacity.store.",
    ),
    Instrument(
        "sagacity.approvals.oldest_age",
        "gauge",
        "s",
        "Age of the oldest pending approval request (0 when none), by sagacity.store.",
    ),
    Instrument(
        "sagacity.calls.in_doubt",
        "gauge",
        "{call}",
        "Calls and compensations with an INTENT and no outcome, in sagas not live in this process, "
        "by sagacity.store.",
    ),
)

_DURATION_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5
)  # fmt: skip
_BATCH_BUCKETS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)


class Otel:
    """What telemetry needs while it is on: the tracer, the instruments, the settings."""

    def __init__(
        self,
        api: Any,
        tracer_provider: TracerProvider | None,
        meter_provider: MeterProvider | None,
        *,
        capture: bool,
    ) -> None:
        """``api``: the loaded ``opentelemetry`` API (``_telemetry._Api``); ``capture``: record
        content (tool arguments and results, error messages, a human's reason)."""
        self.trace = api.trace
        self.context = api.context
        self.propagator = api.propagator
        self.capture = capture
        self.tracer: Tracer | None = None
        if tracer_provider is not None:
            tracer = tracer_provider.get_tracer("sagacity", __version__)
            if not isinstance(tracer, api.trace.NoOpTracer):  # e.g. OTEL_SDK_DISABLED=true
                self.tracer = tracer
        #: The meter the instruments come from (None: metrics off); the gauges register on it.
        self.meter: Meter | None = None
        self.meter_provider: MeterProvider | None = None
        self.calls: Counter | None = None
        self.sagas: Counter | None = None
        self.compensations: Counter | None = None
        self.decisions: Counter | None = None
        self.verifications: Counter | None = None
        self.append_duration: Histogram | None = None
        self.batch_size: Histogram | None = None
        if meter_provider is not None:
            meter = meter_provider.get_meter("sagacity", __version__)
            if not isinstance(meter, api.metrics.NoOpMeter):
                self.meter_provider = meter_provider
                self.meter = meter
                self._instruments(meter)

    def _instruments(self, meter: Any) -> None:
        spec = {i.name: i for i in INSTRUMENTS}

        def counter(name: str) -> Counter:
            i = spec[name]
            return meter.create_counter(name, unit=i.unit, description=i.description)  # type: ignore[no-any-return]

        def histogram(name: str, buckets: Sequence[float]) -> Histogram:
            i = spec[name]
            return meter.create_histogram(  # type: ignore[no-any-return]
                name, unit=i.unit, description=i.description, explicit_bucket_boundaries_advisory=buckets
            )

        self.calls = counter("sagacity.tool.calls")
        self.sagas = counter("sagacity.sagas")
        self.compensations = counter("sagacity.compensations")
        self.decisions = counter("sagacity.decisions")
        self.verifications = counter("sagacity.verification.failures")
        self.append_duration = histogram("sagacity.journal.append.duration", _DURATION_BUCKETS)
        self.batch_size = histogram("sagacity.journal.batch.size", _BATCH_BUCKETS)

    # -- spans -----------------------------------------------------------------------------------
    def start(
        self,
        name: str,
        attributes: dict[str, Any],
        links: Sequence[Link] = (),
        parent: Context | None = None,
    ) -> Span | None:
        if self.tracer is None:
            return None
        return self.tracer.start_span(
            name, context=parent, kind=self.trace.SpanKind.INTERNAL, attributes=attributes, links=links
        )

    def attach(self, span: Span) -> object:
        return self.context.attach(self.trace.set_span_in_context(span))


_logged: set[str] = set()


def failed(where: str) -> None:
    """A hook failed: say so once per hook (with the traceback), never fail the saga."""
    if where not in _logged:
        _logged.add(where)
        log.warning("sagacity telemetry: %s failed; telemetry goes on without it", where, exc_info=True)


def error_type(exc: BaseException) -> str:
    """``error.type`` for an exception: its class's qualified name, as OpenTelemetry Python does."""
    return type(exc).__qualname__


def error_type_of(described: str) -> str:
    """``error.type`` from a journaled ``ExceptionType: message``."""
    return described.split(":", 1)[0].strip() or "error"
