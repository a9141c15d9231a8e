"""Fixtures of the notifier tests: a verifying webhook receiver and a config that routes to it."""

from __future__ import annotations

import base64
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sagacity.notify import NotifyConfig, parse_notify_config

sys.path.insert(0, str(Path(__file__).parent))
from notify_receiver import Receiver

SECRET = "whsec_" + base64.b64encode(b"notify-tests-secret-32-bytes-long").decode()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver(SECRET).start()
    yield found
    found.stop()


def hook_config(url: str, extra: str = "", secret: str = SECRET) -> NotifyConfig:
    """Every event to one webhook; ``extra`` adds [notifier] lines."""
    text = f"""
[notifier]
backoff = 0.01
max_backoff = 0.05
{extra}

[channels.hook]
type = "webhook"
url = "{url}"
secret = "${{HOOK_SECRET}}"

[groups]
ops = ["hook"]

[[routes]]
notify = ["ops"]
"""
    return parse_notify_config(text, environ={"HOOK_SECRET": secret})


@pytest.fixture
def config_for() -> Callable[..., NotifyConfig]:
    return hook_config


@pytest.fixture
def stack() -> Iterator[contextlib.ExitStack]:
    """Closes what a test opened (its Sagacity instances) when it ends."""
    with contextlib.ExitStack() as found:
        yield found
