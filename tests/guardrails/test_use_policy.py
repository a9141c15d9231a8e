"""``Sagacity.guard`` and ``Sagacity.use_policy``: a policy put in force by its owner (the MCP
gateway reloading its file), on a Sagacity opened with one or without."""

from __future__ import annotations

from sagacity import Phase, Sagacity, tool
from sagacity.guardrails import POLICY_SAGA, parse_policy

DENY_LOOKUPS = """\
[[rules]]
id = "no-lookups"
tool = "lookup"
action = "deny"
reason = "lookups are off"
"""

ALLOW_ALL = """\
[guardrails]
default = "allow"
"""


def _lookup() -> object:
    @tool
    def lookup(order: str) -> str:
        return f"order {order}"

    return lookup


def test_a_sagacity_without_a_policy_gets_a_guard_from_use_policy(store_url: str) -> None:
    """No ``policy=``: no guard, calls run; ``use_policy`` makes the guard, journals the policy
    and judges every call from then on, honouring the Sagacity's kill switch."""
    lookup = _lookup()
    with Sagacity(store_url) as sg:
        assert sg.guard is None
        assert sg.run("before", lambda: lookup("1")).value == "order 1"  # type: ignore[operator]

        guard = sg.use_policy(parse_policy(DENY_LOOKUPS))
        assert sg.guard is guard
        assert guard.switch is sg.kill_switch
        denied = sg.run("after", lambda: lookup("2"))  # type: ignore[operator]
        assert "lookups are off" in str(denied.value)
        phases = [e.phase for e in sg.entries("after") if e.tool_name == "lookup"]
        assert phases == [Phase.INTENT, Phase.FAILED]
        assert any("no-lookups" in e.input for e in sg.entries(POLICY_SAGA))


def test_use_policy_replaces_the_policy_of_the_guard_in_force(store_url: str) -> None:
    """With a guard already there, ``use_policy`` keeps it and puts the new rules in force."""
    lookup = _lookup()
    with Sagacity(store_url, policy=parse_policy(DENY_LOOKUPS)) as sg:
        guard = sg.guard
        assert guard is not None
        assert sg.use_policy(parse_policy(ALLOW_ALL)) is guard
        assert sg.run("allowed", lambda: lookup("3")).value == "order 3"  # type: ignore[operator]
