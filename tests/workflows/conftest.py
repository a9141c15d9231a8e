"""The test workflow as a fixture: imported here too, with a fresh effects file per test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from sagacity.tools import registry

HERE = Path(__file__).parent


@pytest.fixture
def wf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("SAGACITY_WF_EFFECTS", str(tmp_path / "effects.log"))
    (tmp_path / "effects.log").touch()
    sys.path.insert(0, str(HERE))
    with registry.isolated():
        sys.modules.pop("wf_app", None)
        import wf_app

        yield wf_app
    sys.path.remove(str(HERE))
    sys.modules.pop("wf_app", None)
