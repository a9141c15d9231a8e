"""Helpers for testing your own agents and tools with Sagacity.

::

    from sagacity.testing import assert_chain_valid, memory_sagacity

    def test_refund_on_failure():
        with memory_sagacity() as sg:
            result = sg.run("t1", my_agent)
            assert result.status is SagaStatus.COMPENSATED
            assert_chain_valid(sg, "t1")
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sagacity._payloads import LIFE_TOOL
from sagacity._sagacity import Sagacity
from sagacity.model import Entry, Phase
from sagacity.tools import registry

__all__ = ["assert_chain_valid", "assert_phases", "isolated_tools", "memory_sagacity", "tool_entries"]


@contextmanager
def memory_sagacity(**options: Any) -> Iterator[Sagacity]:
    """A Sagacity on a fresh in-memory journal, closed afterwards."""
    with Sagacity("memory://", **options) as sg:
        yield sg


@contextmanager
def isolated_tools() -> Iterator[None]:
    """Tools declared inside the block are unregistered after it, so tests cannot collide."""
    with registry.isolated():
        yield


def assert_chain_valid(sg: Sagacity, saga_id: str) -> None:
    """Fail with the verifier's message unless the saga's hash chain is intact."""
    result = sg.verify(saga_id)
    if not result.valid:
        raise AssertionError(f"saga {saga_id!r}: {result.message}")


def tool_entries(sg: Sagacity, saga_id: str) -> list[Entry]:
    """The saga's journal without its own start and end entries (tool ``sagacity:saga``): the
    entries of its tool calls, gates, decisions and compensation, in seq order."""
    return [e for e in sg.entries(saga_id) if e.tool_name != LIFE_TOOL]


def assert_phases(
    sg: Sagacity, saga_id: str, expected: Sequence[tuple[str, Phase | str]], *, lifecycle: bool = False
) -> None:
    """Fail unless the saga's journal is exactly these (tool_name, phase) pairs, in order.

    The saga's own start and end entries (tool ``sagacity:saga``, docs/journal.md) are left out
    unless ``lifecycle`` is True: what a test of an agent states is what its tools did.
    """
    actual = [
        (e.tool_name, str(e.phase)) for e in sg.entries(saga_id) if lifecycle or e.tool_name != LIFE_TOOL
    ]
    wanted = [(tool_name, str(phase)) for tool_name, phase in expected]
    if actual != wanted:
        raise AssertionError(f"saga {saga_id!r} journal is {actual}, expected {wanted}")
