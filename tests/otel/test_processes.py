"""In real processes: without OpenTelemetry installed the library runs unchanged; with it, the
application's global providers switch telemetry on; and a gate opened in one process is linked
from the approval and the resume made in another (its trace context kept in the store)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from sagacity import Sagacity, SagaStatus

from .conftest import Otel

BLOCK_OPENTELEMETRY = """
import sys

class NoOpenTelemetry:
    '''As if opentelemetry were not installed: every import of it fails.'''

    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoOpenTelemetry())
"""

TOOLS = """
from sagacity import CompensationContext, Reversibility, tool

undone = []

@tool
def reserve(sku: str) -> str:
    return f"r-{sku}"

@reserve.compensation
def release(ctx: CompensationContext) -> None:
    undone.append(ctx.args["sku"])

@tool
def fail(why: str) -> str:
    raise RuntimeError(why)

@tool(reversibility=Reversibility.IRREVERSIBLE)
def wire(amount: str) -> str:
    return f"sent {amount}"

def gated() -> str:
    reserve("SKU-1")
    return wire("10.00")
"""


def _python(code: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``code`` in a fresh interpreter (this venv) in ``cwd``; its stdout. Fails on exit != 0."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_without_opentelemetry_installed_everything_runs_unchanged(tmp_path: Path) -> None:
    """With every ``opentelemetry`` import failing: sagas, gates, approvals, resumes, rejections,
    compensation, async, verification all work; nothing is traced; enabling says what to install."""
    (tmp_path / "tools_mod.py").write_text(TOOLS)
    out = _python(
        BLOCK_OPENTELEMETRY
        + """
import asyncio
import sagacity, sagacity.otel
from sagacity import Sagacity, SagaStatus, _telemetry
from sagacity.errors import ConfigurationError
import tools_mod

try:
    import opentelemetry
except ImportError:
    pass
else:
    raise SystemExit("the blocker did not block")

for url in ("memory://", "sqlite:///journal.db"):
    with Sagacity(url) as sg:
        assert sg.run("ok", tools_mod.reserve, "A").status is SagaStatus.COMPLETED
        failing = lambda: (tools_mod.reserve("B"), tools_mod.fail("x"))
        assert sg.run("failed", failing).status is SagaStatus.COMPENSATED
        assert sg.run("gated", tools_mod.gated).status is SagaStatus.AWAITING_APPROVAL
        sg.approve("gated", 4, "alice@example.com")
        assert sg.resume("gated", 4, '{"amount":"10.00"}').status is SagaStatus.COMPLETED
        assert sg.run("rejected", tools_mod.gated).status is SagaStatus.AWAITING_APPROVAL
        assert sg.reject("rejected", 4, "bob@example.com", "no").result.status is SagaStatus.REJECTED
        assert asyncio.run(sg.run_async("async", tools_mod.reserve, "C")).status is SagaStatus.COMPLETED
        assert all(sg.verify(s).valid for s in sg.saga_ids())

assert tools_mod.undone == ["B", "SKU-1", "B", "SKU-1"], tools_mod.undone
assert not _telemetry.active and _telemetry._api is None
assert not sagacity.otel.enabled()
try:
    sagacity.otel.enable()
except ConfigurationError as exc:
    assert "pip install 'sagacity[otel]'" in str(exc), exc
else:
    raise SystemExit("enable() without opentelemetry should refuse")
assert not any(m.startswith("opentelemetry") for m in sys.modules)
print("unchanged")
""",
        tmp_path,
    )
    assert out.strip() == "unchanged"


def test_import_sagacity_does_not_import_opentelemetry(tmp_path: Path) -> None:
    """The API is imported on first use (a Sagacity, a saga), never by ``import sagacity``."""
    out = _python(
        """
import sys
import sagacity, sagacity.otel
print("opentelemetry" in sys.modules)
sagacity.Sagacity("memory://")
print("opentelemetry" in sys.modules)
""",
        tmp_path,
    )
    assert out.split() == ["False", "True"]


GLOBAL_SDK = """
import json, sys
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
def configure():
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
"""


def test_the_applications_global_provider_switches_telemetry_on(tmp_path: Path) -> None:
    """No call to sagacity.otel: a saga started after the application set its global tracer
    provider is traced, even on a Sagacity made before; one started before is not."""
    (tmp_path / "tools_mod.py").write_text(TOOLS)
    out = _python(
        GLOBAL_SDK
        + """
from sagacity import Sagacity, _telemetry
import tools_mod

sg = Sagacity("memory://")
sg.run("before", tools_mod.reserve, "A")
assert not _telemetry.active
configure()
sg.run("after", tools_mod.reserve, "B")
print(json.dumps(sorted({s.attributes.get("sagacity.saga.id") for s in exporter.get_finished_spans()})))
""",
        tmp_path,
    )
    assert json.loads(out) == ["after"]


def test_a_disabled_sdk_is_off(tmp_path: Path) -> None:
    """``OTEL_SDK_DISABLED=true``: the SDK hands out no-op tracers, so Sagacity stays off."""
    (tmp_path / "tools_mod.py").write_text(TOOLS)
    import os

    out = _python(
        GLOBAL_SDK
        + """
from sagacity import Sagacity, _telemetry
import tools_mod
configure()
Sagacity("memory://").run("x", tools_mod.reserve, "A")
print(_telemetry.active, len(exporter.get_finished_spans()))
""",
        tmp_path,
        env={**os.environ, "OTEL_SDK_DISABLED": "true"},
    )
    assert out.split() == ["False", "0"]


def test_the_resume_in_another_process_links_to_the_gate(tmp_path: Path, otel: Otel) -> None:
    """A worker process gates a wire transfer (its spans exported there); this process approves
    and resumes it: both link to the worker's gate span, by trace and span id."""
    (tmp_path / "tools_mod.py").write_text(TOOLS)
    url = f"sqlite:///{tmp_path}/journal.db"
    out = _python(
        GLOBAL_SDK
        + f"""
from sagacity import Sagacity
import tools_mod
configure()
with Sagacity({url!r}) as sg:
    sg.run("pay-1", tools_mod.gated)
spans = exporter.get_finished_spans()
[gate] = [s for s in spans if s.attributes.get("sagacity.call.outcome") == "AWAITING_APPROVAL"]
print(json.dumps([format(gate.context.trace_id, "032x"), format(gate.context.span_id, "016x")]))
""",
        tmp_path,
    )
    trace_id, span_id = json.loads(out)

    sys.path.insert(0, str(tmp_path))
    try:
        import importlib

        importlib.import_module("tools_mod")  # the tools, registered here too
        with Sagacity(url) as sg:
            sg.approve("pay-1", 4, "alice@example.com")
            assert sg.resume("pay-1", 4, '{"amount":"10.00"}').status is SagaStatus.COMPLETED
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("tools_mod", None)
    for name in ("sagacity.approve", "sagacity.resume", "execute_tool wire"):
        [link] = otel.one(name).links
        assert (format(link.context.trace_id, "032x"), format(link.context.span_id, "016x")) == (
            trace_id,
            span_id,
        )
        assert link.context.is_remote
