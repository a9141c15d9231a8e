"""The facade's ``_async`` twins show the parameters of their blocking methods to every reader.

Twins made by ``sagacity._twins`` (not written out) must still look written out: ``help()``,
``inspect.signature`` and ``inspect.iscoroutinefunction`` see what an ``async def`` with the same
parameters would show (mypy sees it through the ``ParamSpec``; ``mypy --strict`` checks callers)."""

from __future__ import annotations

import asyncio
import inspect
import pydoc

import pytest

from sagacity import Sagacity

#: Twins whose parameters differ from their blocking method's on purpose (as documented).
DIFFERENT = {
    "run",  # the work is ``async def`` (Awaitable) there
    "view",  # ``allow_blocking`` is for sync code on a loop; the twin never blocks
    "diagnose",  # ``progress`` is the blocking call's
}

TWINS = sorted(
    name.removesuffix("_async")
    for name in vars(Sagacity)
    if name.endswith("_async") and not name.startswith("_") and name.removesuffix("_async") in vars(Sagacity)
)


def _parameters(name: str) -> list[inspect.Parameter]:
    return list(inspect.signature(getattr(Sagacity, name)).parameters.values())


@pytest.mark.parametrize("name", TWINS)
def test_a_twin_is_a_coroutine_named_as_written(name: str) -> None:
    twin = getattr(Sagacity, f"{name}_async")
    assert inspect.iscoroutinefunction(twin) or inspect.isasyncgenfunction(twin)
    assert twin.__name__ == f"{name}_async"
    assert twin.__qualname__ == f"Sagacity.{name}_async"
    assert inspect.getdoc(getattr(Sagacity, name))


@pytest.mark.parametrize("name", [n for n in TWINS if n not in DIFFERENT])
def test_a_twin_takes_its_blocking_methods_parameters(name: str) -> None:
    blocking = inspect.signature(getattr(Sagacity, name))
    twin = inspect.signature(getattr(Sagacity, f"{name}_async"))
    assert twin.parameters == blocking.parameters
    if name != "export":  # an async iterator of the lines, not the iterator
        assert twin.return_annotation == blocking.return_annotation


def test_the_filter_keywords_are_the_same_everywhere() -> None:
    """``approvals`` takes ``approval_page``'s parameters; the saga list and the approval queue
    take the same filter keywords (keyword-only, same types, default None)."""
    assert _parameters("approvals") == _parameters("approval_page")
    assert inspect.signature(Sagacity.approvals).return_annotation == "list[PendingApproval]"
    filters = ("prefix", "tool", "since", "until")
    seen = set()
    for name in ("sagas", "pending_approvals", "approval_page"):
        named = {p.name: p for p in _parameters(name)}
        seen.add(tuple(named[f] for f in filters))
    assert len(seen) == 1
    assert all(p.kind is p.KEYWORD_ONLY and p.default is None for p in seen.pop())


def test_help_shows_a_made_twins_parameters() -> None:
    """``help(Sagacity)`` lists a twin with its parameters and ``async``, as if written out."""
    text = pydoc.render_doc(Sagacity, renderer=pydoc.plaintext)
    assert "async sagas_async(self, *, status: 'SagaStatus | str | None' = None," in text
    assert "broken_chain: 'bool | None' = None) -> 'list[SagaSummary]'" in text
    assert "async view_async(self, saga_id: 'str') -> 'SagaView'" in text
    assert "approvals(self, saga_id: 'str | None' = None, *, limit: 'int | None' = None," in text


def test_a_wrong_argument_names_the_method_called() -> None:
    """A made method refuses a misspelt keyword naming itself, as a written-out one does."""
    with Sagacity("memory://") as sg:
        with pytest.raises(TypeError) as raised:
            sg.approvals(prefx="a")  # type: ignore[call-arg]
        assert str(raised.value) == "Sagacity.approvals() got an unexpected keyword argument 'prefx'"
        with pytest.raises(TypeError) as raised:
            asyncio.run(sg.sagas_async(prefx="a"))  # type: ignore[call-arg]
        assert str(raised.value) == "Sagacity.sagas_async() got an unexpected keyword argument 'prefx'"
