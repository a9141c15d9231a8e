"""Guardrails rules built in Python: the same rules as the TOML file, through the same validator.

Each constructor (:func:`allow`, :func:`hold`, :func:`deny`, :func:`budget`, :func:`requires`,
:func:`failures`) takes a rule's keys as keyword arguments and checks them at once with the file's
own parser, so a mistake is a ``PolicyError`` naming the rule, raised where the rule is written.
:func:`build_policy` renders the rules as TOML and parses that text: the policy's text (whose
SHA-256 every verdict journals, and which the ``sagacity:policy`` chain records) is a file an
auditor can read, ``sagacity policy check`` and re-derive verdicts from. There is one policy
format; Python is another way to write it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from sagacity._toml_lines import LineIndex
from sagacity.guardrails._parse import _Parser, parse_policy
from sagacity.guardrails._rules import Action, Mode, Policy, Rule, Scope

__all__ = ["allow", "budget", "build_policy", "deny", "failures", "hold", "requires"]

Amount = Decimal | int | str
Duration = timedelta | str | int


def allow(
    id: str,
    *,
    tool: str | Iterable[str] | None = None,
    when: str | None = None,
    amount: str | None = None,
    over: Amount | None = None,
    mode: Mode | str = Mode.ENFORCE,
) -> Rule:
    """A rule that lets the calls it matches run unattended (an IRREVERSIBLE tool needs one)."""
    return _made("allow", locals())


def hold(
    id: str,
    *,
    tool: str | Iterable[str] | None = None,
    when: str | None = None,
    amount: str | None = None,
    over: Amount | None = None,
    approvals: int = 1,
    ttl: Duration | None = None,
    reason: str = "",
    mode: Mode | str = Mode.ENFORCE,
) -> Rule:
    """A rule that holds the calls it matches for ``approvals`` distinct approvers."""
    return _made("hold", locals())


def deny(
    id: str,
    *,
    tool: str | Iterable[str] | None = None,
    when: str | None = None,
    amount: str | None = None,
    over: Amount | None = None,
    reason: str = "",
    mode: Mode | str = Mode.ENFORCE,
) -> Rule:
    """A rule that refuses the calls it matches; ``reason`` is what the model is told."""
    return _made("deny", locals())


def budget(
    id: str,
    *,
    limit: Amount,
    window: Duration,
    per: Scope | str = Scope.GLOBAL,
    tool: str | Iterable[str] | None = None,
    when: str | None = None,
    amount: str | None = None,
    over: Amount | None = None,
    action: Action | str = Action.DENY,
    approvals: int = 1,
    ttl: Duration | None = None,
    reason: str = "",
    mode: Mode | str = Mode.ENFORCE,
) -> Rule:
    """At most ``limit`` per sliding ``window``: a count of calls, or with ``amount`` a sum."""
    return _made("budget", locals())


def requires(
    id: str,
    *,
    first: str,
    result: str | None = None,
    tool: str | Iterable[str] | None = None,
    when: str | None = None,
    amount: str | None = None,
    over: Amount | None = None,
    action: Action | str = Action.DENY,
    approvals: int = 1,
    ttl: Duration | None = None,
    reason: str = "",
    mode: Mode | str = Mode.ENFORCE,
) -> Rule:
    """The call needs a call of ``first`` executed (not compensated) earlier in its saga, whose
    result satisfies ``result`` (CEL over ``result`` and ``args``) if given."""
    return _made("requires", locals())


def failures(
    id: str,
    *,
    max_in_row: int,
    per: Scope | str = Scope.GLOBAL,
    tool: str | Iterable[str] | None = None,
    when: str | None = None,
    action: Action | str = Action.DENY,
    approvals: int = 1,
    ttl: Duration | None = None,
    reason: str = "",
    mode: Mode | str = Mode.ENFORCE,
) -> Rule:
    """A circuit breaker: the rule decides once the tool's last ``max_in_row`` outcomes failed."""
    return _made("failures", locals())


def build_policy(*rules: Rule, default: Action | str = Action.ALLOW, source: str = "python policy") -> Policy:
    """The policy of ``rules`` (in this order) and ``default``, as :func:`parse_policy` gives it
    for the same rules written as TOML: its ``text`` is that TOML."""
    for rule in rules:
        if not isinstance(rule, Rule):
            raise TypeError(f"build_policy takes rules (allow(...), hold(...), ...), not {rule!r}")
    text = "# built in Python by sagacity.guardrails.build_policy\n"
    text += f"[guardrails]\ndefault = {_toml(str(default))}\n"
    text += "".join("\n" + _render(rule) for rule in rules)
    return parse_policy(text, source=source)


# -- from keyword arguments to the file's keys, checked by the file's parser ----------------------
@dataclass(frozen=True)
class _Kind:
    """What sets a kind of rule apart: its action (None: the caller's ``action``) and the table of
    its own keys, made from the constructor's arguments."""

    action: Action | None
    keys: Callable[[dict[str, Any]], dict[str, Any]]


