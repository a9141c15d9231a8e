"""The proxy when things go wrong: the upstream killed mid-call (stdio and streamable HTTP), many agent
sessions at once, and sessions that end with work open."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP gateway tests need the mcp extra: pip install 'sagacity[mcp]'")

import anyio
from mcp_tools import (
    PAYMENTS,
    POLICY,
    SAGA_KEY,
    SAGACITY,
    TOKEN,
    Setup,
    agent,
    api,
    free_port,
    http_client,
    http_proxy,
    make_setup,
    proxy_args,
    sagacity_cli,
    stdio_params,
    text_of,
    wait_for_port,
    wait_until,
)

from sagacity import Phase, Sagacity, SagaStatus

pytestmark = pytest.mark.timeout(240)


def _call_and_kill_upstream(a: Any, setup: Setup, saga: str, batch: str) -> Any:
    """Start ``settle`` (which never answers), kill the upstream process when it has started, return
    the proxy's answer."""
    future = a.portal.start_task_soon(
        partial(
            a.client.call_tool, "settle", {"batch": batch}, read_timeout_seconds=120, meta={SAGA_KEY: saga}
        )
    )
    started = setup.ledger.wait_for("settle-started")
    [event] = [e for e in started if e["batch"] == batch]
    os.kill(event["pid"], signal.SIGKILL)
    return future.result(timeout=120)


def _assert_in_doubt(setup: Setup, saga: str, answer: Any, batch: str) -> int:
    assert answer.is_error
    assert text_of(answer).startswith("[OUTCOME UNKNOWN]")
    assert "NOT retried" in text_of(answer)
    with Sagacity(setup.db_url) as sg:
        entries = sg.entries(saga)
        settle = [(e.phase, e.payload.partition("=")[0]) for e in entries if e.tool_name == "settle"]
        assert settle == [(Phase.INTENT, "definition")]  # no FAILED: nobody knows whether it happened
        [doubt] = sg.in_doubt(saga)
        assert (doubt.tool_name, json.loads(doubt.input)) == ("settle", {"batch": batch})
        assert sg.status(saga) is SagaStatus.IN_DOUBT
        assert sg.verify(saga).valid
        return doubt.seq


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_upstream_killed_mid_call_leaves_the_call_in_doubt(tmp_path: Path, transport: str) -> None:
    """The stdio upstream dies mid-call: the INTENT stays without an outcome (in doubt, never retried),
    the agent gets an answer saying so, the saga takes no more calls, and the proxy reconnects."""
    setup = make_setup(tmp_path)
    saga = f"kill-{uuid.uuid4().hex[:8]}"

    def scenario(a: Any) -> None:
        a.call("charge", {"customer": "c-kill", "amount": 3}, saga=saga)
        answer = _call_and_kill_upstream(a, setup, saga, "batch-1")
        seq = _assert_in_doubt(setup, saga, answer, "batch-1")
        refused = a.call("charge", {"customer": "c-kill", "amount": 4}, saga=saga)
        assert refused.is_error
        assert "outcome is unknown" in text_of(refused)
        fresh = a.call("charge", {"customer": "c-after", "amount": 5}, saga=f"{saga}-next")
        assert not fresh.is_error
        assert len(setup.ledger.events("start")) == 2  # the proxy started a new upstream
        assert [e["customer"] for e in setup.ledger.events("charge")] == ["c-kill", "c-after"]
        # The operator sees it from another process, and settles it there.
        listed = sagacity_cli("sagas", "in-doubt", "--db", setup.db_url, "--json")
        assert listed.returncode == 1
        assert any(c["sagaId"] == saga and c["seq"] == seq for c in json.loads(listed.stdout))
        resolved = sagacity_cli(
            "sagas", "resolve", saga, str(seq), "--happened", "--as", "ops@example.com", "--db", setup.db_url
        )
        # Settled, the saga is ABANDONED (the gateway wrote no END after the call it left in doubt),
        # and it needs a human: resolve says so and exits 1 (docs/cli.md).
        assert resolved.returncode == 1, resolved.stdout + resolved.stderr
        assert "saga is ABANDONED" in resolved.stdout
        with Sagacity(setup.db_url) as sg:
            assert sg.in_doubt(saga) == []
            assert sg.status(saga) is SagaStatus.ABANDONED

    if transport == "http":
        with http_proxy(setup) as (url, _), agent(url, "auto") as a:
            scenario(a)
    else:
        with agent(stdio_params(setup), "legacy") as a:
            scenario(a)


