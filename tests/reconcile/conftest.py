"""Reconciler tests: a fake payments service over real HTTP (``payments``), the tools that call it
and their reconcilers (``pay_tools``), and a worker process that a test kills (``pay_worker``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from payments import Payments  # noqa: E402


@pytest.fixture
def payments(monkeypatch: pytest.MonkeyPatch) -> Iterator[Payments]:
    """The service on a free loopback port, in a thread of the test process; its URL is in
    ``$PAYMENTS_URL`` for the tools here and in every worker started from here."""
    service = Payments()
    monkeypatch.setenv("PAYMENTS_URL", service.url)
    yield service
    service.close()


@pytest.fixture
def pay_tools() -> Iterator[object]:
    """The tools and their reconcilers, registered in this process as an operator's would be."""
    from sagacity.tools import registry

    with registry.isolated():
        sys.modules.pop("pay_tools", None)
        import pay_tools

        yield pay_tools
    sys.modules.pop("pay_tools", None)
