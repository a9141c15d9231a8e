"""Render sagas' traces, as the OpenTelemetry SDK exported them, to PNGs (docs/img/otel-*.png).

python scripts/trace_screenshot.py                  # rewrite docs/img/otel-*.png
python scripts/trace_screenshot.py --out /tmp/shots # somewhere else (the browser test does this)
python scripts/trace_screenshot.py --html out.html  # the HTML only, no browser

Plays the demo's four sagas (``sagacity demo``'s scenes, as tests/otel/test_demo_trace.py plays
them) with the SDK's in-memory exporter, draws each saga's spans as a waterfall, one panel per
trace with the links between them, and screenshots it with Debian's Chromium through Playwright
(no browser download). The spans are the real ones: nothing is drawn that was not exported.
"""

# ruff: noqa: E501 - the page's CSS and markup read best one rule or element to a line
from __future__ import annotations

import argparse
import html
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import sagacity.otel
from sagacity import Sagacity
from sagacity.cli import _demo

DOCS_IMG = Path(__file__).resolve().parent.parent / "docs" / "img"
RUN = "0721"

#: Image name -> (the scene's index in the demo, the caption).
SHOTS = {
    "otel-trace-approval.png": (2, "gated, approved by a human, resumed: three traces, linked"),
    "otel-trace-compensation.png": (1, "a failed call, then the compensation in reverse order"),
}

#: What each span's line says below its name (attribute, label).
SHOWN = [
    ("sagacity.call.outcome", "outcome"),
    ("sagacity.saga.status", "status"),
    ("sagacity.compensation.outcome", "outcome"),
    ("sagacity.decision.outcome", "decision"),
    ("sagacity.decision.by", "by"),
    ("sagacity.journal.intent_seq", "INTENT seq"),
    ("sagacity.journal.seq", "seq"),
    ("sagacity.journal.phase", "phase"),
    ("sagacity.journal.executed_seq", "undoes seq"),
    ("sagacity.approval.seq", "gate seq"),
    ("error.type", "error.type"),
    ("sagacity.journal.hash", "hash"),
]


def record() -> list[ReadableSpan]:
    """The spans of the demo's four sagas, through the SDK's in-memory exporter."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    sagacity.otel.enable(tracer_provider, meter_provider)
    try:
        with Sagacity("memory://", registry=_demo.demo_tools) as sg:
            for scene in _demo.scenes(RUN):
                result = sg.run(scene.saga_id, scene.agent)
                if scene.after is not None:
                    scene.after(sg, result, lambda line: None)
    finally:
        sagacity.otel.reset()
    return list(exporter.get_finished_spans())


def saga_spans(spans: Sequence[ReadableSpan], saga_id: str) -> list[ReadableSpan]:
    """Every span of every trace that touched ``saga_id``."""
    traces = {s.context.trace_id for s in spans if (s.attributes or {}).get("sagacity.saga.id") == saga_id}
    return [s for s in spans if s.context.trace_id in traces]


def _kind(span: ReadableSpan) -> str:
    if span.status.status_code.name == "ERROR":
        return "error"
    if span.name.startswith("execute_tool"):
        return "tool"
    if span.name.startswith("compensate") or span.name == "sagacity.compensate":
        return "compensation"
    if span.name == "sagacity.saga":
        return "saga"
    return "decision"


def _clock(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%H:%M:%S.%f")[:-3]


def _ordered(spans: list[ReadableSpan]) -> list[tuple[int, ReadableSpan]]:
    """Depth-first, children in start order: (depth, span)."""
    ids = {s.context.span_id for s in spans}
    children: dict[int | None, list[ReadableSpan]] = {}
    for s in spans:
        parent = s.parent.span_id if s.parent is not None and s.parent.span_id in ids else None
        children.setdefault(parent, []).append(s)
    out: list[tuple[int, ReadableSpan]] = []

    def walk(parent: int | None, depth: int) -> None:
        for child in sorted(children.get(parent, []), key=lambda s: s.start_time or 0):
            out.append((depth, child))
            walk(child.context.span_id, depth + 1)

    walk(None, 0)
    return out


def render(spans: Sequence[ReadableSpan], saga_id: str, caption: str) -> str:
    """The waterfall of ``saga_id``'s traces as a standalone HTML page."""
    mine = saga_spans(spans, saga_id)
    by_trace: dict[int, list[ReadableSpan]] = {}
    for s in mine:
        by_trace.setdefault(s.context.trace_id, []).append(s)
    traces = sorted(by_trace.values(), key=lambda group: min(s.start_time or 0 for s in group))
    number = {group[0].context.trace_id: i for i, group in enumerate(traces, 1)}
    where = {s.context.span_id: (number[s.context.trace_id], s.name) for s in mine}
    panels = []
    for i, group in enumerate(traces, 1):
        start = min(s.start_time or 0 for s in group)
        end = max(s.end_time or 0 for s in group)
        width = max(end - start, 1)
        rows = []
        for depth, s in _ordered(group):
            attrs: dict[str, Any] = dict(s.attributes or {})
            left = ((s.start_time or 0) - start) / width * 100
            span_width = max(((s.end_time or 0) - (s.start_time or 0)) / width * 100, 0.4)
            facts = []
            for key, label in SHOWN:
                redundant = key == "sagacity.journal.phase" and (
                    "sagacity.call.outcome" in attrs or "sagacity.compensation.outcome" in attrs
                )
                if key in attrs and not redundant:
                    value = str(attrs[key])
                    value = value[:12] + "…" if key == "sagacity.journal.hash" else value
                    facts.append(f"<span class=fact>{html.escape(label)} <b>{html.escape(value)}</b></span>")
            for link in s.links:
                target = where.get(link.context.span_id)
                text = f"trace {target[0]}: {target[1]}" if target else format(link.context.span_id, "016x")
                facts.append(f"<span class=link>↩ links to {html.escape(text)}</span>")
            duration = ((s.end_time or 0) - (s.start_time or 0)) / 1e6
            rows.append(
                f"<tr class={_kind(s)}><td class=name style='padding-left:{0.6 + depth * 1.4}em'>"
                f"<div class=span-name>{html.escape(s.name)}</div><div class=facts>{''.join(facts)}</div></td>"
                f"<td class=lane><div class=bar style='left:{left:.2f}%;width:{span_width:.2f}%'></div></td>"
                f"<td class=ms>{duration:.2f} ms</td></tr>"
            )
        first = min(group, key=lambda s: s.start_time or 0)
        panels.append(
            f"<section><h2><span class=num>trace {i}</span> {html.escape(first.name)} "
            f"<span class=when>started {_clock(start)} UTC · {len(group)} span{'s' * (len(group) > 1)} · "
            f"trace id {format(first.context.trace_id, '032x')[:16]}…</span></h2>"
            f"<table>{''.join(rows)}</table></section>"
        )
    return PAGE.format(saga=html.escape(saga_id), caption=html.escape(caption), panels="".join(panels))


