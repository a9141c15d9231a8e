"""Tool names a policy's rules give that no known tool has: a typo there switches a rule off.

A rule applies only to the tools it names, so a misspelt name makes it match nothing, silently
(and a ``requires`` naming a tool that never runs refuses every call). The names are checked
against the tools known where the policy is loaded — the process's registry, the MCP gateway's
upstream listing, the modules ``sagacity policy check --import`` imported — and each one unknown
is reported with its rule's line, the closest known name and the known names.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from sagacity.guardrails._rules import Policy

__all__ = ["unknown_tools"]

_SHOWN = 20  # known names listed in a message at most


def unknown_tools(policy: Policy, known: Iterable[str]) -> list[str]:
    """One message per tool name a rule gives (in ``tool`` or ``requires``) that is not ``known``."""
    names = sorted(set(known))
    listed = ", ".join(names[:_SHOWN]) + (f", ... ({len(names)} in all)" if len(names) > _SHOWN else "")
    messages = []
    for rule in policy.rules:
        named = sorted(rule.tools or ())
        if rule.requires is not None:
            named.append(rule.requires.tool)
        for name in named:
            if name in names:
                continue
            where = f"{policy.source} line {rule.line}" if rule.line is not None else policy.source
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            messages.append(
                f"{where}: rule {rule.id!r} names tool {name!r}, which no known tool is called, so the "
                f"rule never applies to it{hint} (known: {listed or 'none'})"
            )
    return messages
