"""docs/observability.md documents every instrument (name, kind, unit) and every span name
Sagacity emits: the names in the code and the names in the docs cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

from sagacity.otel import INSTRUMENTS

from .conftest import Otel

DOC = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text(encoding="utf-8")


def test_every_instrument_is_in_the_metrics_table() -> None:
    rows = {
        cells[0].strip("` "): cells
        for line in DOC.splitlines()
        if line.startswith("| `sagacity.")
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    for instrument in INSTRUMENTS:
        assert instrument.name in rows, instrument.name
        _, kind, unit, *_ = rows[instrument.name]
        assert kind == instrument.kind, instrument.name
        assert unit.strip("`") == instrument.unit, instrument.name


def test_every_span_name_is_documented(otel: Otel) -> None:
    """Span names the demo's sagas produce (and the batch operations) appear in the spans table."""
    from sagacity import Sagacity
    from sagacity.cli import _demo

    with Sagacity("memory://", registry=_demo.demo_tools) as sg:
        for scene in _demo.scenes("docs"):
            result = sg.run(scene.saga_id, scene.agent)
            if scene.after is not None:
                scene.after(sg, result, lambda line: None)
        sg.expire_approvals()
        sg.recover()
    names = {re.sub(r"^(execute_tool|compensate) .*", r"\1", s.name) for s in otel.spans}
    names |= {"sagacity.reject", "sagacity.resolve_in_doubt"}
    table = DOC.split("## Spans", 1)[1].split("### The tool-call span", 1)[0]
    for name in names:
        documented = {
            "execute_tool": "`execute_tool {gen_ai.tool.name}`",
            "compensate": "`compensate {tool}`",
        }
        assert documented.get(name, f"`{name}`") in table, name
