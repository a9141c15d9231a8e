"""Pure evaluation: which rules apply to a call, what each decides, and which decision wins.

Nothing here reads or writes the journal: :mod:`sagacity.guardrails._guard` feeds in what the
history rules found (the saga's journal, the meters) and journals the verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from sagacity.guardrails._cel import ConditionError
from sagacity.guardrails._rules import Action, Mode, Policy, Rule
from sagacity.guardrails._verdict import DEFAULT_RULE, RuleFinding

__all__ = ["CallFacts", "Judgement", "judge_arguments", "strictest"]

_UNSET: Any = object()


@dataclass(slots=True)
class CallFacts:
    """What a rule may look at: the call, its saga, who made it."""

    tool: str
    input: str
    saga_id: str
    principal: str | None = None
    agent: str | None = None
    _args: Any = _UNSET
    _exact: Any = _UNSET

    def args(self) -> dict[str, Any]:
        if self._args is _UNSET:
            try:
                value = json.loads(self.input) if self.input else {}
            except ValueError as exc:
                raise ConditionError(f"the call's input is not JSON: {exc}") from exc
            self._args = value if isinstance(value, dict) else {"value": value}
        return self._args  # type: ignore[no-any-return]

    def key(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """What the variables ``names`` hold, as text (the arguments as their JSON text)."""
        return tuple(self.input if name == "args" else self._variable(name) for name in names)

    def data(self, names: tuple[str, ...]) -> dict[str, Any]:
        """The CEL variables ``names`` of a call's condition."""
        return {name: self._variable(name) for name in names}

    def _variable(self, name: str) -> Any:
        if name == "args":
            return self.args()
        if name == "tool":
            return self.tool
        if name == "saga":
            return self.saga_id
        return (self.principal if name == "principal" else self.agent) or ""

    def amount(self, path: tuple[str, ...]) -> Decimal:
        """The decimal at ``path`` in the arguments, read from the JSON text exactly (never a float)."""
        if self._exact is _UNSET:
            try:
                self._exact = json.loads(self.input or "{}", parse_float=Decimal)
            except ValueError as exc:
                raise ConditionError(f"the call's input is not JSON: {exc}") from exc
        value: Any = self._exact
        for part in path:
            if not isinstance(value, dict) or part not in value:
                raise ConditionError(f"the call has no argument {'.'.join(path)!r} holding its amount")
            value = value[part]
        if isinstance(value, bool) or not isinstance(value, int | Decimal | str):
            raise ConditionError(f"argument {'.'.join(path)!r} is not an amount: {value!r}")
        try:
            amount = Decimal(value)
        except InvalidOperation as exc:
            raise ConditionError(f"argument {'.'.join(path)!r} is not a decimal amount: {value!r}") from exc
        if not amount.is_finite():
            raise ConditionError(f"argument {'.'.join(path)!r} is not a finite amount: {value!r}")
        return amount


@dataclass(slots=True)
class Judgement:
    """The argument rules' findings, and the history rules still to be checked."""

    enforced: list[RuleFinding] = field(default_factory=list)
    shadow: list[RuleFinding] = field(default_factory=list)
    allowed_by: RuleFinding | None = None  # the first rule in force that allowed the call explicitly
    history: list[Rule] = field(default_factory=list)

    def add(self, rule: Rule, finding: RuleFinding) -> None:
        if rule.mode is Mode.SHADOW:
            self.shadow.append(finding)
        elif finding.action is Action.ALLOW:
            if self.allowed_by is None:
                self.allowed_by = finding
        else:
            self.enforced.append(finding)


def finding_of(rule: Rule, reason: str = "") -> RuleFinding:
    return RuleFinding(rule.id, rule.action, reason or rule.reason, rule.approvals, rule.ttl)


def static_finding(policy: Policy, rule: Rule) -> RuleFinding:
    """:func:`finding_of` the rule with its own reason, made once per policy (rule findings are frozen)."""
    found: RuleFinding | None = policy._findings.get(rule.id)
    if found is None:
        found = policy._findings[rule.id] = finding_of(rule)
    return found


def failed(rule: Rule, error: Exception) -> RuleFinding:
    """A rule that could not be evaluated denies (fail closed), saying why."""
    return RuleFinding(
        rule.id, Action.DENY, f"rule {rule.id} could not be evaluated ({error}); denied (fail closed)"
    )


def applies(rule: Rule, facts: CallFacts, when: bool | ConditionError | None = None) -> bool:
    """Whether the rule's filter (``when``, ``amount`` over ``over``) matches; may raise
    ConditionError. ``when``: the condition's value if already evaluated (``Policy.bundle_for``)."""
    if rule.when is not None:
        if when is None:
            when = rule.when.holds(facts.data(rule.when.names))
        if isinstance(when, ConditionError):
            raise when
        if not when:
            return False
    if rule.over is not None:
        assert rule.amount is not None
        return facts.amount(rule.amount) > rule.over
    return True


def judge_arguments(policy: Policy, facts: CallFacts) -> Judgement:
    """Evaluate every rule for the call's tool; history rules that apply are left in ``history``."""
    judgement = Judgement()
    bundle = policy.bundle_for(facts.tool)
    values = iter(bundle.evaluate(facts.key, facts.data) if bundle is not None else ())
    for rule in policy.rules_for(facts.tool):
        when = next(values) if rule.when is not None else None
        try:
            if not applies(rule, facts, when):
                continue
        except ConditionError as exc:
            judgement.add(rule, failed(rule, exc))
            continue
        if rule.history:
            judgement.history.append(rule)
        else:
            judgement.add(rule, static_finding(policy, rule))
    return judgement


def strictest(findings: list[RuleFinding]) -> RuleFinding | None:
    """Deny before hold before allow; among holds the most approvals and the shortest time-to-live;
    among equals the first in file order."""
    denied = [f for f in findings if f.action is Action.DENY]
    if denied:
        return denied[0]
    held = [f for f in findings if f.action is Action.HOLD]
    if not held:
        return None
    most = max(held, key=lambda f: f.approvals)
    ttls = [f.ttl for f in held if f.ttl is not None]
    ttl = min(ttls) if ttls else None
    return RuleFinding(most.rule, Action.HOLD, most.reason, most.approvals, ttl)


def default_finding(policy: Policy) -> RuleFinding:
    found: RuleFinding | None = policy._findings.get("")  # "" is no rule's id
    if found is None:
        found = policy._findings[""] = RuleFinding(DEFAULT_RULE, policy.default)
    return found


def decide(
    policy: Policy,
    tool: str,
    input: str,
    *,
    principal: str | None = None,
    agent: str | None = None,
    saga_id: str = "",
    irreversible: bool = False,
) -> RuleFinding:
    """What the policy's argument rules decide on a call, from nothing but the call: pure, so that
    an auditor can re-derive a journaled verdict from an export (history rules are not run: their
    evidence is in the meters' chains and the saga's own journal)."""
    facts = CallFacts(tool, input, saga_id, principal, agent)
    judgement = judge_arguments(policy, facts)
    decided = strictest(judgement.enforced)
    if decided is not None:
        return decided
    if irreversible and judgement.allowed_by is None:
        return RuleFinding(
            DEFAULT_RULE, Action.HOLD, f"{tool} is irreversible and no rule allows it unattended"
        )
    return judgement.allowed_by or default_finding(policy)
