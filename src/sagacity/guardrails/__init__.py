"""Guardrails: a policy over every tool call — argument rules, budgets, sequencing, a kill switch.

Open a ``Sagacity`` with ``policy=`` (a TOML file, re-read when it changes, or a
:class:`Policy`: ``parse_policy(text)``, or rules built in Python with :func:`build_policy` and
:func:`allow`, :func:`hold`, :func:`deny`, :func:`budget`, :func:`requires`, :func:`failures`)
and every call that enters a saga is judged first; the verdict (rule, decision, the policy
text's SHA-256) is journaled in the entry the call writes anyway. See docs/policies.md for the
format, the journal lines, shadow mode and how an auditor re-derives a verdict from an export.
"""

from __future__ import annotations

from sagacity.errors import HaltedError, PolicyError
from sagacity.guardrails._acting import as_agent, current_agent
from sagacity.guardrails._build import allow, budget, build_policy, deny, failures, hold, requires
from sagacity.guardrails._evaluate import decide
from sagacity.guardrails._guard import POLICY_SAGA, Guard, file_stamp
from sagacity.guardrails._meter import METER_PREFIX
from sagacity.guardrails._names import unknown_tools
from sagacity.guardrails._parse import GATEWAY_TABLES, load_policy, parse_policy, read_policy_text
from sagacity.guardrails._rules import Action, Budget, Mode, Policy, Requires, Rule, Scope
from sagacity.guardrails._switch import SWITCH_SAGA, KillSwitch, Setting, SwitchState
from sagacity.guardrails._verdict import DENIED_MARK, Debit, Denied, RuleFinding, Verdict, parse_verdict

#: The old name of :class:`RuleFinding`, kept as an alias (``sagacity.Finding`` is the doctor's).
Finding = RuleFinding

__all__ = [
    "DENIED_MARK",
    "GATEWAY_TABLES",
    "METER_PREFIX",
    "POLICY_SAGA",
    "SWITCH_SAGA",
    "Action",
    "Budget",
    "Debit",
    "Denied",
    "Finding",
    "Guard",
    "HaltedError",
    "KillSwitch",
    "Mode",
    "Policy",
    "PolicyError",
    "Requires",
    "Rule",
    "RuleFinding",
    "Scope",
    "Setting",
    "SwitchState",
    "Verdict",
    "allow",
    "as_agent",
    "budget",
    "build_policy",
    "current_agent",
    "decide",
    "deny",
    "failures",
    "file_stamp",
    "hold",
    "load_policy",
    "parse_policy",
    "parse_verdict",
    "read_policy_text",
    "requires",
    "unknown_tools",
]
