"""Golden vectors for the hash chain, recomputed here from SPEC §3 without ``sagacity.chain``."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

import pytest

from sagacity import chain

GENESIS = "0" * 64
SPEC_H1 = "2b8f009dcde4115339f77250ec69761e299c66809b569f77fe75033c04f80a4b"
SPEC_H2 = "9058ec436f5710616413c86679ae40f6e6d6cb1828ada8584dfdf4c99020feea"


def _frame(value: str) -> bytes:
    """SPEC §3: F(s) = ASCII decimal byte length of UTF-8(s) + ":" + UTF-8(s)."""
    data = value.encode("utf-8")
    return str(len(data)).encode("ascii") + b":" + data


def _independent_hash(
    prev: str, saga_id: str, seq: int, tool: str, phase: str, inp: str, payload: str, ts: str
) -> str:
    """SPEC §3 written out: SHA-256 over the framed fields in order, no separators, lowercase hex."""
    fields = (prev, saga_id, str(seq), tool, phase, inp, payload, ts)
    return hashlib.sha256(b"".join(_frame(f) for f in fields)).hexdigest()


# (prev, saga_id, seq, tool, phase, input, payload, timestamp as given, ts field, pinned hash)
VECTORS = [
    pytest.param(
        GENESIS, "s1", 1, "reserveInventory", "INTENT", "{}", "",
        datetime(2026, 7, 21, 10, 0, 0), "1784628000.000000", SPEC_H1,
        id="spec-1",
    ),
    pytest.param(
        SPEC_H1, "s1", 2, "reserveInventory", "EXECUTED", "{}", "ok",
        datetime(2026, 7, 21, 10, 0, 1), "1784628001.000000", SPEC_H2,
        id="spec-2",
    ),
    pytest.param(
        GENESIS, "bestellung-ü", 1, "räumen", "EXECUTED", '{"city":"日本"}', "done 🎉 ü",
        datetime(2026, 7, 21, 10, 0, 0, 999999), "1784628000.999999",
        "b5e7bda845fdda6e3c2ab0e1f67e18b01490051ab482f423c031c0dbd1f40316",
        id="multibyte-utf8-and-999999-micros",
    ),
    pytest.param(
        GENESIS, "日本-🎉", 7, "send-💸", "INTENT", "", "",
        datetime(2026, 7, 21, 19, 0, 0, tzinfo=timezone(timedelta(hours=9))), "1784628000.000000",
        "a7752257808c577b6cb867ce1929c7335745ae5129654ea82a67d320f6011e81",
        id="empty-fields-aware-timestamp",
    ),
    pytest.param(
        GENESIS, "s", 1, "t", "FAILED", "", "",
        1_784_628_000_999_999_999, "1784628000.999999",
        "54c9ca4319461dd3a4e6f5b45e744b09c54614fd419f4e94bd6bcf5bda2bcfc9",
        id="nanoseconds-truncate-not-round",
    ),
    pytest.param(
        GENESIS, "s", 1, "t", "INTENT", "{}", "",
        1_999, "0.000001",
        "a2712cc06996ad1fe900a041783f6987780026cbade80a40eb5564aff4d30f4e",
        id="one-microsecond-after-epoch",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("prev", "saga_id", "seq", "tool", "phase", "inp", "payload", "moment", "ts", "pinned"), VECTORS
)
def test_golden_vector(
    prev: str,
    saga_id: str,
    seq: int,
    tool: str,
    phase: str,
    inp: str,
    payload: str,
    moment: datetime | int,
    ts: str,
    pinned: str,
) -> None:
    """chain.entry_hash agrees with SPEC §3 recomputed independently and with the pinned hex."""
    assert _independent_hash(prev, saga_id, seq, tool, phase, inp, payload, ts) == pinned
    micros = chain.to_utc_micros(moment)
    assert chain.timestamp_field(micros) == ts
    assert chain.entry_hash(prev, saga_id, seq, tool, phase, inp, payload, micros) == pinned


def test_frame_counts_utf8_bytes_not_characters() -> None:
    """F(s) prefixes the UTF-8 byte length, so multi-byte characters and empty strings frame exactly."""
    assert chain.frame("") == b"0:"
    assert chain.frame("ü") == b"2:\xc3\xbc"
    assert chain.frame("日本") == b"6:" + "日本".encode()
    assert chain.frame("🎉") == b"4:\xf0\x9f\x8e\x89"


def test_nanoseconds_truncate_toward_the_past() -> None:
    """An epoch-nanosecond value keeps whole microseconds and drops the rest, never rounding up."""
    assert chain.to_utc_micros(1_784_628_000_999_999_999) == datetime(2026, 7, 21, 10, 0, 0, 999999)
    assert chain.to_utc_micros(1_784_628_000_000_000_999) == datetime(2026, 7, 21, 10, 0, 0)
    assert chain.to_utc_micros(1_784_628_000_000_001_000) == datetime(2026, 7, 21, 10, 0, 0, 1)


def test_aware_timestamp_is_converted_to_naive_utc() -> None:
    """An aware datetime hashes as the same instant in UTC; a naive one is taken as UTC already."""
    aware = datetime(2026, 7, 21, 5, 0, 0, 123456, tzinfo=timezone(timedelta(hours=-5)))
    assert chain.to_utc_micros(aware) == datetime(2026, 7, 21, 10, 0, 0, 123456)
    assert chain.timestamp_field(aware) == "1784628000.123456"


@dataclass(frozen=True)
class _Row:
    saga_id: str
    seq: int
    tool_name: str
    phase: str
    input: str
    payload: str
    timestamp: datetime
    hash: str


def _spec_rows() -> list[_Row]:
    return [
        _Row("s1", 1, "reserveInventory", "INTENT", "{}", "", datetime(2026, 7, 21, 10, 0, 0), SPEC_H1),
        _Row("s1", 2, "reserveInventory", "EXECUTED", "{}", "ok", datetime(2026, 7, 21, 10, 0, 1), SPEC_H2),
    ]


def test_verify_accepts_the_spec_chain() -> None:
    """chain.verify accepts SPEC §3's two entries and counts them."""
    result = chain.verify(_spec_rows())
    assert (result.valid, result.entry_count, result.break_at_index) == (True, 2, -1)


def test_verify_reports_first_bad_entry_zero_based() -> None:
    """An edited field, a wrong phase or a seq gap is reported at the zero-based index of that entry."""
    rows = _spec_rows()
    edited = [rows[0], replace(rows[1], payload="ko")]
    assert chain.verify(edited).break_at_index == 1
    assert chain.verify([replace(rows[0], phase="DONE"), rows[1]]).break_at_index == 0
    gap = chain.verify([rows[0], replace(rows[1], seq=3)])
    assert (gap.valid, gap.entry_count, gap.break_at_index) == (False, 2, 1)


def test_verify_of_nothing_is_valid_and_empty() -> None:
    """An empty sequence verifies with zero entries and no break."""
    assert chain.verify([]) == chain.Verification(True, 0, -1, "no entries")