@pytest.fixture
def http_upstream(tmp_path: Path) -> Iterator[tuple[Setup, int, Any]]:
    """The payments server on streamable HTTP, and a way to (re)start it on the same port."""
    setup = make_setup(
        tmp_path,
        policy=POLICY.replace("[tools.settle]", "[tools.settle]\ntimeout = 3", 1).replace(
            "[upstream]\n", "[upstream]\nconnect_timeout = 5\n", 1
        ),
    )
    port = free_port()
    procs: list[subprocess.Popen[Any]] = []

    def start() -> subprocess.Popen[Any]:
        env = {**os.environ, **setup.env}
        proc = subprocess.Popen([sys.executable, str(PAYMENTS), "--http", str(port)], env=env)
        procs.append(proc)
        wait_for_port(port, proc)
        return proc

    start()
    yield setup, port, start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.mark.parametrize("upstream_protocol", ["auto", "legacy"])
def test_http_upstream_killed_mid_call_leaves_the_call_in_doubt(
    http_upstream: tuple[Setup, int, Any], upstream_protocol: str
) -> None:
    """An upstream on streamable HTTP killed mid-call (the SDK's client would wait forever at
    2026-07-28): the proxy's deadline answers the agent, the call is in doubt, and once the server is
    back the next call goes through."""
    setup, port, start = http_upstream
    if upstream_protocol == "legacy":
        setup.policy.write_text(
            setup.policy.read_text().replace("timeout = 20", 'timeout = 20\nprotocol = "legacy"')
        )
    saga = f"httpkill-{uuid.uuid4().hex[:8]}"
    with agent(
        stdio_params(setup, "--upstream-url", f"http://127.0.0.1:{port}/mcp", upstream=[]), "auto"
    ) as a:
        a.call("charge", {"customer": "c-http", "amount": 3}, saga=saga)
        answer = _call_and_kill_upstream(a, setup, saga, "batch-h")
        _assert_in_doubt(setup, saga, answer, "batch-h")
        start()
        fresh = a.call("charge", {"customer": "c-back", "amount": 5}, saga=f"{saga}-next")
        assert not fresh.is_error, text_of(fresh)
        assert fresh.structured_content["amount"] == 5


@pytest.fixture(params=["sqlite", "postgres"])
def journal_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/journal.db"
    url: str = request.getfixturevalue("postgres_url")
    return url


