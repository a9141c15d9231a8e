"""Input checks: what a person or a program may hand the library, refused early with a message
that says what is wrong and where.

The library applies these itself (a decision's approver, a rejection's reason, a saga id a store
must keep verbatim); a surface that takes input from people (the ``sagacity`` command, the HTTP
API, the MCP gateway's policy file, an application's own form) calls the same functions, so a
value refused at the door is the value the library would refuse later, with the same words::

    from sagacity.checks import required_reason, require_identity

    approver = require_identity(form["approver"])  # InvalidValueError naming what is wrong
    reason = required_reason(form["reason"])
"""

from __future__ import annotations

import re

from sagacity._json import kind_of, require_storable
from sagacity._payloads import one_line, required_reason
from sagacity._toml_lines import (
    LineIndex,
    duration_seconds,
    read_config_text,
    toml_document,
    toml_syntax_error,
)
from sagacity.errors import InvalidValueError

__all__ = [
    "LineIndex",
    "duration_seconds",
    "kind_of",
    "one_line",
    "read_config_text",
    "require_identity",
    "require_storable",
    "required_reason",
    "toml_document",
    "toml_syntax_error",
]

_IDENTITY = re.compile(r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]{1,256}\Z")


def require_identity(approver: str) -> str:
    """A decision is recorded under a named identity: non-empty, one line, at most 256 chars."""
    if not isinstance(approver, str) or not _IDENTITY.match(approver) or not approver.strip():
        raise InvalidValueError(
            "approver must be a non-empty identity of at most 256 characters without control "
            f"characters or line breaks, got {approver!r}"
        )
    return approver.strip()
