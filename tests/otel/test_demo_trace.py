"""The demo's four sagas, traced and measured through the real SDK: the span tree, its attributes
(checked against the journal itself), the links across the approval pause and the metric values."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from sagacity import Entry, Sagacity, SagaStatus
from sagacity.cli import _demo
from sagacity.stores import safe_url

from .conftest import Otel

RUN = "t"
OK, FAIL, APPROVED, TAMPERED = (scene.saga_id for scene in _demo.scenes(RUN))
CONTENT_KEYS = (
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "sagacity.compensation.reason",
    "sagacity.decision.reason",
)


@pytest.fixture
def demo(store_url: str, otel: Otel) -> Iterator[Sagacity]:
    """The four scenes of ``sagacity demo``, played as the CLI plays them, with telemetry on."""
    with Sagacity(store_url, registry=_demo.demo_tools) as sg:
        for scene in _demo.scenes(RUN):
            result = sg.run(scene.saga_id, scene.agent)
            if scene.after is not None:
                result = scene.after(sg, result, lambda line: None)
        yield sg


def _entry(sg: Sagacity, saga_id: str, seq: int) -> Entry:
    return sg.entries(saga_id)[seq - 1]


def _assert_journal_facts(sg: Sagacity, span: ReadableSpan, saga_id: str, seq: int, phase: str) -> None:
    """The span's sagacity.journal.* name the entry in the journal, hash included."""
    attrs = span.attributes or {}
    entry = _entry(sg, saga_id, seq)
    assert (attrs["sagacity.journal.seq"], attrs["sagacity.journal.phase"]) == (seq, phase)
    assert entry.phase == phase
    assert attrs["sagacity.journal.hash"] == entry.hash


def test_a_saga_that_succeeds_is_one_saga_span_with_a_tool_span_per_call(demo: Sagacity, otel: Otel) -> None:
    """Each wrapped call is an ``execute_tool`` span (GenAI conventions) under the saga's span,
    carrying the journal seqs of its INTENT and EXECUTED entries and the EXECUTED entry's hash."""
    saga = otel.one("sagacity.saga", **{"sagacity.saga.id": OK})
    assert otel.tree(saga) == [
        "sagacity.saga",
        "  execute_tool reserve_inventory",
        "  execute_tool charge_card",
        "  execute_tool book_shipment",
    ]
    assert saga.attributes is not None
    assert saga.attributes["sagacity.saga.status"] == "COMPLETED"
    assert saga.status.status_code is StatusCode.UNSET
    for span, (intent, outcome) in zip(otel.children(saga), [(2, 3), (4, 5), (6, 7)], strict=True):
        attrs = span.attributes or {}
        tool = span.name.removeprefix("execute_tool ")
        assert attrs["gen_ai.operation.name"] == "execute_tool"
        assert attrs["gen_ai.tool.name"] == tool
        assert attrs["gen_ai.tool.type"] == "function"
        assert attrs["gen_ai.tool.description"]  # the docstring's first line
        assert attrs["sagacity.saga.id"] == OK
        assert attrs["sagacity.tool.reversibility"] == "COMPENSATABLE"
        assert attrs["sagacity.call.outcome"] == "EXECUTED"
        assert attrs["sagacity.journal.intent_seq"] == intent
        assert _entry(demo, OK, intent).phase == "INTENT"
        _assert_journal_facts(demo, span, OK, outcome, "EXECUTED")
        assert "error.type" not in attrs
        assert span.kind.name == "INTERNAL"


def test_a_failing_saga_shows_the_failure_and_the_compensation_in_reverse(demo: Sagacity, otel: Otel) -> None:
    """The failed call carries ``error.type``; the compensation run is one span with one child
    per step, in the order they ran (the charge, then the reservation), each naming its entries."""
    saga = otel.one("sagacity.saga", **{"sagacity.saga.id": FAIL})
    assert otel.tree(saga) == [
        "sagacity.saga",
        "  execute_tool reserve_inventory",
        "  execute_tool charge_card",
        "  execute_tool book_shipment",
        "  sagacity.compensate",
        "    compensate charge_card",
        "    compensate reserve_inventory",
    ]
    assert saga.attributes is not None
    assert saga.attributes["sagacity.saga.status"] == "COMPENSATED"
    assert saga.attributes["error.type"] == "ConnectionError"
    assert saga.status.status_code is StatusCode.ERROR

    failed = otel.one("execute_tool book_shipment", **{"sagacity.saga.id": FAIL})
    assert failed.attributes is not None
    assert failed.attributes["error.type"] == "ConnectionError"
    assert failed.attributes["sagacity.call.outcome"] == "FAILED"
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "ConnectionError"  # the message is content: not by default
    _assert_journal_facts(demo, failed, FAIL, 7, "FAILED")

    run = otel.one("sagacity.compensate", **{"sagacity.saga.id": FAIL})
    assert run.attributes is not None
    assert run.attributes["sagacity.saga.status"] == "COMPENSATED"
    assert run.attributes["sagacity.compensation.steps"] == 2
    charge, reservation = otel.children(run)
    assert charge.attributes is not None
    assert reservation.attributes is not None
    assert charge.attributes["sagacity.journal.executed_seq"] == 5  # after the saga's START
    assert reservation.attributes["sagacity.journal.executed_seq"] == 3
    for step in (charge, reservation):
        attrs = step.attributes or {}
        assert attrs["sagacity.compensation.outcome"] == "COMPENSATED"
        intent = _entry(demo, FAIL, int(attrs["sagacity.journal.intent_seq"]))
        assert (intent.phase, intent.payload) == (
            "INTENT",
            f"compensates seq={attrs['sagacity.journal.executed_seq']}",
        )
        _assert_journal_facts(demo, step, FAIL, int(attrs["sagacity.journal.seq"]), "COMPENSATED")
        assert step.end_time is not None
        assert run.end_time is not None
        assert step.end_time <= run.end_time
    assert charge.end_time is not None
    assert reservation.start_time is not None
    assert charge.end_time <= reservation.start_time


