"""The database goes away: requests answer 503 within the store timeout, and recover on their own.

Real outages, no mocks: a PostgreSQL URL where nothing listens; a TCP proxy to the test server,
stopped and started again inside the test (the shared server itself is never touched); a SQLite
file locked exclusively by another connection. How long the 503 takes is measured by hand and
reported, never asserted (the suite has no timing assertions); the loops that wait for recovery
are bounded only so that a broken recovery fails instead of hanging.
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
import pytest

from sagacity import Sagacity, SagaStatus
from sagacity.server import TokenAuth, create_app

pytestmark = pytest.mark.anyio

HERE = Path(__file__).parent
TOKENS = {"root-token-0123456789a": {"name": "root@example.com", "roles": ["admin"]}}
ROOT = {"Authorization": "Bearer root-token-0123456789a"}
PAYLOAD = '{"amount":"100.00","to":"ACME"}'
#: Routes that read the journal, as a dashboard and a health check would call them.
READS = ["/sagacity/approvals", "/sagacity/sagas", "/sagacity/sagas/pay-1", "/sagacity/audit/pay-1/verify"]
#: Bounds the wait for recovery: a broken recovery fails the test instead of hanging it.
RECOVERY_ATTEMPTS = 60
SAGACITY = shutil.which("sagacity", path=str(Path(sys.executable).parent)) or "sagacity"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Proxy:
    """A TCP proxy on 127.0.0.1 to the test database: ``stop()`` is the database going away (new
    connections refused, open ones cut), ``start()`` is it coming back on the same address."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        listener.settimeout(0.05)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            with self._lock:  # stop() clears the listener, then takes this lock to cut every socket
                if self._listener is not listener:  # stopped while this connection was accepted
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def via(url: str, port: int) -> str:
    """``url`` with its host and port replaced by 127.0.0.1:``port`` (user, database, options kept)."""
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{user}@127.0.0.1:{port}" if user else f"127.0.0.1:{port}"))


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[tuple[Proxy, str]]:
    """A started proxy to the test PostgreSQL and a URL (a fresh schema) that goes through it."""
    parts = urlsplit(postgres_url)
    if not parts.hostname:
        pytest.skip("the proxy needs SAGACITY_TEST_POSTGRES_URL to name a TCP host")
    p = Proxy((parts.hostname, parts.port or 5432))
    p.start()
    try:
        yield p, via(postgres_url, p.port)
    finally:
        p.stop()


def client(sg: Sagacity, store_timeout: float) -> httpx.AsyncClient:
    app = create_app(sg, auth=TokenAuth(TOKENS), store_timeout=store_timeout)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://testserver")


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["type"] == "StoreUnavailableError"
    assert body["error"].startswith("the journal database is unavailable, try again shortly: ")
    assert response.headers["retry-after"].isdigit()


async def until_ok(c: httpx.AsyncClient, url: str) -> httpx.Response:
    """Ask until the answer is not 503 (bounded); the first such answer."""
    for _ in range(RECOVERY_ATTEMPTS):
        response = await c.get(url, headers=ROOT)
        if response.status_code != 503:
            return response
        await anyio.sleep(0.5)
    pytest.fail(f"{url} still answers 503 after {RECOVERY_ATTEMPTS} tries: {response.text}")


@pytest.fixture
async def nowhere(tools: ModuleType) -> AsyncIterator[Sagacity]:
    """A Sagacity whose PostgreSQL URL names a port where nothing listens."""
    pytest.importorskip("psycopg")
    if not os.environ.get("SAGACITY_TEST_POSTGRES_URL"):
        pytest.skip("set SAGACITY_TEST_POSTGRES_URL to run PostgreSQL tests")
    sg = Sagacity(f"postgresql://postgres@127.0.0.1:{free_port()}/nothing", init_schema=False)
    try:
        yield sg
    finally:
        await anyio.to_thread.run_sync(sg.close)


async def test_postgres_where_nothing_listens_answers_503_with_a_clear_message(nowhere: Sagacity) -> None:
    """Every route that needs the database answers 503 {error, type} with Retry-After, none hangs."""
    async with client(nowhere, store_timeout=1.0) as c:
        for url in READS:
            assert_unavailable(await c.get(url, headers=ROOT))
        for action in ("approve", "reject"):
            response = await c.post(f"/sagacity/{action}/pay-1/4", json={"reason": "no"}, headers=ROOT)
            assert_unavailable(response)
            assert (response.json()["sagaId"], response.json()["journalSeq"]) == ("pay-1", 4)
        detail = (await c.get("/sagacity/approvals", headers=ROOT)).json()["error"]
        assert "127.0.0.1" in detail  # which database, for the operator
        assert (await c.get("/sagacity/me", headers=ROOT)).status_code == 200  # needs no database


