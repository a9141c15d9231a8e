"""What a guardrails policy says: its rules, each one a condition on a call and what to do then.

A rule applies to a call when its tool matches, its ``when`` condition holds and (with ``over``)
the call's amount is above the threshold. What it does then depends on its kind:

* an argument rule decides at once: ``allow``, ``hold`` (for ``approvals`` named humans, with
  ``reason`` shown to them and a time-to-live) or ``deny`` (``reason`` is what the model is told);
* a ``budget`` rule decides only when the call would take its meter (a count, or a sum of
  amounts, over a sliding window, per tool, principal, agent or for everyone) over the limit;
* a ``requires`` rule decides only when no call of the required tool executed, and was not
  compensated, earlier in the saga (optionally: whose result satisfies a condition);
* a ``failures`` rule decides only when the tool's last ``max_in_row`` outcomes (across sagas,
  per tool, principal, agent or for everyone) were all failures: a circuit breaker.

In ``shadow`` mode a rule is evaluated and what it would have decided is journaled; it never
holds or denies anything. Among the rules in force that decide, the strictest wins (deny, then
hold with the most approvals, then allow); see docs/policies.md.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any

from sagacity.guardrails._cel import Bundle, Condition

#: How an approvers list names a group of ``[groups]``.
GROUP_PREFIX = "group:"

__all__ = ["GROUP_PREFIX", "Action", "Budget", "Failures", "Mode", "Policy", "Requires", "Rule", "Scope"]


class Action(StrEnum):
    """What a rule does with a call it decides."""

    ALLOW = "allow"
    HOLD = "hold"
    DENY = "deny"


class Mode(StrEnum):
    ENFORCE = "enforce"  # the rule's decision counts
    SHADOW = "shadow"  # evaluated and journaled, never blocks


class Scope(StrEnum):
    """Whose calls a budget's meter counts together."""

    GLOBAL = "global"
    TOOL = "tool"
    PRINCIPAL = "principal"
    AGENT = "agent"


@dataclass(frozen=True, slots=True)
class Budget:
    """At most ``limit`` (a count of calls, or with the rule's ``amount`` a sum) per ``window``."""

    limit: Decimal
    window: timedelta
    per: Scope = Scope.GLOBAL


@dataclass(frozen=True, slots=True)
class Failures:
    """Not more than ``max_in_row`` failures of the tool in a row (per ``per``), across sagas."""

    max_in_row: int
    per: Scope = Scope.GLOBAL


@dataclass(frozen=True, slots=True)
class Requires:
    """A call of ``tool`` executed and not compensated earlier in this saga (and ``result`` holds)."""

    tool: str
    result: Condition | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    """One ``[[rules]]`` table."""

    id: str
    action: Action
    tools: frozenset[str] | None = None  # None: every tool
    when: Condition | None = None
    amount: tuple[str, ...] | None = None  # the argument's path holding the call's amount
    over: Decimal | None = None
    approvals: int = 1
    ttl: timedelta | None = None
    reason: str = ""
    mode: Mode = Mode.ENFORCE
    budget: Budget | None = None
    requires: Requires | None = None
    failures: Failures | None = None
    line: int | None = None
    #: Who may decide the gates this hold rule makes (identities and ``group:<name>``); None: anyone
    #: with the approver role, unless ``[approvers]`` names some for the tool.
    approvers: tuple[str, ...] | None = None

    @property
    def history(self) -> bool:
        """Whether the rule reads history (a meter or the saga's journal), not only the call."""
        return self.budget is not None or self.requires is not None or self.failures is not None

    def describe(self) -> str:
        return self.reason or f"rule {self.id} ({self.action})"


@dataclass(frozen=True, slots=True)
class Policy:
    """A parsed policy: its rules in file order, the text they came from and its SHA-256.

    The hash is what every verdict journals, so an auditor can tell which text decided.
    """

    text: str
    rules: tuple[Rule, ...]
    default: Action = Action.ALLOW
    source: str = "policy"
    sha256: str = ""
    _by_tool: dict[str, tuple[Rule, ...]] = field(default_factory=dict, repr=False, compare=False)
    _streaks: dict[str, tuple[Rule, ...]] = field(default_factory=dict, repr=False, compare=False)
    _bundles: dict[str, Bundle | None] = field(default_factory=dict, repr=False, compare=False)
    #: Each argument rule's finding (and the default's, under ""), made once: a call that a rule
    #: decides reuses it, and its journal line (``_evaluate.static_finding``).
    _findings: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: ``[groups]``: a group's name -> its members' identities.
    groups: dict[str, frozenset[str]] = field(default_factory=dict, compare=False)
    #: ``[approvers]``: a tool's name -> who may decide its gates (when no hold rule names anyone).
    tool_approvers: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha256", hashlib.sha256(self.text.encode("utf-8")).hexdigest())

    def approvers_for(self, tool: str, rule: str | None) -> tuple[str, ...] | None:
        """Who may decide a gate of ``tool`` held by ``rule`` (the hold rule's ``approvers``, else
        the tool's in ``[approvers]``), as written; None: the policy names no one."""
        found = next((r for r in self.rules if r.id == rule), None) if rule is not None else None
        if found is not None and found.approvers is not None:
            return found.approvers
        return self.tool_approvers.get(tool)

    def members(self, names: tuple[str, ...]) -> frozenset[str]:
        """The identities ``names`` stand for (each ``group:<name>`` expanded)."""
        found: set[str] = set()
        for name in names:
            group = name.removeprefix(GROUP_PREFIX)
            found |= self.groups.get(group, frozenset()) if group != name else {name}
        return frozenset(found)

    def rules_for(self, tool: str) -> tuple[Rule, ...]:
        """The rules that may apply to calls of ``tool``, in file order (cached per tool)."""
        found = self._by_tool.get(tool)
        if found is None:
            found = self._by_tool[tool] = tuple(r for r in self.rules if r.tools is None or tool in r.tools)
        return found

    def bundle_for(self, tool: str) -> Bundle | None:
        """The ``when`` conditions of ``tool``'s rules compiled into one (None: there are none)."""
        if tool not in self._bundles:
            conditions = tuple(r.when for r in self.rules_for(tool) if r.when is not None)
            self._bundles[tool] = Bundle(conditions) if conditions else None
        return self._bundles[tool]

    def streak_rules(self, tool: str) -> tuple[Rule, ...]:
        """The ``failures`` rules counting ``tool``'s outcomes (cached per tool)."""
        found = self._streaks.get(tool)
        if found is None:
            found = self._streaks[tool] = tuple(r for r in self.rules_for(tool) if r.failures is not None)
        return found