def test_twenty_concurrent_sessions_land_gap_free(tmp_path: Path, journal_url: str) -> None:
    """Twenty agents at once (ten 2025-11-25 sessions, one saga each; ten 2026-07-28 clients naming
    their saga): every saga's journal is complete, gap-free and verifies; half roll back."""
    setup = make_setup(tmp_path, db_url=journal_url)

    async def one(url: str, n: int) -> str:
        mode = "legacy" if n % 2 else "auto"
        meta = None if mode == "legacy" else {SAGA_KEY: f"many-{n}"}
        async with http_client(url, mode, read_timeout_seconds=120) as client:
            await client.call_tool("charge", {"customer": f"c{n}", "amount": n + 1}, meta=meta)
            await client.call_tool("create_ticket", {"title": f"t{n}"}, meta=meta)
            await client.call_tool("get_balance", {"account": f"a{n}"}, meta=meta)
            status = await client.call_tool("sagacity_status", {}, meta=meta)
            saga: str = status.structured_content["sagaId"]
            if n % 4 < 2:
                await client.call_tool("sagacity_rollback", {"reason": f"agent {n}"}, meta=meta)
            return saga

    async def everyone(url: str) -> list[str]:
        sagas: list[str] = [""] * 20

        async def run(n: int) -> None:
            sagas[n] = await one(url, n)

        async with anyio.create_task_group() as tg:
            for n in range(20):
                tg.start_soon(run, n)
        return sagas

    with http_proxy(setup) as (url, _):
        sagas = anyio.run(everyone, url)

    assert len(set(sagas)) == 20
    with Sagacity(setup.db_url) as sg:
        for n, saga in enumerate(sagas):
            entries = sg.entries(saga)
            assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
            assert sg.verify(saga).valid
            rolled = n % 4 < 2
            assert sg.status(saga) is (SagaStatus.COMPENSATED if rolled else SagaStatus.COMPLETED)
            executed = [
                e.tool_name for e in entries if e.phase == Phase.EXECUTED and e.tool_name != "sagacity:saga"
            ]
            assert executed == ["charge", "create_ticket", "get_balance"]
    assert len(setup.ledger.events("charge")) == 20
    assert len(setup.ledger.events("ticket")) == 20
    assert len(setup.ledger.events("refund")) == 10
    assert len(setup.ledger.events("close_ticket")) == 10
    assert len(setup.ledger.events("start")) == 1


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_session_sagas_roll_over_and_compensate_when_the_session_closes(
    tmp_path: Path, transport: str
) -> None:
    """Without a saga id, a session's calls form one saga (a stdio connection, or a 2025-11-25 HTTP
    session); after a rollback the next call starts a new one; with on_session_close = "compensate",
    closing the session with work open undoes it."""
    setup = make_setup(
        tmp_path, policy=POLICY + '\n[sagas]\non_session_close = "compensate"\nid_prefix = "desk"\n'
    )

    def session(a: Any) -> tuple[str, str]:
        a.call("charge", {"customer": "first", "amount": 1})
        first: str = a.call("sagacity_status").structured_content["sagaId"]
        assert first.startswith("desk-")
        a.call("sagacity_rollback", {"reason": "start over"})
        a.call("charge", {"customer": "second", "amount": 2})
        second: str = a.call("sagacity_status").structured_content["sagaId"]
        assert second != first
        return first, second

    if transport == "http":
        with http_proxy(setup) as (url, _):
            with agent(url, "legacy") as a:
                first, second = session(a)
            setup.ledger.wait_for("refund", count=2)
    else:
        with agent(stdio_params(setup), "auto") as a:
            first, second = session(a)
        setup.ledger.wait_for("refund", count=2)
    with Sagacity(setup.db_url) as sg:
        assert sg.status(first) is SagaStatus.COMPENSATED
        assert sg.status(second) is SagaStatus.COMPENSATED
        [reason] = [
            e.payload for e in sg.entries(second) if e.tool_name == "saga" and e.phase == Phase.FAILED
        ]
        assert "the MCP session closed with the saga open" in reason


def test_closing_a_session_keeps_its_work_by_default(tmp_path: Path) -> None:
    """By default (on_session_close = "keep") a desktop client quitting undoes nothing."""
    setup = make_setup(tmp_path)
    with agent(stdio_params(setup), "legacy") as a:
        a.call("charge", {"customer": "kept", "amount": 1})
        saga = a.call("sagacity_status").structured_content["sagaId"]
    with Sagacity(setup.db_url) as sg:
        assert sg.status(saga) is SagaStatus.COMPLETED
    assert setup.ledger.events("refund") == []


