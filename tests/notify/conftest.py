"""Fixtures of the notifier tests: a verifying webhook receiver; an ExitStack closing what a test opened."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from notify_receiver import SECRET, Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver(SECRET).start()
    yield found
    found.stop()


@pytest.fixture
def stack() -> Iterator[contextlib.ExitStack]:
    """Closes what a test opened (its Sagacity instances) when it ends."""
    with contextlib.ExitStack() as found:
        yield found
