"""OpenTelemetry's switch: the one module that knows whether telemetry is on, and costs nothing
while it is off.

Telemetry is *on* when the ``opentelemetry`` API is importable and a tracer or meter provider has
been configured, either globally by the application (``set_tracer_provider`` /
``set_meter_provider``, what every SDK set-up and ``opentelemetry-instrument`` do) or explicitly
through :mod:`sagacity.otel`. The API's own default providers (the proxy and no-op ones) count as
not configured. Whether it is on is the module attribute :data:`active`:

- The tool-call hot path (``_saga.SagaRun``) has no telemetry code. When a saga starts with
  telemetry on, the facade makes a ``_traced.TracedSagaRun`` instead, which wraps the same calls in
  spans. Off, the only cost per call is the journal's two ``if _telemetry.active`` checks per
  append (one global attribute read each).
- Every other hook site checks :data:`active` (or gets a no-op object) before calling into the
  other telemetry modules.
- The import of ``opentelemetry`` happens once, on the first check (a saga's start, a
  ``Sagacity``), never at ``import sagacity``; without it installed nothing else is ever tried.

While it is on, :data:`live` holds the tracer and the instruments (``_otel_instruments.Otel``). The
rest reads it: the journal's and the stores' hooks (``_otel_hooks``), the spans of calls, sagas
and compensations (``_otel_spans``) and the facade's decisions (``_otel_operations``). The gauges
(``_otel_gauges``) are registered on its meter as it is made.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sagacity._otel_gauges as _otel_gauges
from sagacity._otel_instruments import Otel
from sagacity.errors import ConfigurationError

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

__all__ = ["CAPTURE_CONTENT_ENV", "active", "disable", "enable", "enabled", "refresh", "reset"]

#: True while telemetry is on; read by every hook site before it calls in here.
active = False

#: The standard GenAI content-capture switch (OpenTelemetry Python's GenAI instrumentations):
#: ``true`` (the original boolean), or ``SPAN_ONLY`` / ``SPAN_AND_EVENT`` (the enum that
#: ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` reads) turn capture on; anything
#: else, ``EVENT_ONLY`` included (Sagacity emits no events), leaves it off.
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CAPTURE_VALUES = frozenset({"true", "span_only", "span_and_event"})


# -- switching on and off ------------------------------------------------------------------------
_UNRESOLVED: Any = object()
_api: Any = _UNRESOLVED  # the opentelemetry API modules once imported; None when not installed
_mode = "auto"  # auto: follow the global providers; on: sagacity.otel.enable(); off: disable()
_lock = threading.Lock()
#: The tracer and the instruments while telemetry is on (None while off): what every hook reads.
live: Otel | None = None
#: The global providers auto mode last acted on: nothing to do while they stay the same.
_seen: tuple[object, object] = (None, None)
_seen_both = False


def _load() -> Any:
    """The ``opentelemetry`` API, imported once; None when it is not installed."""
    global _api  # noqa: PLW0603 - module attributes: one read per hook site
    if _api is _UNRESOLVED:
        try:
            from opentelemetry import context, metrics, trace
            from opentelemetry.environment_variables import (
                OTEL_PYTHON_METER_PROVIDER,
                OTEL_PYTHON_TRACER_PROVIDER,
            )
            from opentelemetry.metrics import _internal as metrics_internal
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        except ImportError:
            _api = None
        else:
            _api = _Api(
                context,
                metrics,
                trace,
                TraceContextTextMapPropagator(),
                metrics_internal,
                OTEL_PYTHON_TRACER_PROVIDER in os.environ,
                OTEL_PYTHON_METER_PROVIDER in os.environ,
            )
    return _api


@dataclass(frozen=True)
class _Api:
    context: Any
    metrics: Any
    trace: Any
    propagator: Any
    metrics_internal: Any
    #: A provider named by environment variable: the public getters load it on first call.
    tracer_from_env: bool
    meter_from_env: bool

    def tracer_provider(self) -> Any:
        """The global tracer provider the application set, or None.

        Read from the API module's global (a saga's start must not pay the getter's environment
        look-up); the public getter where that global is gone (another API version) or where an
        environment variable names a provider for the getter to load.
        """
        provider = getattr(self.trace, "_TRACER_PROVIDER", _UNRESOLVED)
        if provider is _UNRESOLVED or (provider is None and self.tracer_from_env):
            provider = self.trace.get_tracer_provider()
        return provider if provider is not None and _configured(provider, "opentelemetry.trace") else None

    def meter_provider(self) -> Any:
        """The global meter provider the application set, or None (as ``tracer_provider``)."""
        provider = getattr(self.metrics_internal, "_METER_PROVIDER", _UNRESOLVED)
        if provider is _UNRESOLVED or (provider is None and self.meter_from_env):
            provider = self.metrics.get_meter_provider()
        return provider if provider is not None and _configured(provider, "opentelemetry.metrics") else None


def _configured(provider: object, api_package: str) -> bool:
    """A provider the application set: not one of the API package's own (proxy or no-op)."""
    return not type(provider).__module__.startswith(api_package)