async def test_postgres_outage_then_recovery(proxy: tuple[Proxy, str], tools: ModuleType) -> None:
    """200 while the database is there, 503 while it is gone, 200 again once it is back: no restart."""
    p, url = proxy
    sg = await anyio.to_thread.run_sync(lambda: Sagacity(url))
    try:
        result = await anyio.to_thread.run_sync(lambda: sg.run("pay-1", tools.transfer))
        assert result.status is SagaStatus.AWAITING_APPROVAL
        async with client(sg, store_timeout=2.0) as c:
            for read in READS:
                assert (await c.get(read, headers=ROOT)).status_code == 200, read
            p.stop()
            for read in READS:
                assert_unavailable(await c.get(read, headers=ROOT))
            refused = await c.post("/sagacity/approve/pay-1/4", headers=ROOT)
            assert_unavailable(refused)
            p.start()
            back = await until_ok(c, "/sagacity/approvals")
            assert back.status_code == 200
            assert [i["sagaId"] for i in back.json()] == ["pay-1"]
            approved = await c.post("/sagacity/approve/pay-1/4", headers=ROOT)
            assert approved.status_code == 200, approved.text
            resumed = await c.post("/sagacity/resume/pay-1/4", json={"payload": PAYLOAD}, headers=ROOT)
            assert resumed.status_code == 200, resumed.text
            assert resumed.json()["status"] == "COMPLETED"
        assert (await anyio.to_thread.run_sync(sg.verify, "pay-1")).valid
    finally:
        await anyio.to_thread.run_sync(sg.close)


async def test_locked_sqlite_answers_503_then_recovers(tmp_path: Path, tools: ModuleType) -> None:
    """A SQLite file another process holds exclusively is 503, not a 30 s wait; released, it serves again."""
    url = f"sqlite:///{tmp_path}/journal.db"

    def suspended() -> None:
        with Sagacity(url) as first:
            assert first.run("pay-1", tools.transfer).status is SagaStatus.AWAITING_APPROVAL

    await anyio.to_thread.run_sync(suspended)
    holder = sqlite3.connect(tmp_path / "journal.db", isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")  # held until the connection closes (exclusive locking mode)
    sg = Sagacity(url, init_schema=False)
    try:
        async with client(sg, store_timeout=1.0) as c:
            for read in READS:
                response = await c.get(read, headers=ROOT)
                assert_unavailable(response)
                assert "database is locked" in response.json()["error"]
            assert_unavailable(await c.post("/sagacity/approve/pay-1/4", headers=ROOT))
            holder.execute("COMMIT")
            holder.close()
            assert len((await until_ok(c, "/sagacity/sagas")).json()["sagas"]) == 1
            approved = await c.post("/sagacity/approve/pay-1/4", headers=ROOT)
            assert approved.status_code == 200, approved.text
        assert (await sg.verify_async("pay-1")).valid
    finally:
        sg.close()


def test_serve_store_timeout_must_be_positive_seconds(tmp_path: Path) -> None:
    """`sagacity serve --store-timeout` refuses 0, negative and non-numbers as usage errors."""
    from click.testing import CliRunner

    from sagacity.cli import main

    for value in ("0", "-1", "soon"):
        result = CliRunner().invoke(
            main, ["serve", "--db", f"sqlite:///{tmp_path}/j.db", "--store-timeout", value]
        )
        assert result.exit_code == 2, result.output
        assert "--store-timeout" in result.output


def test_serve_answers_503_while_postgres_is_gone_and_recovers(
    proxy: tuple[Proxy, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sagacity serve --store-timeout 2` as a real process: 503 during the outage, 200 after it."""
    p, url = proxy
    monkeypatch.syspath_prepend(str(HERE))
    import server_tools

    with Sagacity(url) as sg:
        sg.run("pay-1", server_tools.transfer)
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "SAGACITY_TOKENS": '{"tokens": {"root-token-0123456789a": {"name": "root", "roles": ["admin"]}}}',
    }
    env.pop("SAGACITY_TOKENS_FILE", None)
    command = [
        SAGACITY, "serve", "--db", url, "--import", "server_tools", "--host", "127.0.0.1",
        "--port", str(port), "--store-timeout", "2", "--log-level", "warning",
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            for _ in range(200):  # until it listens (bounded); a dead process fails at once
                if process.poll() is not None:
                    pytest.fail(f"sagacity serve exited {process.returncode}: {process.stdout.read()}")  # type: ignore[union-attr]
                try:
                    http.get("/sagacity/openapi.json")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            assert http.get("/sagacity/approvals", headers=ROOT).status_code == 200
            p.stop()
            down = http.get("/sagacity/approvals", headers=ROOT)
            assert_unavailable(down)
            p.start()
            for _ in range(RECOVERY_ATTEMPTS):
                up = http.get("/sagacity/approvals", headers=ROOT)
                if up.status_code != 503:
                    break
                time.sleep(0.5)
            assert up.status_code == 200, up.text
            assert [i["sagaId"] for i in up.json()] == ["pay-1"]
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()
