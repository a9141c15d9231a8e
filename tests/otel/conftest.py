"""OpenTelemetry fixtures: the real SDK with its in-memory span exporter and metric reader.

Nothing of OpenTelemetry is mocked: spans and metrics go through the SDK exactly as they would in
an application, and the tests read what it exported. The providers are handed to
``sagacity.otel.enable`` (the global ones can be set only once per process).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import sagacity.otel
from sagacity._context import current_run
from sagacity.tools import registry


@dataclass
class Otel:
    """What the SDK exported, with helpers to read spans as a tree and metrics as numbers."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    _metrics: list[Any] = field(default_factory=list)

    @property
    def spans(self) -> list[ReadableSpan]:
        return sorted(self.exporter.get_finished_spans(), key=lambda s: (s.start_time or 0, s.name))

    def named(self, name: str, **attrs: Any) -> list[ReadableSpan]:
        """Finished spans called ``name`` whose attributes include ``attrs``."""
        return [
            s
            for s in self.spans
            if s.name == name and all((s.attributes or {}).get(k) == v for k, v in attrs.items())
        ]

    def one(self, name: str, **attrs: Any) -> ReadableSpan:
        found = self.named(name, **attrs)
        assert len(found) == 1, f"{len(found)} spans {name} {attrs}: {[s.name for s in self.spans]}"
        return found[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        """``parent``'s children, in the order they started."""
        assert parent.context is not None
        return [s for s in self.spans if s.parent is not None and s.parent.span_id == parent.context.span_id]

    def tree(self, root: ReadableSpan, depth: int = 0) -> list[str]:
        """``root`` and its descendants as indented names, in start order."""
        lines = ["  " * depth + root.name]
        for child in self.children(root):
            lines.extend(self.tree(child, depth + 1))
        return lines

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """Each metric's points as (attributes, value); a histogram's value is (count, sum)."""
        out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        value = (point.count, point.sum) if hasattr(point, "count") else point.value
                        out.setdefault(metric.name, []).append((dict(point.attributes or {}), value))
        return out

    def value(self, name: str, **attrs: Any) -> Any:
        """The value of metric ``name`` at the point whose attributes include ``attrs``."""
        points = [v for a, v in self.metrics().get(name, []) if all(a.get(k) == w for k, w in attrs.items())]
        assert len(points) == 1, f"{name} {attrs}: {self.metrics().get(name)}"
        return points[0]

    def units(self) -> dict[str, str]:
        data = self.reader.get_metrics_data()
        return {
            m.name: m.unit
            for r in (data.resource_metrics if data is not None else [])
            for s in r.scope_metrics
            for m in s.metrics
        }


def make_otel(*, capture_content: bool | None = False) -> Otel:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    sagacity.otel.enable(tracer_provider, meter_provider, capture_content=capture_content)
    return Otel(exporter, reader, tracer_provider, meter_provider)


@pytest.fixture
def otel() -> Iterator[Otel]:
    """Telemetry on, into the SDK's in-memory exporter and reader; off again afterwards."""
    made = make_otel()
    try:
        yield made
    finally:
        sagacity.otel.reset()
        made.tracer_provider.shutdown()
        made.meter_provider.shutdown()


@pytest.fixture(autouse=True)
def isolated_tools() -> Iterator[None]:
    """Tools a test declares are forgotten afterwards, no saga leaks, telemetry ends as it began."""
    with registry.isolated():
        yield
    assert current_run() is None, "a saga context leaked out of the test"
    sagacity.otel.reset()