PAGE = """<!doctype html><html><head><meta charset=utf-8><style>
body {{ font: 14px/1.35 system-ui, sans-serif; margin: 24px 28px; color: #1d2433; background: #fff; }}
h1 {{ font-size: 20px; margin: 0 0 4px; }} .sub {{ color: #5a6478; margin: 0 0 18px; }}
section {{ border: 1px solid #d8dde8; border-radius: 8px; margin: 0 0 16px; overflow: hidden; }}
h2 {{ font-size: 15px; margin: 0; padding: 8px 12px; background: #f2f4f8; border-bottom: 1px solid #d8dde8; }}
.num {{ background: #1d2433; color: #fff; border-radius: 4px; padding: 1px 7px; margin-right: 6px; font-size: 13px; }}
.when {{ color: #5a6478; font-weight: normal; font-size: 13px; margin-left: 8px; }}
table {{ width: 100%; border-collapse: collapse; table-layout: fixed; }}
td {{ padding: 5px 8px; border-bottom: 1px solid #eef0f5; vertical-align: top; }}
td.name {{ width: 52%; }} td.ms {{ width: 8%; text-align: right; color: #5a6478; font-variant-numeric: tabular-nums; }}
.span-name {{ font-weight: 600; font-family: ui-monospace, monospace; font-size: 13.5px; }}
.facts {{ margin-top: 2px; }} .fact {{ color: #5a6478; font-size: 12px; margin-right: 10px; white-space: nowrap; }}
.fact b {{ color: #1d2433; font-weight: 600; }}
.link {{ font-size: 12px; color: #6b3fa0; background: #f1eafb; border-radius: 4px; padding: 0 6px; white-space: nowrap; }}
td.lane {{ position: relative; }} .bar {{ position: absolute; top: 9px; height: 14px; border-radius: 3px; min-width: 3px; }}
tr.saga .bar {{ background: #4a7bd0; }} tr.tool .bar {{ background: #3a9a5b; }}
tr.compensation .bar {{ background: #d98a2b; }} tr.decision .bar {{ background: #8a5cc4; }}
tr.error .bar {{ background: #d04a4a; }} tr.error .span-name {{ color: #b02a2a; }}
.legend span {{ display: inline-block; margin-right: 14px; font-size: 12px; color: #5a6478; }}
.legend i {{ display: inline-block; width: 12px; height: 10px; border-radius: 2px; margin-right: 4px; }}
</style></head><body>
<h1>Saga <code>{saga}</code></h1>
<p class=sub>{caption} — spans exported by the OpenTelemetry SDK (bars relative to each trace's own span).</p>
<p class=legend><span><i style="background:#4a7bd0"></i>saga</span><span><i style="background:#3a9a5b"></i>tool call</span>
<span><i style="background:#8a5cc4"></i>decision</span><span><i style="background:#d98a2b"></i>compensation</span>
<span><i style="background:#d04a4a"></i>error</span></p>
{panels}
</body></html>"""


def shoot(out: Path, chromium: str) -> list[Path]:
    """Record the demo's spans and screenshot each shot into ``out``."""
    from playwright.sync_api import sync_playwright

    spans = record()
    scenes = _demo.scenes(RUN)
    out.mkdir(parents=True, exist_ok=True)
    made = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        page: Any = browser.new_page(viewport={"width": 1280, "height": 400}, device_scale_factor=1)
        for name, (index, caption) in SHOTS.items():
            page.set_content(render(spans, scenes[index].saga_id, caption))
            path = out / name
            page.screenshot(path=str(path), full_page=True)
            made.append(path)
        browser.close()
    return made


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=DOCS_IMG, help="where to write the PNGs")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the Chromium executable")
    parser.add_argument("--html", type=Path, help="only write the approval saga's page here")
    args = parser.parse_args()
    if args.html is not None:
        index, caption = SHOTS["otel-trace-approval.png"]
        args.html.write_text(render(record(), _demo.scenes(RUN)[index].saga_id, caption), encoding="utf-8")
        print(f"wrote {args.html}")
        return
    for path in shoot(args.out, args.chromium):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
