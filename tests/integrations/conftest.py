"""Shared by the framework adapters' tests: the order tools (importable by child processes too)
and an effects file that tools in any process append to."""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sagacity.tools import registry

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def close_leftover_event_loop() -> Iterator[None]:
    """Pydantic AI's ``run_sync`` sets an event loop of its own as the thread's current loop and
    leaves it open; closed here, so it is not collected (ResourceWarning) in some later test."""
    yield
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        return  # none set
    if not loop.is_running():
        loop.close()
        asyncio.set_event_loop(None)


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the test tools record side effects (one line each), in this process and in children."""
    path = tmp_path / "effects.log"
    monkeypatch.setenv("SAGACITY_TEST_EFFECTS", str(path))
    return path


@pytest.fixture
def order_tools(effects: Path) -> Iterator[ModuleType]:
    """``order_tools``, its tools registered for the test only (other suites declare the same
    names, e.g. the README's example)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    with registry.isolated():
        module = importlib.import_module("order_tools")
        if registry.find("reserve_inventory") is not module.reserve_inventory.spec:
            module = importlib.reload(module)
        yield module


def read_effects(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def url(durable_url: str) -> str:
    """A store a second process can share (SQLite file or PostgreSQL schema): each adapter's
    loop is resumed in a new process."""
    return durable_url


def load_app(folder: Path, name: str) -> ModuleType:
    """An adapter test's app module (``folder/name.py``), reloaded so its tools register again,
    in the test's isolated registry."""
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return importlib.reload(importlib.import_module(name))


def run_app(script: Path, *args: str) -> dict[str, Any]:
    """Run an app module as a fresh Python process; the JSON of the last line it prints."""
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
