"""RUNNING from any process: a saga a worker runs shows RUNNING to every other process on the
store (between calls and with a call in flight), through the library, the CLI and the saga
index's reads; once the worker is killed (-9) its lease is gone and the open call is in doubt."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sagacity import Sagacity, SagaStatus
from sagacity.errors import ApprovalError, ApprovalNotFoundError, SagaRunningElsewhereError
from sagacity.tools import registry

HERE = Path(__file__).parent
CLI = Path(sys.executable).with_name("sagacity")


@pytest.fixture
def worker(durable_url: str) -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(
        [sys.executable, str(HERE / "live_worker.py"), durable_url, "walker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)


def _listed(url: str, *args: str) -> dict[str, str]:
    """``sagacity sagas list --json`` in its own process: saga id -> status."""
    out = subprocess.run(
        [str(CLI), "sagas", "list", "--json", "--db", url, *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SAGACITY_URL": url},
    ).stdout
    document = json.loads(out)
    rows = document["sagas"] if isinstance(document, dict) else document
    return {row["sagaId"]: row["status"] for row in rows}


def _running_everywhere(sg: Sagacity, url: str) -> None:
    assert sg.status("walker") is SagaStatus.RUNNING
    assert [(s.saga_id, s.status) for s in sg.sagas()] == [("walker", SagaStatus.RUNNING)]
    assert [s.saga_id for s in sg.sagas(status=SagaStatus.RUNNING)] == ["walker"]
    assert sg.sagas(status=SagaStatus.COMPLETED) == []
    assert sg.sagas(status=SagaStatus.IN_DOUBT) == []
    assert sg.saga_counts() == {SagaStatus.RUNNING: 1}
    assert sg.saga_detail("walker").status is SagaStatus.RUNNING
    assert sg.in_doubt() == []
    assert sg.in_doubt("walker") == []
    assert _listed(url) == {"walker": "RUNNING"}
    assert _listed(url, "--status", "running") == {"walker": "RUNNING"}


def test_a_saga_running_in_another_process_is_running_until_it_is_killed(
    durable_url: str, worker: subprocess.Popen[str], lease_gone: Callable[[Sagacity, str], None]
) -> None:
    """Between calls (the journal alone says COMPLETED) and with a call in flight (it alone says
    IN_DOUBT), the worker's saga is RUNNING here; after kill -9 the in-flight call is in doubt."""
    assert worker.stdout is not None
    assert worker.stdin is not None
    assert worker.stdout.readline().strip() == "between"
    with Sagacity(durable_url) as sg:
        _running_everywhere(sg, durable_url)
        worker.stdin.write("go on\n")
        worker.stdin.flush()
        assert worker.stdout.readline().strip() == "in flight"
        _running_everywhere(sg, durable_url)
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
        lease_gone(sg, "walker")
        assert sg.status("walker") is SagaStatus.IN_DOUBT
        assert [(s.saga_id, s.status) for s in sg.sagas()] == [("walker", SagaStatus.IN_DOUBT)]
        assert sg.sagas(status=SagaStatus.RUNNING) == []
        assert sg.saga_counts() == {SagaStatus.IN_DOUBT: 1}
        [call] = sg.in_doubt()
        assert (call.saga_id, call.tool_name) == ("walker", "live_hang")
        assert _listed(durable_url) == {"walker": "IN_DOUBT"}


def test_a_worker_killed_between_calls_no_longer_shows_running(
    durable_url: str, worker: subprocess.Popen[str], lease_gone: Callable[[Sagacity, str], None]
) -> None:
    """Killed with no call in flight, the saga is no longer RUNNING anywhere."""
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "between"
    with Sagacity(durable_url) as sg:
        assert sg.status("walker") is SagaStatus.RUNNING
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
        lease_gone(sg, "walker")
        assert sg.status("walker") is not SagaStatus.RUNNING
        assert sg.sagas(status=SagaStatus.RUNNING) == []
        assert SagaStatus.RUNNING not in sg.saga_counts()
        assert sg.in_doubt() == []


def test_a_resume_meanwhile_is_told_running_not_refused(
    durable_url: str, lease_gone: Callable[[Sagacity, str], None]
) -> None:
    """A worker resumes an approved gate and is in its call: a second resume, in the library and
    through HTTP, says running elsewhere (409, status RUNNING, Retry-After), not a refusal; once
    the worker is killed the request is simply gone (404)."""
    fastapi = pytest.importorskip("fastapi", reason="the server extra is not installed")
    import httpx

    from sagacity.server import TokenAuth, create_app

    del fastapi
    with registry.isolated():
        sys.path.insert(0, str(HERE))
        try:
            import live_worker
        finally:
            sys.path.remove(str(HERE))
        with Sagacity(durable_url) as sg:
            assert sg.run("wired", live_worker.live_wire, "10.00").status is SagaStatus.AWAITING_APPROVAL
            [request] = sg.pending_approvals("wired")
            sg.approve("wired", request.journal_seq, "alice@example.com")
            seq, payload = request.journal_seq, request.input
            child = subprocess.Popen(
                [
                    sys.executable,
                    str(HERE / "live_worker.py"),
                    durable_url,
                    "wired",
                    "resume",
                    str(seq),
                    payload,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert child.stdout is not None
                assert child.stdout.readline().strip() == "in flight"
                assert sg.status("wired") is SagaStatus.RUNNING
                with pytest.raises(SagaRunningElsewhereError, match="still running") as running:
                    sg.resume("wired", seq, payload)
                assert not isinstance(running.value, ApprovalError)
                assert (running.value.saga_id, running.value.seq) == ("wired", seq)
                app = create_app(
                    sg, auth=TokenAuth({"tok-0123456789abcdef": {"name": "bob", "roles": ["approver"]}})
                )

                async def resume_over_http() -> httpx.Response:
                    transport = httpx.ASGITransport(app)
                    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
                        return await client.post(
                            f"/sagacity/resume/wired/{seq}",
                            json={"payload": payload},
                            headers={"Authorization": "Bearer tok-0123456789abcdef"},
                        )

                answer = asyncio.run(resume_over_http())
                assert answer.status_code == 409
                assert answer.headers["Retry-After"]
                body = answer.json()
                assert (body["sagaId"], body["journalSeq"], body["status"], body["type"]) == (
                    "wired",
                    seq,
                    "RUNNING",
                    "SagaRunningElsewhereError",
                )
                child.send_signal(signal.SIGKILL)
                child.wait(30)
                lease_gone(sg, "wired")
                assert sg.status("wired") is SagaStatus.IN_DOUBT
                with pytest.raises(ApprovalNotFoundError):
                    sg.resume("wired", seq, payload)
                assert asyncio.run(resume_over_http()).status_code == 404
            finally:
                if child.poll() is None:
                    child.kill()
                child.communicate(timeout=30)
