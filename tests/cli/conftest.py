"""Fixtures for CLI tests: a SQLite journal on disk, the test tool module importable by name."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from sagacity import Sagacity
from sagacity.tools import registry

HERE = Path(__file__).parent


def cli_process(url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own, on the journal at ``url``, with no tool module imported."""
    return subprocess.run(
        [sys.executable, "-m", "sagacity.cli", *args, "--db", url],
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        check=False,
    )


@pytest.fixture
def tools(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``cli_tools``, importable by name as ``--import cli_tools`` would, its tools registered."""
    monkeypatch.syspath_prepend(str(HERE))
    module = importlib.import_module("cli_tools")
    if registry.find("cli_reserve") is None:  # another suite's isolated registry dropped them
        module = importlib.reload(module)
    module.EFFECTS.clear()
    return module


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/journal.db"


@pytest.fixture
def sg(db_url: str, tools: ModuleType) -> Iterator[Sagacity]:
    with Sagacity(db_url) as sagacity:
        yield sagacity


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()