def refresh() -> None:
    """In auto mode, turn on (or complete) telemetry if a global provider was configured since.

    Called at each saga's start and when a ``Sagacity`` is made: one check once both providers
    are in use or without the API installed, two provider look-ups otherwise.
    """
    global _seen  # noqa: PLW0603 - module attributes: one read per hook site
    if _mode != "auto" or _seen_both:
        return
    api = _load()
    if api is None:
        return
    seen = (api.tracer_provider(), api.meter_provider())
    if seen == _seen:
        return
    with _lock:
        if _mode == "auto":
            _seen = seen
            _switch(_on(api, *seen, capture_content=None))


def enable(
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    *,
    capture_content: bool | None = None,
) -> None:
    """Turn telemetry on with these providers (the global ones where None). See sagacity.otel."""
    global _mode  # noqa: PLW0603 - module attributes: one read per hook site
    api = _load()
    if api is None:
        raise ConfigurationError(
            "OpenTelemetry is not installed: pip install 'sagacity[otel]' (and the SDK with the "
            "exporters your pipeline uses)"
        )
    with _lock:
        _mode = "on"
        _switch(
            _on(
                api,
                tracer_provider if tracer_provider is not None else api.trace.get_tracer_provider(),
                meter_provider if meter_provider is not None else api.metrics.get_meter_provider(),
                capture_content=capture_content,
            )
        )


def disable() -> None:
    """Turn telemetry off, whatever the application configured. See sagacity.otel."""
    global _mode  # noqa: PLW0603 - module attributes: one read per hook site
    with _lock:
        _mode = "off"
        _switch(None)


def reset() -> None:
    """Back to the default: follow the global providers. See sagacity.otel."""
    global _mode  # noqa: PLW0603 - module attributes: one read per hook site
    with _lock:
        _mode = "auto"
        _switch(None)
    refresh()


def enabled() -> bool:
    return active


def _switch(otel: Otel | None) -> None:
    global live, active, _seen, _seen_both  # noqa: PLW0603 - module attributes: one read per hook site
    if otel is None:
        _seen = (None, None)
    _seen_both = _mode == "auto" and None not in _seen
    if otel is not None and otel.tracer is None and otel.meter_provider is None:
        otel = None  # both providers hand out no-op instruments (OTEL_SDK_DISABLED)
    live = otel
    active = otel is not None


def _on(api: _Api, tracer_provider: Any, meter_provider: Any, *, capture_content: bool | None) -> Otel:
    """The tracer and instruments from these providers, the gauges registered on their meter."""
    capture = _capture_from_env() if capture_content is None else capture_content
    otel = Otel(api, tracer_provider, meter_provider, capture=capture)
    if otel.meter is not None:
        _otel_gauges.register(otel.meter, api.metrics.Observation)
    return otel


def _capture_from_env() -> bool:
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _CAPTURE_VALUES
