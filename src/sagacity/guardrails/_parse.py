"""The guardrails policy file (TOML) in, a :class:`Policy` out, or a ``PolicyError`` naming the line.

Strict, so that a typo can never silently drop a rule: unknown keys, wrong types, a condition
that does not compile or is not boolean, an amount that is not a decimal, duplicate rule ids,
options that do not fit the action — each is an error naming ``<file> line <n>``. The same file
may hold the MCP gateway's tables (``[upstream]``, ``[tools.NAME]``, ...): they are the
gateway's to check (``sagacity.mcp``), and the rules apply to its calls too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from sagacity._json import kind_of
from sagacity._toml_lines import LineIndex, duration_seconds, read_config_text, toml_document
from sagacity.errors import PolicyError
from sagacity.guardrails._cel import RESULT_VARIABLES, ConditionError, compile_condition
from sagacity.guardrails._rules import (
    GROUP_PREFIX,
    Action,
    Budget,
    Failures,
    Mode,
    Policy,
    Requires,
    Rule,
    Scope,
)

__all__ = ["GATEWAY_TABLES", "load_policy", "parse_policy", "read_policy_text"]

#: Top-level tables of the MCP gateway's policy, which may share the file.
GATEWAY_TABLES = frozenset({"upstream", "sagas", "defaults", "tools"})
_TOP = {"guardrails", "rules", "groups", "approvers"}
_GUARDRAILS = {"default"}
_RULE = {
    "id",
    "tool",
    "when",
    "amount",
    "over",
    "action",
    "approvals",
    "ttl",
    "reason",
    "mode",
    "budget",
    "requires",
    "failures",
    "approvers",
}
_FAILURES = {"max_in_row", "per"}
_BUDGET = {"limit", "window", "per"}
_REQUIRES = {"tool", "result"}
_RULE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_DECIMAL = re.compile(r"^-?\d+(?:\.\d+)?$")


def read_policy_text(path: str | Path) -> str:
    """A policy file's text; ``PolicyError`` if it cannot be read as UTF-8."""
    return read_config_text(path, "the policy", PolicyError)


def load_policy(path: str | Path) -> Policy:
    """Read and validate the policy file at ``path``."""
    return parse_policy(read_policy_text(path), source=str(path))


def parse_policy(text: str, *, source: str = "policy") -> Policy:
    """Parse and validate a policy from TOML text (the gateway's tables are left to it)."""
    data = toml_document(text, source, PolicyError)
    return _Parser(source, LineIndex(text)).policy(data, text)


