"""The undo-argument template: how a compensation's arguments are built from the original call.

A template is a TOML value. Tables and arrays are templated member by member; numbers and booleans
are literal; strings may hold placeholders:

* ``"{args.order_id}"`` — a string that is one placeholder and nothing else stands for the value it
  names, with its JSON type (a number stays a number, an object an object);
* ``"refund for {args.order_id}"`` — placeholders inside text are written into it (strings as they
  are, anything else as compact JSON);
* ``{{`` and ``}}`` are literal braces.

A placeholder is a root followed by dot-separated keys (letters, digits and ``_-$@:#``; a decimal
key indexes an array):
``args`` (the original call's arguments), ``result`` (its result: ``result.structured`` the
structured content, ``result.text`` the text blocks joined by newlines, ``result.json`` that text
parsed as JSON, ``result.content`` the content blocks, ``result.isError``), ``saga`` (``saga.id``)
and ``call`` (``call.seq``, ``call.idempotency_key``). Nothing is evaluated: a placeholder is a path
looked up in plain data, never code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagacity.checks import kind_of
from sagacity.errors import SagacityError

__all__ = ["ROOTS", "Template", "TemplateError", "compile_template", "result_scope"]

#: What a placeholder may start with.
ROOTS = ("args", "result", "saga", "call")
#: One key of a placeholder's path: letters, digits and _ - $ @ : # (no spaces, quotes, operators).
_KEY = re.compile(r"^[\w$@:#-]+$")


class TemplateError(SagacityError, ValueError):
    """A template that cannot be compiled, or a placeholder that names nothing in the call."""


@dataclass(frozen=True, slots=True)
class Placeholder:
    """``{root.key.key}``: a path into the call's data."""

    root: str
    path: tuple[str, ...]

    @property
    def source(self) -> str:
        return ".".join((self.root, *self.path))

    def lookup(self, scope: Mapping[str, Any]) -> Any:
        value: Any = scope[self.root]
        walked = self.root
        for key in self.path:
            if isinstance(value, _NotJson):
                raise TemplateError(f"{{{self.source}}}: {walked} is not available ({value.why})")
            if isinstance(value, Mapping):
                if key not in value:
                    have = ", ".join(sorted(str(k) for k in value)) or "nothing"
                    raise TemplateError(f"{{{self.source}}}: {walked} has no key {key!r} (it has {have})")
                value = value[key]
            elif isinstance(value, list) and key.isdecimal():
                index = int(key)
                if index >= len(value):
                    raise TemplateError(f"{{{self.source}}}: {walked} has {len(value)} items, no [{index}]")
                value = value[index]
            else:
                raise TemplateError(
                    f"{{{self.source}}}: {walked} is {kind_of(value)}, which has no key {key!r}"
                )
            walked = f"{walked}.{key}"
        if isinstance(value, _NotJson):
            raise TemplateError(f"{{{self.source}}}: not available ({value.why})")
        return value


@dataclass(frozen=True, slots=True)
class _Text:
    """A string with placeholders inside text."""

    parts: tuple[str | Placeholder, ...]


Node = Any  # dict[str, Node] | list[Node] | Placeholder | _Text | str | int | float | bool


class Template:
    """A compiled template: :meth:`render` it with the call's data."""

    def __init__(self, node: Node) -> None:
        self._node = node

    def render(self, scope: Mapping[str, Any]) -> Any:
        """The value with every placeholder replaced; ``TemplateError`` names one that names nothing."""
        return _render(self._node, scope)

    def placeholders(self) -> list[str]:
        """Every placeholder's path, in order (for messages and ``sagacity mcp check``)."""
        found: list[str] = []
        _collect(self._node, found)
        return found


def compile_template(value: Any) -> Template:
    """Compile a TOML value into a template; ``TemplateError`` says what is malformed."""
    return Template(_compile(value, "arguments"))


def result_scope(result: Mapping[str, Any]) -> dict[str, Any]:
    """What ``{result.*}`` sees, from a tool result in its wire form (``content``,
    ``structuredContent``, ``isError``)."""
    content = result.get("content") or []
    text = "\n".join(
        str(block.get("text", ""))
        for block in content
        if isinstance(block, Mapping) and block.get("type") == "text"
    )
    parsed: Any
    try:
        parsed = json.loads(text) if text else _NotJson("the result has no text")
    except ValueError:
        parsed = _NotJson("the result's text is not JSON")
    structured = result.get("structuredContent")
    return {
        "structured": structured
        if structured is not None
        else _NotJson("the result has no structured content"),
        "text": text,
        "json": parsed,
        "content": list(content),
        "isError": bool(result.get("isError", False)),
    }


@dataclass(frozen=True, slots=True)
class _NotJson:
    why: str


def _compile(value: Any, where: str) -> Node:
    if isinstance(value, Mapping):
        return {str(k): _compile(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_compile(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, str):
        return _compile_string(value, where)
    if value is None or isinstance(value, bool | int | float):
        return value
    raise TemplateError(
        f"{where}: a template holds strings, numbers, booleans, arrays and tables, not {value!r}"
    )


def _compile_string(text: str, where: str) -> Node:
    parts: list[str | Placeholder] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "{" and text.startswith("{{", i):
            literal.append("{")
            i += 2
        elif char == "}" and text.startswith("}}", i):
            literal.append("}")
            i += 2
        elif char == "{":
            end = text.find("}", i + 1)
            if end == -1:
                raise TemplateError(f"{where}: {text!r} opens a placeholder with {{ that is never closed")
            if literal:
                parts.append("".join(literal))
                literal = []
            parts.append(_placeholder(text[i + 1 : end], where))
            i = end + 1
        elif char == "}":
            raise TemplateError(f"{where}: {text!r} has a }} without {{ (write }}}} for a literal brace)")
        else:
            literal.append(char)
            i += 1
    if literal:
        parts.append("".join(literal))
    if len(parts) == 1 and isinstance(parts[0], Placeholder):
        return parts[0]
    if all(isinstance(p, str) for p in parts):
        return "".join(p for p in parts if isinstance(p, str))
    return _Text(tuple(parts))


def _placeholder(expr: str, where: str) -> Placeholder:
    keys = expr.split(".")
    if not expr or not all(_KEY.match(k) for k in keys):
        raise TemplateError(f"{where}: {{{expr}}} is not a placeholder like {{args.order_id}}")
    root, *path = keys
    if root not in ROOTS:
        raise TemplateError(
            f"{where}: {{{expr}}} starts with {root!r}; a placeholder starts with one of {', '.join(ROOTS)}"
        )
    return Placeholder(root, tuple(path))


def _render(node: Node, scope: Mapping[str, Any]) -> Any:
    if isinstance(node, Placeholder):
        return node.lookup(scope)
    if isinstance(node, _Text):
        return "".join(p if isinstance(p, str) else _as_text(p.lookup(scope)) for p in node.parts)
    if isinstance(node, dict):
        return {k: _render(v, scope) for k, v in node.items()}
    if isinstance(node, list):
        return [_render(v, scope) for v in node]
    return node


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _collect(node: Node, found: list[str]) -> None:
    if isinstance(node, Placeholder):
        found.append(node.source)
    elif isinstance(node, _Text):
        found.extend(p.source for p in node.parts if isinstance(p, Placeholder))
    elif isinstance(node, dict):
        for v in node.values():
            _collect(v, found)
    elif isinstance(node, list):
        for v in node:
            _collect(v, found)
