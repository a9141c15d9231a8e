"""Who is told: the targets of an event under the file's routes (pure: no I/O).

Every route whose conditions hold adds its groups; a target named by several routes is told
once. An escalation goes only to the groups of the routes' steps with that delay, whatever the
routes' ``events`` say (a route that tells finance about requests escalates them too).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from sagacity.notify._config import NotifyConfig, Route, Target
from sagacity.notify._events import Event, EventKind

__all__ = ["amount_of", "route_matches", "targets"]


def amount_of(value: object) -> Decimal | None:
    """A call's amount as a decimal (a JSON number or a decimal string), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        return None
    return amount if amount.is_finite() else None


def route_matches(route: Route, event: Event, teams: dict[str, str] | None = None) -> bool:
    """Whether every condition the route gives holds for the event (``events`` aside)."""
    data = event.data
    if route.tools is not None and data.get("tool") not in route.tools:
        return False
    if route.rules is not None and data.get("rule") not in route.rules:
        return False
    if route.teams is not None:
        requester = data.get("requester")
        if not isinstance(requester, str) or (teams or {}).get(requester) not in route.teams:
            return False
    if route.prefix is not None and not (event.saga_id or "").startswith(route.prefix):
        return False
    if route.min_amount is not None or route.max_amount is not None:
        amount = amount_of(data.get("amount"))
        if amount is None:
            return False
        if route.min_amount is not None and amount < route.min_amount:
            return False
        if route.max_amount is not None and amount > route.max_amount:
            return False
    return True


def targets(event: Event, config: NotifyConfig) -> list[Target]:
    """The distinct targets the event goes to, in the order the routes name them."""
    found: dict[str, Target] = {}
    teams = dict(config.teams)
    for route in config.routes:
        if not route_matches(route, event, teams):
            continue
        if event.kind is EventKind.APPROVAL_ESCALATED:
            after = event.data.get("afterSeconds")
            groups = [
                g for step in route.escalate if step.after.total_seconds() == after for g in step.notify
            ]
        elif route.events is None or event.kind in route.events:
            groups = list(route.notify)
        else:
            continue
        for group in groups:
            for target in config.groups[group]:
                found.setdefault(target.key, target)
    return list(found.values())
