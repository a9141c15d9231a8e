"""Fixtures for saga behaviour: an isolated tool registry and a Sagacity on every store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sagacity import Sagacity
from sagacity._context import current_run
from sagacity.tools import registry


@pytest.fixture(autouse=True)
def isolated_tools() -> Iterator[None]:
    """Tools a test declares are forgotten afterwards, and no saga may leak out of a test."""
    with registry.isolated():
        yield
    assert current_run() is None, "a saga context leaked out of the test"


@pytest.fixture
def sg(store_url: str) -> Iterator[Sagacity]:
    with Sagacity(store_url) as sagacity:
        yield sagacity
