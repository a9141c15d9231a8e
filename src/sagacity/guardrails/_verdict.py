"""A verdict, and how it is written into the entry its call journals anyway (docs/journal.md).

No verdict costs a commit of its own: its lines go into the payload of the call's INTENT (the
call runs), AWAITING_APPROVAL (held) or the INTENT of a denied call, which is closed in the same
commit by a FAILED ``denied by policy: <reason>`` (it never ran, and it is not a failure)::

    policy=<sha256 of the policy text>
    verdict=<allow|hold|deny> rule=<id>[ approvals=<n>][ reason=<one line>]
    shadow=<allow|hold|deny> rule=<id>[ approvals=<n>][ reason=<one line>]   (each shadow rule)
    debit=<meter saga id> seq=<n> amount=<decimal>              (each meter the call took from)
    principal=<who>                                             (when known)
    agent=<which agent>                                         (when known)

``rule=default`` is the policy's default (no rule decided); ``rule=switch`` is the kill switch;
``rule=policy-error`` a policy that could not be read or evaluated (fail closed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from sagacity._journal import Rider
from sagacity._payloads import as_line, unescaped
from sagacity.guardrails._rules import Action

__all__ = ["Debit", "Denied", "RuleFinding", "Verdict", "parse_verdict"]

POLICY = "policy="
VERDICT = "verdict="
SHADOW = "shadow="
DEBIT = "debit="
PRINCIPAL = "principal="
AGENT = "agent="
#: The deciding "rule" of a call no rule decided, of the kill switch, and of a failing policy.
DEFAULT_RULE = "default"
SWITCH_RULE = "switch"
ERROR_RULE = "policy-error"
#: How the model's message about a denied call starts.
DENIED_MARK = "[DENIED] "

_FINDING = re.compile(
    r"^(?P<action>allow|hold|deny) rule=(?P<rule>\S+)(?: approvals=(?P<n>\d+))?(?: reason=(?P<reason>.*))?$"
)
_DEBIT = re.compile(r"^(?P<meter>\S+) seq=(?P<seq>\d+) amount=(?P<amount>-?\d+(?:\.\d+)?)$")


@dataclass(frozen=True, slots=True)
class RuleFinding:
    """What one rule decided (or, in shadow mode, would have decided)."""

    rule: str
    action: Action
    reason: str = ""
    approvals: int = 1
    ttl: timedelta | None = None
    _text: str = field(default="", repr=False, compare=False)  # line() without its key, made once

    def line(self, key: str) -> str:
        if not self._text:
            approvals = f" approvals={self.approvals}" if self.action is Action.HOLD else ""
            reason = f" reason={as_line(self.reason)}" if self.reason else ""
            object.__setattr__(self, "_text", f"{self.action} rule={self.rule}{approvals}{reason}")
        return key + self._text


@dataclass(frozen=True, slots=True)
class Debit:
    """An amount a call took from a meter: the meter's debit entry is ``meter`` at ``seq``."""

    meter: str
    seq: int
    amount: Decimal

    def line(self) -> str:
        return f"{DEBIT}{self.meter} seq={self.seq} amount={self.amount}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The policy's decision on one call, with what it rests on."""

    decision: RuleFinding
    policy: str  # the policy text's SHA-256
    shadow: tuple[RuleFinding, ...] = ()
    debits: tuple[Debit, ...] = ()
    principal: str | None = None
    agent: str | None = None
    #: True when the kill switch halts: the call is refused and the saga compensates.
    halts: bool = False
    #: True when a rule in force allowed the call explicitly (an IRREVERSIBLE tool runs unattended).
    explicit: bool = False
    lines: str = field(default="", compare=False)
    #: The planned debits' rows (``Guard.judge(with_intent=True)``), to insert with the INTENT.
    riders: tuple[Rider, ...] = field(default=(), compare=False)
    #: Each rider's slice width and the meter's sums after it (``Planned.sums``), in order.
    sums: tuple[tuple[int, dict[int, Decimal]], ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        lines = f"{POLICY}{self.policy}\n{self.decision.line(VERDICT)}"
        if self.shadow or self.debits:
            lines = "\n".join(
                [lines, *(f.line(SHADOW) for f in self.shadow), *(d.line() for d in self.debits)]
            )
        if self.principal is not None:
            lines += f"\n{PRINCIPAL}{as_line(self.principal)}"
        if self.agent is not None:
            lines += f"\n{AGENT}{as_line(self.agent)}"
        object.__setattr__(self, "lines", lines)

    @property
    def action(self) -> Action:
        return self.decision.action

    @property
    def rule(self) -> str:
        return self.decision.rule

    @property
    def reason(self) -> str:
        return self.decision.reason

    def model_message(self, tool: str) -> Denied:
        """What the call returns instead of a result when it is denied (see :class:`Denied`)."""
        return Denied(tool, self.rule, self.reason, self.policy)


class Denied(str):
    """What a call the policy denied returns: the text the model reads (it is a ``str``, so an
    agent framework hands it on as the call's answer), and for the program the verdict's parts,
    so that it tests ``isinstance(value, Denied)`` instead of parsing text."""

    __slots__ = ("policy", "reason", "rule", "tool")
    tool: str
    rule: str
    reason: str
    policy: str  # the SHA-256 of the policy text that denied it

    def __new__(cls, tool: str, rule: str, reason: str, policy: str) -> Denied:
        text = (
            f"{DENIED_MARK}{tool} did not run: the policy denied it (rule {rule}): "
            f"{reason or 'no reason given'}. Do not retry it; tell the user."
        )
        made = super().__new__(cls, text)
        made.tool, made.rule, made.reason, made.policy = tool, rule, reason, policy
        return made

    def __reduce__(self) -> tuple[type[Denied], tuple[str, str, str, str]]:
        return (Denied, (self.tool, self.rule, self.reason, self.policy))


@dataclass(frozen=True, slots=True)
class JournaledVerdict:
    """A verdict as read back from an entry's payload."""

    policy: str
    decision: RuleFinding
    shadow: tuple[RuleFinding, ...]
    debits: tuple[Debit, ...]
    principal: str | None
    agent: str | None


def _finding(text: str) -> RuleFinding | None:
    match = _FINDING.match(text)
    if match is None:
        return None
    return RuleFinding(
        match.group("rule"),
        Action(match.group("action")),
        unescaped(match.group("reason") or ""),
        int(match.group("n") or 1),
    )


def parse_verdict(payload: str) -> JournaledVerdict | None:
    """The verdict in an entry's payload, or None when it carries none."""
    if VERDICT not in payload:
        return None
    policy, decision, principal, agent = "", None, None, None
    shadow: list[RuleFinding] = []
    debits: list[Debit] = []
    for line in payload.split("\n"):
        if line.startswith(POLICY):
            policy = line[len(POLICY) :]
        elif line.startswith(VERDICT):
            decision = _finding(line[len(VERDICT) :])
        elif line.startswith(SHADOW):
            found = _finding(line[len(SHADOW) :])
            if found is not None:
                shadow.append(found)
        elif line.startswith(DEBIT):
            match = _DEBIT.match(line[len(DEBIT) :])
            if match is not None:
                debits.append(
                    Debit(match.group("meter"), int(match.group("seq")), Decimal(match.group("amount")))
                )
        elif line.startswith(PRINCIPAL):
            principal = unescaped(line[len(PRINCIPAL) :])
        elif line.startswith(AGENT):
            agent = unescaped(line[len(AGENT) :])
    if decision is None:
        return None
    return JournaledVerdict(policy, decision, tuple(shadow), tuple(debits), principal, agent)
