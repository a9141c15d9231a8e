"""The one canonical encoder: call arguments to journal input, results to payload, and the escape
that keeps any Python string storable on every backend."""

from __future__ import annotations

import json
from typing import Any

from sagacity.errors import InvalidValueError

# One encoder for every call: ``json.dumps`` with options builds a new one each time, and so does
# ``JSONEncoder.encode`` (its C half, per call). Built once here without circular-reference
# markers, the C encoder keeps no state between calls, so one instance serves every thread. A
# value that contains itself then ends in RecursionError, reported by ``compact`` as what it is;
# the pure-Python fallback (a build without ``_json``) is set up to behave the same way.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str, check_circular=False)
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_C_COMPACT: Any = (
    None
    if _c_make_encoder is None
    else _c_make_encoder(None, str, json.encoder.encode_basestring, None, ":", ",", False, False, True)
)

#: Prefix of a payload that had to be escaped to be storable.
ESCAPED_PREFIX = "sagacity-escaped:"


def compact(value: Any) -> str:
    """Compact JSON (no spaces, UTF-8 kept), as SPEC §5 shows inputs: ``{"sku":"SKU-9"}``.

    Non-JSON values (dates, decimals, objects) fall back to ``str``, so journaling never fails on
    an argument the tool itself accepts.
    """
    try:
        return _COMPACT.encode(value) if _C_COMPACT is None else "".join(_C_COMPACT(value, 0))
    except RecursionError:
        raise InvalidValueError(
            "cannot encode a value nested too deep or containing itself (a circular reference)"
        ) from None


def encode_result(value: Any) -> str:
    """A tool's result as payload: a ``str`` as is, ``None`` as empty, anything else as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return compact(value)


def storable(value: str) -> bool:
    """Whether every store can hold ``value`` verbatim.

    PostgreSQL TEXT refuses U+0000 and no UTF-8 column holds an unpaired surrogate. A value that
    already starts with the escape prefix is escaped again, or reading it back would change it.
    """
    if "\x00" in value or value.startswith(ESCAPED_PREFIX):
        return False
    if value.isascii():
        return True  # encodable, without building the bytes
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def escape_text(value: str) -> str:
    """The journaled form of a payload: itself when storable, else prefix + a JSON string literal.

    Applied identically for every store *before* hashing, so the hash covers the stored bytes and
    any verifier, reading any store or an export, recomputes it without knowing about the escape.
    """
    if storable(value):
        return value
    return ESCAPED_PREFIX + json.dumps(value, ensure_ascii=True)


def unescape_text(value: str) -> str:
    """Undo :func:`escape_text`."""
    if value.startswith(ESCAPED_PREFIX):
        decoded = json.loads(value[len(ESCAPED_PREFIX) :])
        if isinstance(decoded, str):
            return decoded
    return value


def require_storable(field: str, value: str) -> str:
    """Refuse, before anything runs, an identifier or input that no store could keep verbatim.

    Inputs are JSON, and JSON escapes NUL inside strings, so a raw NUL only reaches here from a
    caller's own malformed text; saga ids and tool names are names, never escaped.
    """
    if not isinstance(value, str):
        raise InvalidValueError(f"{field} must be a str, not {type(value).__name__}")
    if "\x00" in value:
        raise InvalidValueError(f"{field} contains a NUL character, which no journal can store")
    if value.isascii():  # the common case: ASCII always encodes, so skip building the bytes
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidValueError(f"{field} is not valid Unicode text: {exc.reason}") from exc
    return value


def kind_of(value: object, *, mapping: str = "an object") -> str:
    """What a decoded JSON (or TOML) value is, for messages: "a string", "an array", ...

    ``mapping`` names a dict ("a table" in TOML's words).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return mapping
    return type(value).__name__
