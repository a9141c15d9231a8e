"""The adapters' resume helpers while an approved call is still running in another process.

A worker resumes an approved wire and is still in it (paid, not yet answered); another process
builds the framework's resume input meanwhile. Each helper — ``deferred_results`` (Pydantic AI),
``approve_in_state`` (OpenAI Agents), a LangGraph resume through ``SagacityMiddleware``, a Strands
agent resumed through ``SagacityStrandsHooks`` and its ``interrupt_responses``,
``feedback_from_journal`` (CrewAI) — says
``SagaRunningElsewhereError``, never ``ApprovalRefusedError`` (which an application books as a
rejection); after ``kill -9`` of the worker the call is in doubt: a ``SagaStateError`` that is
no refusal either. The real frameworks, driven by their own test models; no network.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sagacity import Sagacity, SagaStatus
from sagacity.errors import ApprovalError, SagaRunningElsewhereError, SagaStateError

from .conftest import load_app

HERE = Path(__file__).parent
WIRED = "wire 4200.00 alice"


@pytest.fixture
def holding_worker(effects: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Starts an app script as a worker whose wire holds after paying (until it is killed)."""
    started: list[subprocess.Popen[str]] = []

    def start(script: Path, *args: str) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [sys.executable, str(script), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "SAGACITY_TEST_WIRE_HOLD": "1"},
        )
        started.append(child)
        deadline = time.monotonic() + 60
        while WIRED not in (effects.read_text().splitlines() if effects.exists() else []):
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the worker never reached the wire"
            time.sleep(0.05)
        return child

    yield start
    for child in started:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)


def _kill(sg: Sagacity, saga_id: str, child: subprocess.Popen[str]) -> None:
    """kill -9, then wait (bounded) for the server to end its session and so its lease."""
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    deadline = time.monotonic() + 30
    while sg.engine.is_live(saga_id):
        assert time.monotonic() < deadline, "the killed worker's lease outlived it by 30 s"
        time.sleep(0.02)


def _running_then_in_doubt(
    sg: Sagacity, saga_id: str, worker: subprocess.Popen[str], helper: Callable[[], Any], effects: Path
) -> None:
    assert sg.status(saga_id) is SagaStatus.RUNNING
    with pytest.raises(SagaRunningElsewhereError, match="still running") as running:
        helper()
    assert not isinstance(running.value, ApprovalError)
    assert running.value.saga_id == saga_id
    _kill(sg, saga_id, worker)
    assert sg.status(saga_id) is SagaStatus.IN_DOUBT
    with pytest.raises(SagaStateError, match="in doubt") as doubt:
        helper()
    assert not isinstance(doubt.value, (ApprovalError, SagaRunningElsewhereError))
    assert effects.read_text().splitlines().count(WIRED) == 1  # paid once, booked as nothing else


def test_pydantic_ai_deferred_results(
    url: str,
    order_tools: ModuleType,
    effects: Path,
    tmp_path: Path,
    holding_worker: Callable[..., subprocess.Popen[str]],
) -> None:
    """``deferred_results`` while another process runs the approved wire, then after it died."""
    pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
    from pydantic_ai.tools import DeferredToolRequests

    app = load_app(HERE / "pydantic_ai", "pai_app")
    state = tmp_path / "state"
    with Sagacity(url) as sg:
        first = app.agent(sg, "order", saga_id="pai-run").run_sync("Order 2 x SKU-9 and pay the supplier")
        assert isinstance(first.output, DeferredToolRequests)
        app.save(state, first)
        [request] = sg.pending_approvals("pai-run")
        sg.approve("pai-run", request.journal_seq, "alice@example.com")
        worker = holding_worker(HERE / "pydantic_ai" / "pai_app.py", url, "pai-run", "order", str(state))
        requests = app.REQUESTS.validate_json((state / "requests.json").read_bytes())
        _running_then_in_doubt(
            sg, "pai-run", worker, lambda: app.deferred_results(sg, "pai-run", requests), effects
        )


