"""The journal's JSON: the shared encoder writes exactly what ``json.dumps`` with the same options
writes, for any value, and says so clearly when a value contains itself."""

from __future__ import annotations

import json
import math
import threading
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagacity import Sagacity, tool
from sagacity._json import compact
from sagacity.errors import InvalidValueError


def reference(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text() | st.integers() | st.booleans() | st.none(), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_compact_is_json_dumps_with_the_same_options(value: Any) -> None:
    assert compact(value) == reference(value)


@pytest.mark.parametrize(
    "value",
    [
        {},
        "plain str",
        {"sku": "SKU-9", "quantity": 2},
        {"when": datetime(2026, 12, 1, 5, 0), "amount": Decimal("12.50"), "tags": {"a"}},
        [math.nan, math.inf, -math.inf, 1e300, -0.0],
        {"ünï": "cödé ☃", "nul": "a\x00b", "lone": "\ud800"},
        {7: "int key", True: "bool key", None: "none key", 2.5: "float key"},
    ],
)
@pytest.mark.parametrize("encoder", ["c", "python"])
def test_compact_matches_json_dumps_on_the_awkward_cases(
    value: Any, encoder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if encoder == "python":  # a build without the _json C module
        monkeypatch.setattr("sagacity._json._C_COMPACT", None)
    assert compact(value) == reference(value)


@pytest.mark.parametrize("encoder", ["c", "python"])
def test_a_value_that_contains_itself_is_refused_clearly(
    encoder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if encoder == "python":
        monkeypatch.setattr("sagacity._json._C_COMPACT", None)
    looped: dict[str, Any] = {}
    looped["self"] = looped
    with pytest.raises(InvalidValueError, match="circular"):
        compact(looped)


def test_a_tool_called_with_a_circular_argument_never_runs_and_is_not_journaled() -> None:
    ran: list[Any] = []

    @tool
    def take(payload: Any) -> str:
        ran.append(payload)
        return "taken"

    looped: list[Any] = []
    looped.append(looped)
    with Sagacity("memory://") as sg:
        with pytest.raises(InvalidValueError, match="circular"), sg.saga("loop"):
            take(looped)
        assert ran == []
        assert [e.tool_name for e in sg.entries("loop")].count("take") == 0


def test_one_encoder_serves_many_threads_at_once() -> None:
    values = [{"thread": i, "items": list(range(i % 7)), "name": f"n{i}" * (i % 5)} for i in range(64)]
    results: dict[int, list[str]] = {}

    def encode(i: int) -> None:
        results[i] = [compact(values[(i + k) % 64]) for k in range(500)]

    threads = [threading.Thread(target=encode, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i, encoded in results.items():
        assert encoded == [reference(values[(i + k) % 64]) for k in range(500)]
