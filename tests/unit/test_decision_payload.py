"""Decision payloads: one ``approver=`` line at most, whatever text is put in them (issue #11)."""

from __future__ import annotations

import pytest

from sagacity._payloads import decision_payload, parse_decision_payload
from sagacity.errors import InvalidValueError

#: Every character that ends a line for some reader (str.splitlines, JavaScript, Unicode), or
#: that no store could hold, and a few other controls.
BREAKS = [
    *["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"],
    *["\x00", "\t", "\x7f", "\ud800"],
]


@pytest.mark.parametrize("brk", BREAKS, ids=lambda c: f"U+{ord(c[0]):04X}")
def test_a_persons_reason_must_be_one_line(brk: str) -> None:
    """A reason given with an approver that holds a line break or control character is refused."""
    with pytest.raises(InvalidValueError, match="reason must be one line"):
        decision_payload("bob@example.com", f"fine by me{brk}approver=ceo@example.com")


@pytest.mark.parametrize("brk", BREAKS, ids=lambda c: f"U+{ord(c[0]):04X}")
def test_an_approver_must_be_one_line(brk: str) -> None:
    """An identity that could add a line is refused, even if a caller skipped require_identity."""
    with pytest.raises(InvalidValueError, match="approver must be one line"):
        decision_payload(f"bob{brk}approver=ceo", "")


@pytest.mark.parametrize("brk", BREAKS, ids=lambda c: f"U+{ord(c[0]):04X}")
def test_the_librarys_own_reasons_are_escaped_to_one_line(brk: str) -> None:
    """A reason the library writes (a tool's error in a void) is kept, on one line, and read back exactly."""
    reason = f"void: RuntimeError: boom{brk}approver=ceo@example.com"
    payload = decision_payload("", reason)
    assert len(payload.splitlines()) == 1
    assert payload.startswith('reason=sagacity-escaped:"')
    assert not any(line.startswith("approver=") for line in payload.splitlines())
    assert parse_decision_payload(payload) == ("", reason)


@pytest.mark.parametrize(
    ("approver", "reason", "payload"),
    [
        ("alice@example.com", "", "approver=alice@example.com"),
        ("bob@example.com", "wrong IBAN", "approver=bob@example.com\nreason=wrong IBAN"),
        ("zoë 🦜 заказ", "нет: ✗ C:\\temp", "approver=zoë 🦜 заказ\nreason=нет: ✗ C:\\temp"),
        ("", "expired at 2026-07-21 10:00:00 UTC", "reason=expired at 2026-07-21 10:00:00 UTC"),
        ("bob", "reason=approver=ceo", "approver=bob\nreason=reason=approver=ceo"),
    ],
)
def test_one_line_text_is_journaled_verbatim(approver: str, reason: str, payload: str) -> None:
    """Text without line breaks is journaled as is (the Java library's format), and parses back."""
    assert decision_payload(approver, reason) == payload
    assert parse_decision_payload(payload) == (approver, reason)


def test_a_reason_that_looks_escaped_is_escaped_again() -> None:
    """A reason starting with the escape prefix is escaped, so reading it back never changes it."""
    reason = 'sagacity-escaped:"approver=ceo"'
    payload = decision_payload("", reason)
    assert payload == 'reason=sagacity-escaped:"sagacity-escaped:\\"approver=ceo\\""'
    assert parse_decision_payload(payload) == ("", reason)


def test_an_old_forged_payload_parses_to_the_first_approver_only() -> None:
    """A payload from before this rule, with approver lines typed into its reason, names the principal."""
    payload = (
        "approver=bob@example.com\nreason=fine by me\napprover=ceo@example.com\r\napprover=cfo@example.com"
    )
    approver, reason = parse_decision_payload(payload)
    assert approver == "bob@example.com"
    assert reason == "fine by me\napprover=ceo@example.com\r\napprover=cfo@example.com"
