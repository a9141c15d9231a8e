"""Values a tool may produce are journaled losslessly on every store, or refused before any write."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sagacity import Phase, Sagacity
from sagacity._json import ESCAPED_PREFIX
from sagacity.errors import InvalidValueError
from sagacity.export import parse_line, verify_lines

ANY_UNICODE = "ü日本🎉 é\u0301 \u202eRTL\u202c \u200b\ufeff \U0010fffd \t\r\n \\ \" ' ; -- DROP TABLE x"


@pytest.fixture
def sg(store_url: str) -> Iterator[Sagacity]:
    with Sagacity(store_url) as sg:
        yield sg


def _round_trip(sg: Sagacity, saga_id: str, payload: str, input: str = "{}") -> None:
    """Append ``payload``; read, verify and export it back; the original text must survive."""
    written = sg.journal.append(saga_id, "tool", Phase.EXECUTED, input, payload)
    [read] = sg.entries(saga_id)
    assert read == written
    assert read.payload_text == payload
    assert read.input == input
    assert sg.verify(saga_id).valid
    [line] = list(sg.export(saga_id))
    assert parse_line(line) == read
    assert json.loads(line)["payload"] == read.payload
    assert verify_lines([line]).valid


def test_any_unicode_is_kept_verbatim(sg: Sagacity) -> None:
    """Multi-byte, combining, bidi, zero-width and the last plane's characters are stored unchanged."""
    _round_trip(sg, "saga-" + ANY_UNICODE, ANY_UNICODE, json.dumps({"q": ANY_UNICODE}, ensure_ascii=False))
    [entry] = sg.entries("saga-" + ANY_UNICODE)
    assert entry.payload == ANY_UNICODE  # no escaping was needed


def test_empty_payload_and_input(sg: Sagacity) -> None:
    """An empty payload and empty input are kept as empty strings, not NULL."""
    _round_trip(sg, "empty", "", "")


def test_ten_megabyte_payload(sg: Sagacity) -> None:
    """A 10 MB payload is stored, hashed, verified and exported whole."""
    payload = ("x" * 1023 + "ü") * 10 * 1024
    assert len(payload.encode()) > 10 * 1024 * 1024
    _round_trip(sg, "big", payload)


@pytest.mark.parametrize(
    "payload",
    ["a\x00b", "\x00", "\x00\x00 ü \x00", "lone surrogate \ud800", ESCAPED_PREFIX + '"looks escaped"'],
)
def test_unstorable_payload_is_escaped_losslessly(sg: Sagacity, payload: str) -> None:
    """NUL, an unpaired surrogate or the escape prefix itself is stored escaped and given back exactly."""
    _round_trip(sg, "nul", payload)
    [entry] = sg.entries("nul")
    assert entry.payload.startswith(ESCAPED_PREFIX)
    assert "\x00" not in entry.payload
    assert entry.payload_text == payload


@pytest.mark.parametrize(
    ("field", "args"),
    [
        ("saga_id", ("sa\x00ga", "tool", Phase.INTENT, "{}")),
        ("tool_name", ("saga", "to\x00ol", Phase.INTENT, "{}")),
        ("input", ("saga", "tool", Phase.INTENT, '{"a":"\x00"}')),
        ("input", ("saga", "tool", Phase.INTENT, '{"a":"\ud800"}')),
        ("saga_id", ("", "tool", Phase.INTENT, "{}")),
    ],
)
def test_unstorable_identifier_or_input_refused_before_writing(
    sg: Sagacity, field: str, args: tuple[str, str, Phase, str]
) -> None:
    """NUL or a lone surrogate in a saga id, tool name or input is refused; nothing is written."""
    with pytest.raises(InvalidValueError, match=field):
        sg.journal.append(*args)
    assert sg.saga_ids() == []
    assert sg.store.tail(args[0].replace("\x00", "")) is None


@pytest.mark.parametrize("saga_id", ["sa\x00ga", "\ud800"])
def test_reading_an_unstorable_saga_id_is_refused_alike(sg: Sagacity, saga_id: str) -> None:
    """Reading, verifying or exporting a saga id no store can hold raises InvalidValueError everywhere."""
    with pytest.raises(InvalidValueError, match="saga_id"):
        sg.entries(saga_id)
    with pytest.raises(InvalidValueError, match="saga_id"):
        sg.verify(saga_id)
    with pytest.raises(InvalidValueError, match="saga_id"):
        sg.export(saga_id)
