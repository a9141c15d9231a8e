"""The race tools as a fixture: imported here too (set-ups and recoveries run them), with a
fresh effects file per test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from sagacity.tools import registry

HERE = Path(__file__).parent


@pytest.fixture
def race(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The race tools, imported here too (the set-up runs them), with a fresh effects file."""
    monkeypatch.setenv("SAGACITY_RACE_EFFECTS", str(tmp_path / "effects.log"))
    sys.path.insert(0, str(HERE))
    with registry.isolated():
        sys.modules.pop("race_tools", None)
        import race_tools

        yield race_tools
    sys.path.remove(str(HERE))
    sys.modules.pop("race_tools", None)