def _restart_idle(setup: Setup, port: int, start: Any) -> None:
    """Kill the idle upstream (its sessions die with it) and start a new one on the same port."""
    for event in setup.ledger.events("start"):
        try:
            os.kill(event["pid"], signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_until(lambda: not _listening(port), what=f"the killed upstream to leave port {port}")
    start()


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.mark.parametrize("upstream_protocol", ["legacy", "auto"])
def test_an_idle_http_upstream_restarted_is_used_again_at_once(
    http_upstream: tuple[Setup, int, Any], upstream_protocol: str
) -> None:
    """The streamable-HTTP upstream restarts while the proxy sits idle (at 2025-11-25 its session
    is gone: "Session not found"): the proxy starts a new upstream session, says so in its log,
    and the next call and the saga's compensations go through."""
    setup, port, start = http_upstream
    setup.policy.write_text(
        setup.policy.read_text().replace("timeout = 20", f'timeout = 20\nprotocol = "{upstream_protocol}"')
    )
    saga = f"restart-{uuid.uuid4().hex[:8]}"
    upstream = ["--upstream-url", f"http://127.0.0.1:{port}/mcp"]
    with http_proxy(setup, "--log-level", "info", upstream=upstream) as (url, proxy_port):
        with agent(url, "legacy") as a:
            first = a.call("charge", {"customer": "c-before", "amount": 3}, saga=saga)
            assert not first.is_error, text_of(first)
            _restart_idle(setup, port, start)
            second = a.call("charge", {"customer": "c-after", "amount": 4}, saga=saga)
            assert not second.is_error, text_of(second)
            _restart_idle(setup, port, start)
            failed = a.call("charge", {"customer": "c-after", "amount": 20_000}, saga=saga)
            assert failed.is_error
            assert "was rolled back" in text_of(failed), text_of(failed)
        log = (setup.tmp / f"proxy-{proxy_port}.log").read_text()
    refunds = [e["charge_id"] for e in setup.ledger.events("refund")]
    charges = [e["charge_id"] for e in setup.ledger.events("charge")]
    assert len(charges) == 2
    assert sorted(refunds) == sorted(charges)  # both charges were refunded after the restarts
    with Sagacity(setup.db_url) as sg:
        assert sg.status(saga) is SagaStatus.COMPENSATED
        assert sg.verify(saga).valid
    if upstream_protocol == "legacy":
        assert "new upstream session" in log, log


def test_a_call_after_an_idle_http_upstream_died_was_not_sent(http_upstream: tuple[Setup, int, Any]) -> None:
    """The HTTP upstream dies while the proxy sits idle and nothing listens: the next call is
    `[FAILED]` (nothing was sent), never in doubt; later calls say why without a bare
    ExceptionGroup; a tool with `retry.on = ["unavailable"]` is retried and goes through once the
    upstream is back, under its one INTENT."""
    setup, port, start = http_upstream
    setup.policy.write_text(
        setup.policy.read_text().replace(
            "[tools.create_ticket]\n",
            "[tools.create_ticket]\n"
            'retry = { attempts = 10, backoff = 0.2, max_backoff = 2, on = ["unavailable"] }\n',
        )
    )
    run = uuid.uuid4().hex[:8]
    upstream = ["--upstream-url", f"http://127.0.0.1:{port}/mcp"]
    with agent(stdio_params(setup, *upstream, upstream=[]), "legacy") as a:
        assert not a.call("get_balance", {"account": "acc-1"}, saga=f"warm-{run}").is_error
        for event in setup.ledger.events("start"):
            os.kill(event["pid"], signal.SIGKILL)
        wait_until(lambda: not _listening(port), what=f"the killed upstream to leave port {port}")
        for n in (1, 2):
            answer = a.call("charge", {"customer": f"c-{n}", "amount": 3}, saga=f"down-{n}-{run}")
            assert answer.is_error
            assert text_of(answer).startswith(
                "[FAILED] charge failed: UpstreamUnavailableError: nothing was sent"
            )
            assert "ExceptionGroup" not in text_of(answer)
        with Sagacity(setup.db_url) as sg:
            for n in (1, 2):
                saga = f"down-{n}-{run}"
                assert [e.phase for e in sg.entries(saga) if e.tool_name == "charge"] == [
                    Phase.INTENT,
                    Phase.FAILED,
                ]
                assert sg.in_doubt(saga) == []

        def back_when_tried() -> None:
            with Sagacity(setup.db_url) as sg:
                wait_until(lambda: sg.entries(f"retry-{run}") != [], what="the retried call's INTENT")
            start()

        restarter = threading.Thread(target=back_when_tried)
        restarter.start()
        answer = a.call("create_ticket", {"title": "printer"}, saga=f"retry-{run}")
        restarter.join()
        assert not answer.is_error, text_of(answer)
    with Sagacity(setup.db_url) as sg:
        phases = [e.phase for e in sg.entries(f"retry-{run}") if e.tool_name == "create_ticket"]
        assert phases == [Phase.INTENT, Phase.EXECUTED]
    assert [e["title"] for e in setup.ledger.events("ticket")] == ["printer"]


def test_a_second_stdio_proxy_on_the_same_api_port_fails_at_start_in_one_line(tmp_path: Path) -> None:
    """Two stdio proxies with --api on one port: the second exits 2 at once, before serving the
    agent, with one line saying the port is taken and how to choose another (no traceback), and
    the first keeps serving."""
    setup = make_setup(tmp_path)
    port = free_port()
    api_args = ("--api", "--api-listen", str(port), "--tokens-file", str(setup.tokens))
    with agent(stdio_params(setup, *api_args), "legacy") as first:
        wait_until(lambda: _listening(port), what="the first proxy's API")
        second = subprocess.run(
            [SAGACITY, *proxy_args(setup, *api_args)],
            env={**os.environ, **setup.env},
            stdin=subprocess.PIPE,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == 2
        assert second.stdout == ""  # nothing on the MCP channel
        [line] = second.stderr.strip().splitlines()
        assert line.startswith(f"Error: cannot listen on 127.0.0.1:{port} (--api-listen)")
        assert "choose another port with --api-listen" in line
        assert not first.call("get_balance", {"account": "acc-1"}, saga="still-serving").is_error
    assert len(setup.ledger.events("start")) == 1  # the second never started the upstream


def test_an_in_doubt_call_is_resolved_did_not_happen_through_the_proxys_api(tmp_path: Path) -> None:
    """The upstream dies mid-call in a saga with a charge: a person resolves the call "did not
    happen" through the proxy's --api (no module to import anywhere), and the charge is refunded
    through the upstream, once."""
    setup = make_setup(tmp_path)
    saga = f"resolve-{uuid.uuid4().hex[:8]}"
    with http_proxy(setup) as (url, port), agent(url, "auto") as a:
        assert not a.call("charge", {"customer": "c-doubt", "amount": 7}, saga=saga).is_error
        answer = _call_and_kill_upstream(a, setup, saga, "batch-r")
        seq = _assert_in_doubt(setup, saga, answer, "batch-r")
        resolved = api(port, "POST", f"/resolve/{saga}/{seq}", {"happened": False, "reason": "no batch"})
        assert resolved.status_code == 200, resolved.text
        assert resolved.json()["status"] == "COMPENSATED"
        assert resolved.json()["resolver"] == "alice@example.com"
    [charge] = setup.ledger.events("charge")
    assert [e["charge_id"] for e in setup.ledger.events("refund")] == [charge["charge_id"]]
    with Sagacity(setup.db_url) as sg:
        assert sg.status(saga) is SagaStatus.COMPENSATED
        assert sg.in_doubt(saga) == []
        assert sg.verify(saga).valid


def test_an_in_doubt_call_is_resolved_did_not_happen_with_the_cli_through_the_proxys_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, by an operator at a shell: `sagacity sagas resolve ... --did-not-happen --api URL`
    sends the resolution to the running proxy (token from $SAGACITY_API_TOKEN), which refunds the
    charge through the upstream; nothing is imported, and --as, --db or --import with --api, or a
    missing token, are refused before anything is sent."""
    setup = make_setup(tmp_path)
    saga = f"cli-resolve-{uuid.uuid4().hex[:8]}"
    with http_proxy(setup) as (url, port), agent(url, "auto") as a:
        assert not a.call("charge", {"customer": "c-cli", "amount": 9}, saga=saga).is_error
        seq = _assert_in_doubt(setup, saga, _call_and_kill_upstream(a, setup, saga, "batch-c"), "batch-c")
        resolve = ["sagas", "resolve", saga, str(seq), "--did-not-happen", "--reason", "no batch"]
        where = ["--api", f"http://127.0.0.1:{port}"]

        monkeypatch.delenv("SAGACITY_API_TOKEN", raising=False)
        anonymous = sagacity_cli(*resolve, *where)
        assert anonymous.returncode == 2
        assert "answered 401" in anonymous.stderr
        assert "SAGACITY_API_TOKEN" in anonymous.stderr
        for extra in (["--as", "bob"], ["--db", setup.db_url], ["--import", "json"]):
            mixed = sagacity_cli(*resolve, *where, *extra)
            assert mixed.returncode == 2
            assert f"{extra[0]} does not go with --api" in mixed.stderr
        with Sagacity(setup.db_url) as sg:
            assert sg.status(saga) is SagaStatus.IN_DOUBT  # nothing of the above reached the journal

        monkeypatch.setenv("SAGACITY_API_TOKEN", TOKEN)
        done = sagacity_cli(*resolve, *where, "--json")
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert (answer["resolver"], answer["status"], answer["happened"]) == (
            "alice@example.com",
            "COMPENSATED",
            False,
        )
        again = sagacity_cli(*resolve, f"--api=http://127.0.0.1:{port}/sagacity/")
        assert again.returncode == 2
        assert "answered 409" in again.stderr  # no longer in doubt: refused, nothing journaled
    [charge] = setup.ledger.events("charge")
    assert [e["charge_id"] for e in setup.ledger.events("refund")] == [charge["charge_id"]]
    with Sagacity(setup.db_url) as sg:
        assert sg.status(saga) is SagaStatus.COMPENSATED
        decisions = [e for e in sg.entries(saga) if e.tool_name == "approval-gate"]
        assert [d.payload for d in decisions] == ["approver=alice@example.com\nreason=no batch"]
        assert sg.verify(saga).valid
