"""Fixtures for the HTTP API: a journal with the test tools, tokens for each role, an in-process client."""

from __future__ import annotations

import importlib
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI

from sagacity import Sagacity
from sagacity.server import TokenAuth, create_app
from sagacity.tools import registry

HERE = Path(__file__).parent

#: One token per principal; alice and bob approve, carol audits, root is admin, nobody has no role.
TOKENS = {
    "alice-token-0123456789": {"name": "alice@example.com", "roles": ["approver"]},
    "bob-token-0123456789ab": {"name": "bob@example.com", "roles": ["approver"]},
    "carol-token-0123456789": {"name": "carol@example.com", "roles": ["auditor"]},
    "root-token-0123456789a": {"name": "root@example.com", "roles": ["admin"]},
    "nobody-token-012345678": {"name": "nobody@example.com", "roles": []},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serve_processes(commands: list[list[str]], env: dict[str, str]) -> Iterator[list[str]]:
    """Each of ``commands`` (a ``sagacity serve ... --port P``) as a process of its own, started
    together, until the block ends; yields their base URLs once all listen. A process that dies
    first fails the test."""
    processes = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for command in commands
    ]
    urls = [f"http://127.0.0.1:{command[command.index('--port') + 1]}" for command in commands]
    try:
        for process, url in zip(processes, urls, strict=True):
            for _ in range(600):  # until it listens (bounded); a dead process fails at once
                if process.poll() is not None:
                    pytest.fail(f"sagacity serve exited {process.returncode}: {process.stdout.read()}")  # type: ignore[union-attr]
                try:
                    httpx.get(f"{url}/sagacity/openapi.json", timeout=1)
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            else:
                pytest.fail("sagacity serve did not start listening")
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=10)
            if process.stdout is not None:
                process.stdout.close()


@contextmanager
def serve_process(command: list[str], env: dict[str, str]) -> Iterator[str]:
    """One ``sagacity serve`` process (:func:`serve_processes`); yields its base URL."""
    with serve_processes([command], env) as [url]:
        yield url


@pytest.fixture
def tools(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``server_tools``, importable by name as ``--import server_tools`` would, its tools registered."""
    monkeypatch.syspath_prepend(str(HERE))
    module = importlib.import_module("server_tools")
    if registry.find("srv_reserve") is None:  # another suite's isolated registry dropped them
        module = importlib.reload(module)
    module.EFFECTS.clear()
    return module


@pytest.fixture
def sg(tools: ModuleType) -> Iterator[Sagacity]:
    with Sagacity("memory://") as sagacity:
        yield sagacity


@pytest.fixture
def app(sg: Sagacity) -> FastAPI:
    return create_app(sg, auth=TokenAuth(TOKENS), max_body_bytes=4096)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


@pytest.fixture
def gate(sg: Sagacity, tools: ModuleType) -> Callable[..., Any]:
    """``await gate(saga_id, agent=transfer, **kwargs)``: run an agent (off the loop) until it suspends."""

    async def run(saga_id: str, agent: str = "transfer", **kwargs: Any) -> int:
        result = await anyio.to_thread.run_sync(lambda: sg.run(saga_id, getattr(tools, agent), **kwargs))
        assert result.awaiting, result
        return result.awaiting[0].journal_seq

    return run