def _requires_keys(args: dict[str, Any]) -> dict[str, Any]:
    result = {"result": args["result"]} if args["result"] is not None else {}
    return {"requires": {"tool": args["first"], **result}}


#: Each constructor's kind, by its name.
_KINDS: dict[str, _Kind] = {
    "allow": _Kind(Action.ALLOW, lambda args: {}),
    "hold": _Kind(Action.HOLD, lambda args: {}),
    "deny": _Kind(Action.DENY, lambda args: {}),
    "budget": _Kind(
        None,
        lambda args: {
            "budget": {
                "limit": _amount(args["limit"]),
                "window": _duration(args["window"]),
                "per": str(args["per"]),
            }
        },
    ),
    "requires": _Kind(None, _requires_keys),
    "failures": _Kind(
        None, lambda args: {"failures": {"max_in_row": args["max_in_row"], "per": str(args["per"])}}
    ),
}


def _made(kind: str, args: dict[str, Any]) -> Rule:
    """The rule a constructor's arguments (its ``locals()``, by name) describe, as the file's
    parser reads it: the filters, the kind's own keys, then the keys every action may take.

    Keys a kind has no argument for keep their defaults (no ``approvals`` on ``allow``...)."""
    spec = _KINDS[kind]
    table: dict[str, Any] = {
        "id": args["id"],
        "action": str(spec.action if spec.action is not None else args["action"]),
        **_filters(args.get("tool"), args.get("when"), args.get("amount"), args.get("over")),
        **spec.keys(args),
    }
    if args.get("approvals", 1) != 1:
        table["approvals"] = args["approvals"]
    if args.get("ttl") is not None:
        table["ttl"] = _duration(args["ttl"])
    if args.get("reason"):
        table["reason"] = args["reason"]
    if str(args["mode"]) != Mode.ENFORCE:
        table["mode"] = str(args["mode"])
    return _Parser(f"rule {args['id']!r}", LineIndex("")).rule(table, ("rules", "0"))


def _filters(
    tool: str | Iterable[str] | None, when: str | None, amount: str | None, over: Amount | None
) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if tool is not None:
        body["tool"] = tool if isinstance(tool, str) else list(tool)
    if when is not None:
        body["when"] = when
    if amount is not None:
        body["amount"] = amount
    if over is not None:
        body["over"] = _amount(over)
    return body


def _amount(value: Amount) -> Any:
    """A Decimal as its exact text; anything else is left for the parser to accept or refuse."""
    return str(value) if isinstance(value, Decimal) else value


def _duration(value: Duration) -> Any:
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
        return f"{int(seconds) if seconds.is_integer() else seconds}s"
    return value


# -- from a rule back to its TOML table -----------------------------------------------------------
def _toml(value: Any) -> str:
    """A TOML value: a basic string (JSON's escapes are TOML's, plus DEL), an integer, an array."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, bool):  # pragma: no cover - no rule key is a boolean
        raise TypeError("no boolean keys in a policy")
    if isinstance(value, int):
        return str(value)
    return "[" + ", ".join(_toml(item) for item in value) + "]"


def _seconds(value: timedelta) -> str:
    return str(_duration(value))


def _render(rule: Rule) -> str:
    lines = ["[[rules]]", f"id = {_toml(rule.id)}"]
    if rule.tools is not None:
        names = sorted(rule.tools)
        lines.append(f"tool = {_toml(names[0] if len(names) == 1 else names)}")
    if rule.when is not None:
        lines.append(f"when = {_toml(rule.when.text)}")
    if rule.amount is not None:
        lines.append(f"amount = {_toml('.'.join(rule.amount))}")
    if rule.over is not None:
        lines.append(f"over = {_toml(str(rule.over))}")
    lines.append(f"action = {_toml(str(rule.action))}")
    if rule.action is Action.HOLD:
        if rule.approvals != 1:
            lines.append(f"approvals = {rule.approvals}")
        if rule.ttl is not None:
            lines.append(f"ttl = {_toml(_seconds(rule.ttl))}")
    if rule.reason:
        lines.append(f"reason = {_toml(rule.reason)}")
    if rule.mode is not Mode.ENFORCE:
        lines.append(f"mode = {_toml(str(rule.mode))}")
    if rule.budget is not None:
        lines += [
            "[rules.budget]",
            f"limit = {_toml(str(rule.budget.limit))}",
            f"window = {_toml(_seconds(rule.budget.window))}",
            f"per = {_toml(str(rule.budget.per))}",
        ]
    if rule.requires is not None:
        lines += ["[rules.requires]", f"tool = {_toml(rule.requires.tool)}"]
        if rule.requires.result is not None:
            lines.append(f"result = {_toml(rule.requires.result.text)}")
    if rule.failures is not None:
        lines += [
            "[rules.failures]",
            f"max_in_row = {rule.failures.max_in_row}",
            f"per = {_toml(str(rule.failures.per))}",
        ]
    return "\n".join(lines) + "\n"
