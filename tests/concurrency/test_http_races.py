"""Decisions on one gate sent at once to ``uvicorn --workers 4``: several server processes on one
journal keep every promise the library keeps (the server is started once per store)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from sagacity import Sagacity

from .test_decision_races import check_invariants

HERE = Path(__file__).parent
TRIALS = int(os.environ.get("SAGACITY_RACE_TRIALS", "20"))
ALICE = {"Authorization": "Bearer alice-token-0123456789"}
BOB = {"Authorization": "Bearer bob-token-0123456789ab"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def journal(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One journal per store for the whole module: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('http-races')}/journal.db"
        return
    base = os.environ.get("SAGACITY_TEST_POSTGRES_URL")
    if not base:
        if os.environ.get("SAGACITY_REQUIRE_POSTGRES") == "1":
            pytest.fail("SAGACITY_REQUIRE_POSTGRES=1 but SAGACITY_TEST_POSTGRES_URL is not set")
        pytest.skip("set SAGACITY_TEST_POSTGRES_URL to run PostgreSQL tests")
    import psycopg

    schema = f"t_http_{os.getpid()}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(scope="module")
def server(journal: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """``uvicorn race_app:app --workers 4`` on a free loopback port, started once per store;
    yields (base URL, journal URL, effects file)."""
    durable_url = journal
    tmp_path = tmp_path_factory.mktemp("uvicorn")
    port = _free_port()
    log = (tmp_path / "uvicorn.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "race_app:app",
            "--workers",
            "4",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--app-dir",
            str(HERE),
            "--log-level",
            "warning",
        ],
        env={
            **os.environ,
            "SAGACITY_RACE_URL": durable_url,
            "SAGACITY_RACE_EFFECTS": str(tmp_path / "effects.log"),
        },
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/sagacity/me", headers=ALICE, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, (tmp_path / "uvicorn.log").read_text()
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.2)
        yield base, durable_url, tmp_path / "effects.log"
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


#: What a resume that lost to another resume still running its call gets: 409, status RUNNING,
#: SagaRunningElsewhereError, Retry-After (counted apart from a refusal's 409).
RUNNING = 4090


def _send(
    start: threading.Barrier,
    codes: dict[str, int],
    name: str,
    client: httpx.Client,
    path: str,
    body: dict[str, str],
    who: dict[str, str],
) -> None:
    start.wait()
    answer = client.post(path, json=body, headers=who)
    running = answer.status_code == 409 and answer.json().get("type") == "SagaRunningElsewhereError"
    if running:
        assert answer.json()["status"] == "RUNNING"
        assert answer.headers["Retry-After"]
    codes[name] = RUNNING if running else answer.status_code


HTTP_PAIRS = [("resume", "reject"), ("approve", "reject"), ("resume", "resume"), ("reject", "reject")]


def _request(
    action: str, saga_id: str, seq: int, who: dict[str, str], payload: str
) -> tuple[str, dict[str, str]]:
    body = {"resume": {"payload": payload}, "reject": {"reason": "no"}, "approve": {}}[action]
    return f"/sagacity/{action}/{saga_id}/{seq}", body


@pytest.mark.parametrize("pair", HTTP_PAIRS, ids=["x".join(p) for p in HTTP_PAIRS])
def test_decisions_race_through_four_server_workers(
    race: ModuleType, server: tuple[str, str, Path], pair: tuple[str, str]
) -> None:
    """Two decisions on one gate sent at once to a 4-worker server keep every promise."""
    base, url, effects_file = server
    outcomes: Counter[str] = Counter()
    saga_ids = [f"http-{'x'.join(pair)}-{n}" for n in range(TRIALS)]
    with httpx.Client(base_url=base, timeout=60) as first, httpx.Client(base_url=base, timeout=60) as second:
        for saga_id in saga_ids:
            with Sagacity(url) as sg:
                seq = race.gated(sg, saga_id, approved="approve" not in pair)
            start = threading.Barrier(2)
            codes: dict[str, int] = {}
            sends = [
                (f"{n}:{action}", client, *_request(action, saga_id, seq, who, race.PAYLOAD), who)
                for n, (action, client, who) in enumerate(
                    zip(pair, (first, second), (ALICE, BOB), strict=True)
                )
            ]
            threads = [threading.Thread(target=_send, args=(start, codes, *send)) for send in sends]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            # A decision that lost its gate gets 404 (the request was consumed), never a refusal's
            # 409; a resume that lost to a resume still running its call is told so (RUNNING).
            assert set(codes.values()) <= {200, 404, RUNNING}, codes
            if "approve" not in pair:
                assert list(codes.values()).count(200) == 1, f"{saga_id}: exactly one of them wins: {codes}"
            outcomes.update(f"{name}:{code}" for name, code in codes.items())
    effects = effects_file.read_text().splitlines() if effects_file.exists() else []
    with Sagacity(url) as sg:
        for saga_id in saga_ids:
            check_invariants(sg, saga_id, effects)
    print(pair, dict(outcomes))


def test_four_resumes_through_four_server_workers_one_200_three_404(
    race: ModuleType, server: tuple[str, str, Path]
) -> None:
    """Four resumes of one approved gate sent at once to a 4-worker server, trial after trial:
    one 200 and three 404s (the loser of a resume race gets "no pending request", never a
    refusal), or, for a loser that arrived while the winner's call ran, 409 RUNNING."""
    base, url, effects_file = server
    saga_ids = [f"http-four-{n}" for n in range(TRIALS)]
    clients = [httpx.Client(base_url=base, timeout=60) for _ in range(4)]
    try:
        for saga_id in saga_ids:
            with Sagacity(url) as sg:
                seq = race.gated(sg, saga_id, approved=True)
            start = threading.Barrier(4)
            codes: dict[str, int] = {}
            path, body = _request("resume", saga_id, seq, ALICE, race.PAYLOAD)
            threads = [
                threading.Thread(target=_send, args=(start, codes, f"resume-{n}", client, path, body, ALICE))
                for n, client in enumerate(clients)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sorted(codes.values())[0] == 200, f"{saga_id}: {codes}"
            assert set(sorted(codes.values())[1:]) <= {404, RUNNING}, f"{saga_id}: {codes}"
    finally:
        for client in clients:
            client.close()
    effects = effects_file.read_text().splitlines()
    with Sagacity(url) as sg:
        for saga_id in saga_ids:
            check_invariants(sg, saga_id, effects)