def test_openai_agents_approve_in_state(
    url: str,
    order_tools: ModuleType,
    effects: Path,
    tmp_path: Path,
    holding_worker: Callable[..., subprocess.Popen[str]],
) -> None:
    """``approve_in_state`` while another process runs the approved wire, then after it died."""
    pytest.importorskip("agents", reason="the openai-agents extra is not installed")
    from agents import Runner, RunState

    app = load_app(HERE / "openai_agents", "oa_app")
    state_file = tmp_path / "state.json"
    with Sagacity(url) as sg:
        agent = app.agent(sg, "order", saga_id="oa-run")
        first = asyncio.run(Runner.run(agent, "Order 2 x SKU-9 and pay"))
        assert first.interruptions
        state_file.write_text(first.to_state().to_string())
        [request] = sg.pending_approvals("oa-run")
        sg.approve("oa-run", request.journal_seq, "alice@example.com")
        worker = holding_worker(HERE / "openai_agents" / "oa_app.py", url, "oa-run", "order", str(state_file))

        def helper() -> Any:
            state = asyncio.run(RunState.from_string(agent, state_file.read_text()))
            return app.approve_in_state(sg, "oa-run", state)

        _running_then_in_doubt(sg, "oa-run", worker, helper, effects)


def test_langchain_graph_resumed_meanwhile(
    url: str,
    order_tools: ModuleType,
    effects: Path,
    tmp_path: Path,
    holding_worker: Callable[..., subprocess.Popen[str]],
) -> None:
    """A LangGraph thread resumed here while another process runs its approved wire."""
    pytest.importorskip("langchain", reason="the langchain extra is not installed")
    app = load_app(HERE / "langchain", "lc_app")
    checkpoints = tmp_path / "checkpoints.db"
    with Sagacity(url) as sg:
        with app.checkpointer(str(checkpoints)) as saver:
            graph = app.agent(sg, "order", saver)
            state = graph.invoke(
                {"messages": [{"role": "user", "content": "order and pay"}]}, app.config("lc-run")
            )
            assert state["__interrupt__"]
        [request] = sg.pending_approvals("lc-run")
        sg.approve("lc-run", request.journal_seq, "alice@example.com")
        worker = holding_worker(HERE / "langchain" / "lc_app.py", url, str(checkpoints), "lc-run", "order")

        def helper() -> Any:
            return app.resume(url, str(checkpoints), "lc-run", "order", None, {"type": "approve"})

        _running_then_in_doubt(sg, "lc-run", worker, helper, effects)


def test_langchain_graph_resumed_inside_a_saga_meanwhile(
    url: str,
    order_tools: ModuleType,
    effects: Path,
    tmp_path: Path,
    holding_worker: Callable[..., subprocess.Popen[str]],
) -> None:
    """The same, with ``with sg.saga(...)`` around ``invoke``: the journaled call itself finds the
    wire running in the worker and raises ``SagaRunningElsewhereError`` at once (no wait for it),
    and the saga around it is not compensated."""
    pytest.importorskip("langchain", reason="the langchain extra is not installed")
    from langgraph.types import Command

    app = load_app(HERE / "langchain", "lc_app")
    checkpoints = tmp_path / "checkpoints.db"
    with Sagacity(url) as sg:
        with app.checkpointer(str(checkpoints)) as saver:
            state = app.agent(sg, "order", saver).invoke(
                {"messages": [{"role": "user", "content": "order and pay"}]}, app.config("lc-in")
            )
            assert state["__interrupt__"]
        [request] = sg.pending_approvals("lc-in")
        sg.approve("lc-in", request.journal_seq, "alice@example.com")
        worker = holding_worker(HERE / "langchain" / "lc_app.py", url, str(checkpoints), "lc-in", "order")
        with app.checkpointer(str(checkpoints)) as saver:
            graph = app.agent(sg, "order", saver)
            inside = sg.saga("lc-in", continue_existing=True)
            with pytest.raises(SagaRunningElsewhereError, match="still running") as running, inside:
                graph.invoke(Command(resume={"type": "approve"}), app.config("lc-in"))
        assert running.value.saga_id == "lc-in"
        assert worker.poll() is None  # told while the wire still ran there
        assert sg.status("lc-in") is SagaStatus.RUNNING
        assert effects.read_text().splitlines().count(WIRED) == 1
        assert not [e for e in sg.entries("lc-in") if e.tool_name == "sagacity:saga" and e.phase == "FAILED"]


