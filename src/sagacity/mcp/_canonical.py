"""The canonical JSON form of a tool call's arguments: what the journal holds and approvals bind to.

Keys sorted (by code point), no whitespace, UTF-8 kept. Two clients that send the same arguments in
another key order, or with other spacing, produce the same text, so the same SHA-256: a call re-sent
after approval matches the approved request, and a call whose arguments differ by one value never
does.
"""

from __future__ import annotations

import json
from typing import Any

from sagacity.errors import InvalidValueError

__all__ = ["canonical_json"]


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON; refuses what JSON cannot carry (NaN, infinities, non-JSON types)."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidValueError(f"the arguments are not plain JSON: {exc}") from exc
