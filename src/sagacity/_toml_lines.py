"""Line numbers of a TOML document's tables and keys, so that a config error can name its line.

TOML's parser gives positions only for syntax errors; this light scan of the text finds where each
table and key was written (the MCP gateway's policy and the guardrails policy share it).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["LineIndex", "duration_seconds", "read_config_text", "toml_document", "toml_syntax_error"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> float | None:
    """Seconds in a duration such as ``"90"``, ``"30s"``, ``"15m"``, ``"2h"``, ``"1d"`` (else None)."""
    match = _DURATION.match(text)
    return float(match.group(1)) * _UNIT[match.group(2)] if match is not None else None


_AT = re.compile(r"\s*\((?:at line (?P<line>\d+), column (?P<column>\d+)|at end of document)\)$")


def toml_syntax_error(source: str, text: str, error: tomllib.TOMLDecodeError) -> str:
    """A TOML syntax error in the form of every other config error, ``<source> line <n>: ...``
    (tomllib puts the position at the end of its message, or says "at end of document")."""
    message = str(error)
    match = _AT.search(message)
    if match is None:
        return f"{source}: {message}"
    what = message[: match.start()]
    if match.group("line") is None:
        return f"{source} line {max(1, len(text.splitlines()))}: {what} (at the end of the file)"
    return f"{source} line {match.group('line')}: {what} (column {match.group('column')})"


def read_config_text(path: str | Path, what: str, error: type[Exception]) -> str:
    """The UTF-8 text of a config file (``what`` names it in messages), or ``error`` saying why not."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text ({exc.reason})") from exc


def toml_document(text: str, source: str, error: type[Exception]) -> dict[str, Any]:
    """``text`` parsed as TOML, or ``error`` naming the line of its syntax error."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(toml_syntax_error(source, text, exc)) from exc


_BARE = r"[A-Za-z0-9_-]+"
_BASIC = r'"(?:[^"\\]|\\.)*"'
_LITERAL = r"'[^']*'"
_PART = rf"(?:{_BARE}|{_BASIC}|{_LITERAL})"
_DOTTED = rf"{_PART}(?:\s*\.\s*{_PART})*"
_HEADER = re.compile(rf"^\s*\[\[?\s*(?P<key>{_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(rf"^\s*(?P<key>{_DOTTED})\s*=")
_PART_RE = re.compile(_PART)


def _split_key(dotted: str) -> tuple[str, ...]:
    parts = []
    for match in _PART_RE.finditer(dotted):
        part = match.group(0)
        if part.startswith('"'):
            part = tomllib.loads(f"k = {part}")["k"]
        elif part.startswith("'"):
            part = part[1:-1]
        parts.append(part)
    return tuple(parts)


def _within_arrays(key: tuple[str, ...], arrays: dict[tuple[str, ...], int]) -> tuple[str, ...]:
    """``key`` with the index of the latest element inserted after each array of tables in it."""
    out: tuple[str, ...] = ()
    for position, part in enumerate(key):
        out = (*out, part)
        if out in arrays and position < len(key) - 1:
            out = (*out, str(arrays[out]))
    return out


class LineIndex:
    """Line numbers of tables and keys, found by a light scan of the text (TOML's parser gives
    positions only for syntax errors).

    An element of an array of tables (``[[rules]]``) is addressed by its index as a string:
    ``("rules", "0", "id")`` is the first rule's ``id``; ``[rules.budget]`` after it is
    ``("rules", "0", "budget")``.
    """

    def __init__(self, text: str) -> None:
        self.lines: dict[tuple[str, ...], int] = {}
        arrays: dict[tuple[str, ...], int] = {}  # array of tables -> index of its latest element
        table: tuple[str, ...] = ()
        in_multiline: str | None = None
        for number, line in enumerate(text.splitlines(), start=1):
            if in_multiline is not None:
                if line.count(in_multiline) % 2 == 1:
                    in_multiline = None
                continue
            header = _HEADER.match(line)
            if header is not None:
                table = _within_arrays(_split_key(header.group("key")), arrays)
                if line.lstrip().startswith("[["):
                    index = arrays.get(table, -1) + 1
                    arrays[table] = index
                    self.lines.setdefault(table, number)
                    table = (*table, str(index))
                self._note(table, number)
                continue
            key = _KEY.match(line)
            if key is not None:
                self._note(table + _split_key(key.group("key")), number)
                rest = line[key.end() :]
                for quote in ('"""', "'''"):
                    if rest.count(quote) % 2 == 1:
                        in_multiline = quote

    def _note(self, path: tuple[str, ...], number: int) -> None:
        """``path`` and every table above it (``[toolz.charge]`` is where ``toolz`` first
        appears, though no line says ``[toolz]``) are at ``number`` unless seen earlier."""
        for end in range(1, len(path) + 1):
            self.lines.setdefault(path[:end], number)

    def line(self, path: tuple[str, ...]) -> int | None:
        """The line of ``path``, or of the nearest enclosing table or key that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None
