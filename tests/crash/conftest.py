"""Fixtures shared by the kill -9 tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def markers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the killed child and this process note effects and kill points."""
    directory = tmp_path / "markers"
    directory.mkdir()
    monkeypatch.setenv("SAGACITY_CRASH_MARKERS", str(directory))
    return directory