def test_strands_interrupt_responses_and_resume(
    url: str,
    order_tools: ModuleType,
    effects: Path,
    tmp_path: Path,
    holding_worker: Callable[..., subprocess.Popen[str]],
) -> None:
    """A Strands agent restored from its session and resumed here, and ``interrupt_responses``,
    while another process runs the approved wire, then after it died: never a refusal."""
    pytest.importorskip("strands.agent", reason="no strands extra: bash scripts/test-apart strands")
    from strands.types.exceptions import EventLoopException

    app = load_app(HERE / "strands", "st_app")
    sessions = tmp_path / "sessions"
    with Sagacity(url) as sg:
        first = app.agent(sg, "order", str(sessions), "st-run")("Order 2 x SKU-9 and pay")
        assert first.stop_reason == "interrupt"
        (sessions / "pending.json").write_text(json.dumps(app.summary(sg, "st-run", first)["interrupts"]))
        [request] = sg.pending_approvals("st-run")
        sg.approve("st-run", request.journal_seq, "alice@example.com")
        worker = holding_worker(HERE / "strands" / "st_app.py", url, str(sessions), "st-run", "order")
        with pytest.raises(SagaRunningElsewhereError, match="still running"):
            app.interrupt_responses(sg, "st-run", first.interrupts)

        def resumed_here() -> Any:
            agent = app.agent(sg, "order", str(sessions), "st-run")
            response = {"interruptResponse": {"interruptId": first.interrupts[0].id, "response": "go"}}
            try:
                return agent([response])
            except EventLoopException as exc:  # Strands raises a hook's error from it
                raise exc.original_exception from exc

        _running_then_in_doubt(sg, "st-run", worker, resumed_here, effects)
        with pytest.raises(SagaStateError, match="in doubt"):
            app.interrupt_responses(sg, "st-run", first.interrupts)


@pytest.mark.filterwarnings("ignore:function_calling_llm is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:deprecated$:DeprecationWarning")  # CrewAI reads its own deprecated fields
@pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")  # CrewAI's own import
def test_crewai_flow_resumed_meanwhile(
    url: str,
    order_tools: ModuleType,
    effects: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    holding_worker: Callable[..., subprocess.Popen[str]],
) -> None:
    """A CrewAI flow resumed by a worker that is still in the approved wire: ``feedback_from_journal``
    says running elsewhere, and the crew kicked off here meanwhile is told so without paying."""
    if os.environ.get("SAGACITY_REQUIRE_CREWAI") != "1":
        pytest.importorskip(
            "crewai.flow", reason="the crewai extra is not installed (it cannot sit beside dev)"
        )
    from crewai.flow import HumanFeedbackPending

    monkeypatch.setenv("CREWAI_STORAGE_DIR", str(tmp_path / "crewai"))
    app = load_app(HERE / "crewai", "crew_app")
    flows_db = str(tmp_path / "flows.db")
    with Sagacity(url) as sg:
        flow = app.order_flow(sg, flows_db)(persistence=app.persistence(flows_db))
        assert isinstance(flow.kickoff(), HumanFeedbackPending)
        flow_id = str(flow.state.id)
        [request] = sg.pending_approvals(flow_id)
        sg.approve(flow_id, request.journal_seq, "alice@example.com")
        worker = holding_worker(HERE / "crewai" / "crew_app.py", url, flows_db, flow_id)
        with sg.saga(flow_id, continue_existing=True):
            meanwhile = app.crew(sg, [[("send_wire_transfer", order_tools.ALICE)], "done"])
            meanwhile.kickoff()
        [answer] = app.told(meanwhile)
        assert answer.startswith("[RUNNING_ELSEWHERE] send_wire_transfer did not run here"), answer
        _running_then_in_doubt(sg, flow_id, worker, lambda: app.feedback_from_journal(sg, flow_id), effects)


def test_google_adk_confirmation_message(
    url: str,
    order_tools: ModuleType,
    effects: Path,
    tmp_path: Path,
    holding_worker: Callable[..., subprocess.Popen[str]],
) -> None:
    """``confirmation_message`` while another process runs the approved wire, then after it
    died; and the same reply sent to ADK here meanwhile (the worker has not saved the tool's
    response, so ADK runs the call again): ``SagaRunningElsewhereError`` out of the run, the wire
    not sent twice."""
    if os.environ.get("CI") != "true":
        pytest.importorskip("google.adk", reason="the google-adk extra is not installed")
    app = load_app(HERE / "google_adk", "adk_app")
    db = str(tmp_path / "sessions.db")
    with Sagacity(url) as sg:
        asyncio.run(app.start(sg, "order", db, "adk-run"))
        [request] = sg.pending_approvals("adk-run")
        sg.approve("adk-run", request.journal_seq, "alice@example.com")
        reply = app.confirmation_message(sg, asyncio.run(app.session(db, "adk-run")))
        worker = holding_worker(HERE / "google_adk" / "adk_app.py", url, db, "adk-run", "order")
        with pytest.raises(SagaRunningElsewhereError, match="still running"):
            asyncio.run(app.reply(sg, "order", db, "adk-run", reply))
        assert worker.poll() is None  # told while the wire still ran there

        def helper() -> Any:
            return app.confirmation_message(sg, asyncio.run(app.session(db, "adk-run")))

        _running_then_in_doubt(sg, "adk-run", worker, helper, effects)
