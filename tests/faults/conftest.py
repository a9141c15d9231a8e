"""The fault tests' helpers (pg_pair, workload, invariants) import as plain modules, as their
worker processes import them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagacity.tools import registry

HERE = Path(__file__).parent


@pytest.fixture
def workload() -> Iterator[object]:
    """The workload's tools, imported here too: the test's own recover() needs them."""
    sys.path.insert(0, str(HERE))
    with registry.isolated():
        sys.modules.pop("workload", None)
        import workload

        yield workload
    sys.path.remove(str(HERE))
    sys.modules.pop("workload", None)