def test_gated_approved_and_resumed_across_three_linked_traces(demo: Sagacity, otel: Otel) -> None:
    """Gated at t0, approved by alice at t1, executed at t2: the approval and the resume are their
    own traces (a human acted later), each linked to the span that opened the gate."""
    saga = otel.one(
        "sagacity.saga", **{"sagacity.saga.id": APPROVED, "sagacity.saga.status": "AWAITING_APPROVAL"}
    )
    assert otel.tree(saga) == [
        "sagacity.saga",
        "  execute_tool reserve_inventory",
        "  execute_tool send_wire_transfer",
    ]
    assert saga.attributes is not None
    assert saga.attributes["sagacity.approval.seqs"] == (4,)
    gate = otel.one(
        "execute_tool send_wire_transfer", **{"sagacity.saga.id": APPROVED, "sagacity.approval.seq": 4}
    )
    assert gate.attributes is not None
    assert gate.attributes["sagacity.call.outcome"] == "AWAITING_APPROVAL"
    assert gate.attributes["sagacity.tool.reversibility"] == "IRREVERSIBLE"
    assert "sagacity.journal.intent_seq" not in gate.attributes  # the tool did not run
    _assert_journal_facts(demo, gate, APPROVED, 4, "AWAITING_APPROVAL")

    approve = otel.one("sagacity.approve", **{"sagacity.saga.id": APPROVED})
    assert approve.attributes is not None
    assert approve.attributes["sagacity.decision.by"] == "alice@example.com"
    assert approve.attributes["sagacity.decision.seq"] == 4
    assert approve.attributes["sagacity.decision.outcome"] == "accepted"
    _assert_journal_facts(demo, approve, APPROVED, 6, "APPROVED")  # after the run's END at 5

    resume = otel.one("sagacity.resume", **{"sagacity.saga.id": APPROVED})
    assert resume.attributes is not None
    assert resume.attributes["sagacity.decision.outcome"] == "accepted"
    assert otel.tree(resume) == ["sagacity.resume", "  sagacity.saga", "    execute_tool send_wire_transfer"]
    resumed_saga = otel.children(resume)[0]
    executed = otel.children(resumed_saga)[0]
    assert resumed_saga.attributes is not None
    assert resumed_saga.attributes["sagacity.saga.status"] == "COMPLETED"
    assert resumed_saga.attributes["sagacity.approval.seq"] == 4
    assert executed.attributes is not None
    assert executed.attributes["sagacity.journal.intent_seq"] == 7
    _assert_journal_facts(demo, executed, APPROVED, 8, "EXECUTED")
    assert _entry(demo, APPROVED, 7).payload.startswith("resumes seq=4")

    assert gate.context is not None
    traces = {gate.context.trace_id}
    for span in (approve, resume, resumed_saga, executed):
        assert span.context is not None
        [link] = span.links
        assert (link.context.trace_id, link.context.span_id) == (gate.context.trace_id, gate.context.span_id)
        assert link.attributes is not None
        assert link.attributes["sagacity.link"] == "approval_gate"
        traces.add(span.context.trace_id)
    assert len(traces) == 3  # the gating run, the approval, the resume
    assert gate.end_time is not None
    assert approve.start_time is not None
    assert executed.start_time is not None
    assert gate.end_time <= approve.start_time <= executed.start_time


def test_a_tampered_payload_is_a_refused_resume_that_compensates(demo: Sagacity, otel: Otel) -> None:
    """The resume journals REJECTED (its outcome: refused) and compensates under its own span;
    the irreversible tool never has an execute_tool span that ran."""
    resume = otel.one("sagacity.resume", **{"sagacity.saga.id": TAMPERED})
    assert resume.attributes is not None
    assert resume.attributes["sagacity.decision.outcome"] == "refused"
    _assert_journal_facts(demo, resume, TAMPERED, 7, "REJECTED")
    assert otel.tree(resume) == [
        "sagacity.resume",
        "  sagacity.compensate",
        "    compensate reserve_inventory",
    ]
    assert len(resume.links) == 1
    wires = otel.named("execute_tool send_wire_transfer", **{"sagacity.saga.id": TAMPERED})
    assert [(s.attributes or {}).get("sagacity.call.outcome") for s in wires] == ["AWAITING_APPROVAL"]
    assert demo.status(TAMPERED) is SagaStatus.REJECTED