class _Parser:
    def __init__(self, source: str, index: LineIndex) -> None:
        self.source = source
        self.index = index

    def fail(self, path: tuple[str, ...], message: str) -> PolicyError:
        line = self.index.line(path)
        where = f"{self.source} line {line}" if line is not None else self.source
        return PolicyError(f"{where}: {message}")

    def table(self, value: Any, path: tuple[str, ...], allowed: Iterable[str], name: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"{name} must be a table")
        allowed = set(allowed)
        for key in value:
            if key not in allowed:
                known = ", ".join(sorted(allowed))
                raise self.fail((*path, key), f"unknown key {key!r} in {name} (known here: {known})")
        return value

    def policy(self, data: dict[str, Any], text: str) -> Policy:
        self.table(data, (), _TOP | GATEWAY_TABLES, "the policy")
        settings = self.table(data.get("guardrails", {}), ("guardrails",), _GUARDRAILS, "[guardrails]")
        default = Action(
            self.choice(settings.get("default", "allow"), ("guardrails", "default"), list(Action))
        )
        raw = data.get("rules", [])
        if not isinstance(raw, list):
            raise self.fail(("rules",), "rules must be an array of [[rules]] tables")
        groups = self.groups(data.get("groups", {}))
        rules: list[Rule] = []
        seen: dict[str, int] = {}
        for number, body in enumerate(raw):
            path = ("rules", str(number))
            rule = self.rule(self.table(body, path, _RULE, "[[rules]]"), path, groups)
            if rule.id in seen:
                raise self.fail(
                    (*path, "id"), f"rule id {rule.id!r} is already used by rule {seen[rule.id] + 1}"
                )
            seen[rule.id] = number
            rules.append(rule)
        scopes = data.get("approvers", {})
        if not isinstance(scopes, dict):
            raise self.fail(("approvers",), '[approvers] must be a table: send_wire = ["group:treasury"]')
        tool_approvers = {
            tool: self.approvers(names, ("approvers", tool), groups) for tool, names in scopes.items()
        }
        return Policy(text, tuple(rules), default, self.source, groups=groups, tool_approvers=tool_approvers)

    # -- who may approve ---------------------------------------------------------------------------
    def groups(self, value: Any) -> dict[str, frozenset[str]]:
        """``[groups]``: each name an array of identities (one line each, not blank)."""
        if not isinstance(value, dict):
            raise self.fail(("groups",), 'groups must be a table: finance = ["carol@example.com", ...]')
        found: dict[str, frozenset[str]] = {}
        for name, members in value.items():
            path = ("groups", name)
            if not _RULE_ID.match(name):
                raise self.fail(path, f"a group's name must be 1-64 letters, digits or _.- , not {name!r}")
            if not isinstance(members, list) or not all(self.identity(m, path) for m in members):
                raise self.fail(path, f"group {name!r} must be an array of identities")
            found[name] = frozenset(members)
        return found

    def identity(self, value: Any, path: tuple[str, ...]) -> bool:
        if not isinstance(value, str) or not value.strip() or value != value.strip() or "\n" in value:
            raise self.fail(path, f"an approver is an identity on one line, not {value!r}")
        return True

    def approvers(
        self, value: Any, path: tuple[str, ...], groups: dict[str, frozenset[str]]
    ) -> tuple[str, ...]:
        """A non-empty array of identities and ``group:<name>`` naming a group of ``[groups]``."""
        if not isinstance(value, list) or not value:
            raise self.fail(
                path, 'approvers must be a non-empty array, e.g. ["group:finance", "erin@example.com"]'
            )
        for name in value:
            self.identity(name, path)
            group = name.removeprefix(GROUP_PREFIX)
            if group != name and group not in groups:
                known = ", ".join(sorted(groups)) or "none"
                raise self.fail(path, f"{name!r} names no group of [groups] (known: {known})")
        return tuple(value)

    # -- values ------------------------------------------------------------------------------------
    def string(self, value: Any, path: tuple[str, ...]) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"{path[-1]} must be a string, not {kind_of(value, mapping='a table')}")
        return value

    def choice(self, value: Any, path: tuple[str, ...], allowed: list[str]) -> str:
        text = self.string(value, path)
        if text not in allowed:
            words = ", ".join(repr(str(word)) for word in allowed)  # as the file spells them, not enums
            raise self.fail(path, f"{path[-1]} must be one of {words}, not {text!r}")
        return text

    def decimal(self, value: Any, path: tuple[str, ...]) -> Decimal:
        """An amount: a string like ``"50000.00"`` or an integer; never a float (it is inexact)."""
        if isinstance(value, bool | float):
            raise self.fail(
                path,
                f'{path[-1]} must be a decimal string such as "100.00" or an integer, '
                f"never a float: {value!r}",
            )
        text = str(value) if isinstance(value, int) else self.string(value, path).strip()
        if not _DECIMAL.match(text):
            raise self.fail(path, f'{path[-1]} must be a decimal such as "100.00", not {text!r}')
        try:
            return Decimal(text)
        except InvalidOperation as exc:  # pragma: no cover - the pattern admits only decimals
            raise self.fail(path, f"{path[-1]} is not a decimal: {text!r}") from exc

    def duration(self, value: Any, path: tuple[str, ...]) -> timedelta:
        seconds: float | None
        if isinstance(value, int) and not isinstance(value, bool):
            seconds = float(value)
        else:
            seconds = duration_seconds(value) if isinstance(value, str) else None
        if seconds is None or seconds <= 0:
            raise self.fail(
                path, f'{path[-1]} must be a positive duration such as "30s", "15m", "24h" or "7d"'
            )
        return timedelta(seconds=seconds)

    def condition(self, value: Any, path: tuple[str, ...], variables: tuple[str, ...] | None = None) -> Any:
        text = self.string(value, path)
        try:
            return compile_condition(text) if variables is None else compile_condition(text, variables)
        except ConditionError as exc:
            raise self.fail(path, f"{path[-1]} is not a valid CEL condition: {exc}") from exc

    # -- a rule ------------------------------------------------------------------------------------
    def rule(
        self, body: dict[str, Any], path: tuple[str, ...], groups: dict[str, frozenset[str]] | None = None
    ) -> Rule:
        if "id" not in body:
            raise self.fail(path, 'a rule needs id = "<a name for it>" (letters, digits, _ . -)')
        rule_id = self.string(body["id"], (*path, "id"))
        if not _RULE_ID.match(rule_id):
            raise self.fail((*path, "id"), f"rule id must be 1-64 letters, digits or _.- , not {rule_id!r}")
        kinds = [k for k in ("budget", "requires", "failures") if k in body]
        history = bool(kinds)
        if len(kinds) > 1:
            raise self.fail(
                (*path, kinds[1]), f"rule {rule_id!r} has both {kinds[0]} and {kinds[1]}; make two rules"
            )
        if "action" not in body and not history:
            raise self.fail(path, f'rule {rule_id!r} needs action = "allow", "hold" or "deny"')
        action = Action(self.choice(body.get("action", "deny"), (*path, "action"), list(Action)))
        if history and action is Action.ALLOW:
            raise self.fail(
                (*path, "action"),
                f"rule {rule_id!r}: a budget or requires rule holds or denies; allow decides nothing",
            )
        tools = self.tools(body["tool"], (*path, "tool")) if "tool" in body else None
        amount = None
        if "amount" in body:
            text = self.string(body["amount"], (*path, "amount"))
            if not _PATH.match(text):
                raise self.fail(
                    (*path, "amount"),
                    'amount names the argument holding the amount, e.g. "amount" or "order.total", '
                    f"not {text!r}",
                )
            amount = tuple(text.split("."))
        over = self.decimal(body["over"], (*path, "over")) if "over" in body else None
        if over is not None and amount is None:
            raise self.fail(
                (*path, "over"), f'rule {rule_id!r} has over = ... but no amount = "<argument>" to compare'
            )
        if action is not Action.HOLD:
            for key in ("approvals", "ttl", "approvers"):
                if key in body:
                    raise self.fail((*path, key), f"{key} is for a hold; rule {rule_id!r} is {action}")
        approvals = 1
        if "approvals" in body:
            value = body["approvals"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise self.fail(
                    (*path, "approvals"), f"approvals must be a whole number of at least 1, not {value!r}"
                )
            approvals = value
        return Rule(
            id=rule_id,
            action=action,
            tools=tools,
            when=self.condition(body["when"], (*path, "when")) if "when" in body else None,
            amount=amount,
            over=over,
            approvals=approvals,
            ttl=self.duration(body["ttl"], (*path, "ttl")) if "ttl" in body else None,
            reason=self.string(body.get("reason", ""), (*path, "reason")),
            mode=Mode(self.choice(body.get("mode", "enforce"), (*path, "mode"), list(Mode))),
            budget=self.budget(body["budget"], (*path, "budget")) if "budget" in body else None,
            requires=self.requires(body["requires"], (*path, "requires")) if "requires" in body else None,
            failures=self.failures(body["failures"], (*path, "failures")) if "failures" in body else None,
            line=self.index.line(path),
            approvers=(
                self.approvers(body["approvers"], (*path, "approvers"), groups or {})
                if "approvers" in body
                else None
            ),
        )

    def tools(self, value: Any, path: tuple[str, ...]) -> frozenset[str]:
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
            raise self.fail(
                path, 'tool must be a tool name or an array of them, e.g. ["refund", "send_wire"]'
            )
        return frozenset(names)

    def budget(self, value: Any, path: tuple[str, ...]) -> Budget:
        body = self.table(value, path, _BUDGET, "[rules.budget]")
        for key in ("limit", "window"):
            if key not in body:
                raise self.fail(path, f'a budget needs {key} (e.g. limit = "50000.00", window = "24h")')
        limit = self.decimal(body["limit"], (*path, "limit"))
        if limit < 0:
            raise self.fail((*path, "limit"), "limit must not be negative")
        return Budget(
            limit=limit,
            window=self.duration(body["window"], (*path, "window")),
            per=Scope(self.choice(body.get("per", "global"), (*path, "per"), list(Scope))),
        )

    def failures(self, value: Any, path: tuple[str, ...]) -> Failures:
        body = self.table(value, path, _FAILURES, "[rules.failures]")
        count = body.get("max_in_row")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise self.fail(
                (*path, "max_in_row"), f"max_in_row must be a whole number of at least 1, not {count!r}"
            )
        return Failures(count, Scope(self.choice(body.get("per", "global"), (*path, "per"), list(Scope))))

    def requires(self, value: Any, path: tuple[str, ...]) -> Requires:
        body = self.table(value, path, _REQUIRES, "[rules.requires]")
        if "tool" not in body:
            raise self.fail(path, 'requires needs tool = "<the tool that must have run first>"')
        result = (
            self.condition(body["result"], (*path, "result"), RESULT_VARIABLES) if "result" in body else None
        )
        return Requires(self.string(body["tool"], (*path, "tool")), result)
