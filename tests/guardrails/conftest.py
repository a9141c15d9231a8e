"""Fixtures for guardrails: an isolated tool registry and a policy file to write rules into."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sagacity import Sagacity
from sagacity.tools import registry


@pytest.fixture(autouse=True)
def isolated_tools() -> Iterator[None]:
    with registry.isolated():
        yield


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    return tmp_path / "policy.toml"


@pytest.fixture
def guarded(store_url: str, policy_file: Path) -> Iterator[Callable[[str], Sagacity]]:
    """``guarded(toml)``: a Sagacity on the store with that policy (the switch read on every call)."""
    opened: list[Sagacity] = []

    def open_with(text: str) -> Sagacity:
        policy_file.write_text(text, encoding="utf-8")
        sg = Sagacity(store_url, policy=policy_file, switch_poll=0)
        opened.append(sg)
        return sg

    yield open_with
    for sg in opened:
        sg.close()