def test_no_content_unless_asked(demo: Sagacity, otel: Otel) -> None:
    """By default no span carries tool arguments, results, or compensation reasons."""
    assert otel.spans
    for span in otel.spans:
        assert not set(CONTENT_KEYS) & set(span.attributes or {}), span.name
        assert not span.events, span.name  # no exception events (their messages are content)


def test_every_span_is_internal_and_ended(demo: Sagacity, otel: Otel) -> None:
    """Four sagas give these spans, all INTERNAL; none left open (an unended span is never exported)."""
    names = sorted(s.name for s in otel.spans)
    assert names.count("sagacity.saga") == 5  # four runs and one resumed run
    assert names.count("sagacity.approve") == 2
    assert names.count("sagacity.resume") == 2
    assert names.count("sagacity.compensate") == 2
    assert {s.kind.name for s in otel.spans} == {"INTERNAL"}


def test_metrics_count_calls_sagas_compensations_and_decisions(
    demo: Sagacity, otel: Otel, store_url: str
) -> None:
    """The counters say what the four sagas did; the gauges say nothing is pending or in doubt."""
    calls = "sagacity.tool.calls"
    assert (
        otel.value(calls, **{"gen_ai.tool.name": "reserve_inventory", "sagacity.call.outcome": "EXECUTED"})
        == 4
    )
    assert otel.value(calls, **{"gen_ai.tool.name": "charge_card", "sagacity.call.outcome": "EXECUTED"}) == 2
    assert (
        otel.value(calls, **{"gen_ai.tool.name": "book_shipment", "sagacity.call.outcome": "EXECUTED"}) == 1
    )
    failed = {"gen_ai.tool.name": "book_shipment", "sagacity.call.outcome": "FAILED"}
    assert otel.value(calls, **failed, **{"error.type": "ConnectionError"}) == 1
    wire = "send_wire_transfer"
    assert otel.value(calls, **{"gen_ai.tool.name": wire, "sagacity.call.outcome": "AWAITING_APPROVAL"}) == 2
    assert otel.value(calls, **{"gen_ai.tool.name": wire, "sagacity.call.outcome": "EXECUTED"}) == 1

    assert otel.value("sagacity.sagas", **{"sagacity.saga.status": "COMPLETED"}) == 2
    assert otel.value("sagacity.sagas", **{"sagacity.saga.status": "COMPENSATED"}) == 1
    assert otel.value("sagacity.sagas", **{"sagacity.saga.status": "AWAITING_APPROVAL"}) == 2

    comp = "sagacity.compensations"
    assert (
        otel.value(
            comp, **{"sagacity.compensation.outcome": "COMPENSATED", "sagacity.tool.name": "charge_card"}
        )
        == 1
    )
    assert (
        otel.value(
            comp,
            **{"sagacity.compensation.outcome": "COMPENSATED", "sagacity.tool.name": "reserve_inventory"},
        )
        == 2
    )

    dec = "sagacity.decisions"
    assert (
        otel.value(dec, **{"sagacity.decision.kind": "approve", "sagacity.decision.outcome": "accepted"}) == 2
    )
    assert (
        otel.value(dec, **{"sagacity.decision.kind": "resume", "sagacity.decision.outcome": "accepted"}) == 1
    )
    assert (
        otel.value(dec, **{"sagacity.decision.kind": "resume", "sagacity.decision.outcome": "refused"}) == 1
    )

    appends = sum(len(demo.entries(saga)) for saga in (OK, FAIL, APPROVED, TAMPERED))
    plain_count, plain_sum = otel.value(
        "sagacity.journal.append.duration", **{"sagacity.journal.operation": "append"}
    )
    fenced_count, _ = otel.value(
        "sagacity.journal.append.duration", **{"sagacity.journal.operation": "decision"}
    )
    assert plain_sum > 0
    assert plain_count + fenced_count <= appends  # a decision lands several entries at once
    # 11 calls' INTENT and outcome (a gate's AWAITING_APPROVAL counts once); a START rides in the
    # insert of its saga's first entry, and each run's END is a decision, fenced like the others
    assert plain_count == 22
    assert fenced_count >= 4
    if not store_url.startswith("memory"):
        batches, written = otel.value("sagacity.journal.batch.size")
        # One writer at a time: batches of one, each append's row and each one-row decision's.
        assert batches == written
        assert plain_count <= written <= appends

    store = {"sagacity.store": safe_url(demo.url)}
    assert otel.value("sagacity.approvals.pending", **store) == 0
    assert otel.value("sagacity.approvals.oldest_age", **store) == 0.0
    assert otel.value("sagacity.calls.in_doubt", **store) == 0
    units = otel.units()
    assert units["sagacity.journal.append.duration"] == "s"
    assert units["sagacity.tool.calls"] == "{call}"
