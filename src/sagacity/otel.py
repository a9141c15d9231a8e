"""OpenTelemetry traces and metrics for Sagacity (``pip install 'sagacity[otel]'``).

Nothing to call in the common case: once the application configures OpenTelemetry (an SDK
``TracerProvider`` / ``MeterProvider`` set globally, or ``opentelemetry-instrument``), every saga
that starts afterwards is traced and measured. Without the ``opentelemetry-api`` package, or with
it but no provider configured, Sagacity emits nothing and pays (almost) nothing.

These functions are for the other cases::

    import sagacity.otel

    sagacity.otel.enable(tracer_provider=provider, meter_provider=meters)  # not the global ones
    sagacity.otel.enable(capture_content=True)   # tool arguments and results on the spans
    sagacity.otel.disable()                      # nothing, even with an SDK configured
    sagacity.otel.reset()                        # back to the default: follow the global providers

Span names, attributes and metric names are listed in ``docs/observability.md``. Tool arguments
and results (and error messages) are content: recorded only when ``capture_content`` is true, or
by default when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true``, ``SPAN_ONLY``
or ``SPAN_AND_EVENT``. Settings apply to sagas that start afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sagacity._telemetry as _telemetry
from sagacity._otel_instruments import INSTRUMENTS, Instrument
from sagacity._telemetry import CAPTURE_CONTENT_ENV

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

__all__ = ["CAPTURE_CONTENT_ENV", "INSTRUMENTS", "Instrument", "disable", "enable", "enabled", "reset"]


def enable(
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    *,
    capture_content: bool | None = None,
) -> None:
    """Trace and measure with these providers (the global ones for those not given).

    ``capture_content``: record tool arguments and results on spans (None: as the
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` switch says). Raises
    ``ConfigurationError`` when ``opentelemetry-api`` is not installed.
    """
    _telemetry.enable(tracer_provider, meter_provider, capture_content=capture_content)


def disable() -> None:
    """Emit nothing, whatever the application configured, until :func:`enable` or :func:`reset`."""
    _telemetry.disable()


def reset() -> None:
    """The default: on whenever a global provider is configured, content capture by the switch."""
    _telemetry.reset()


def enabled() -> bool:
    """Whether Sagacity is emitting telemetry now: true as soon as a global provider is set
    (in the default mode), not only once the next saga starts."""
    _telemetry.refresh()
    return _telemetry.enabled()
