"""The export format: JSON Lines out (SPEC §7 field names), and back in for offline verification.

Public so that a program reading an export (`sagacity evidence verify`, an auditor's script)
parses and verifies it as the library does: :func:`verify_sagas` names each saga in a file with
its chain's verification.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from itertools import groupby
from typing import Any

from sagacity.chain import Verification, verify
from sagacity.model import Entry

__all__ = ["EXPORT_FIELDS", "export_lines", "parse_line", "verify_lines", "verify_sagas"]

EXPORT_FIELDS = ("sagaId", "seq", "toolName", "phase", "input", "payload", "timestamp", "hash")


def export_lines(entries: Iterable[Entry]) -> Iterator[str]:
    """One compact JSON object per entry, in the order given, without a trailing newline."""
    for entry in entries:
        yield json.dumps(entry.to_json(), ensure_ascii=False, separators=(",", ":"))


def parse_line(line: str) -> Entry:
    """One export line back to an :class:`Entry`; ``ValueError`` says what is wrong with it."""
    try:
        data: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    missing = [name for name in EXPORT_FIELDS if name not in data]
    if missing:
        raise ValueError(f"missing field(s) {', '.join(missing)}")
    for name in EXPORT_FIELDS:
        expected = int if name == "seq" else str
        if not isinstance(data[name], expected) or isinstance(data[name], bool):
            raise ValueError(f"field {name} must be {expected.__name__}")
    try:
        ts = datetime.strptime(data["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError as exc:
        raise ValueError(f"timestamp {data['timestamp']!r} is not YYYY-MM-DDTHH:MM:SS.ffffffZ") from exc
    return Entry(
        data["sagaId"],
        data["seq"],
        data["toolName"],
        data["phase"],
        data["input"],
        data["payload"],
        ts,
        data["hash"],
    )


def _parsed(lines: Iterable[str]) -> Iterator[Entry | str]:
    """Each non-blank line as an :class:`Entry`, or as what is wrong with it (``line N: ...``)."""
    for number, line in enumerate(lines, start=1):
        if line.strip():
            try:
                yield parse_line(line)
            except ValueError as exc:
                yield f"line {number}: {exc}"


def _verified(items: Iterable[Entry | str]) -> Verification:
    """One saga's chain; a malformed line is a break at its position, and the end of reading."""
    malformed: list[str] = []

    def entries() -> Iterator[Entry]:
        for item in items:
            if isinstance(item, str):
                malformed.append(item)
                return
            yield item

    result = verify(entries())
    if malformed and result.valid:
        # The chain read so far was whole; the malformed line is the next entry.
        count = result.entry_count
        return Verification(False, count + 1, count, malformed[0])
    return result


def verify_lines(lines: Iterable[str]) -> Verification:
    """Verify one saga's export offline, streaming. Blank lines are ignored; a line that is not a
    well-formed entry is a break at its position, like an entry whose hash is wrong."""
    return _verified(_parsed(lines))


def verify_sagas(lines: Iterable[str]) -> Iterator[tuple[str, Verification]]:
    """Verify an export of one or several sagas offline, saga by saga, streaming.

    ``sagacity export A B`` writes each saga's lines together, in seq order; a saga whose lines
    are split apart (or a line whose saga id was changed) shows as a chain that does not start
    at seq 1. A malformed line breaks the saga it is in (the rest of that saga's lines are not
    read); the sagas after it are verified as usual.
    """
    saga = [""]

    def saga_of(item: Entry | str) -> str:
        if isinstance(item, Entry):
            saga[0] = item.saga_id
        return saga[0]

    for saga_id, items in groupby(_parsed(lines), key=saga_of):
        yield saga_id, _verified(items)
