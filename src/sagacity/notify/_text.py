"""What a message says, in words: one subject line and a plain-text body per event kind.

Shared by email and Slack (a webhook sends the event's JSON instead). An approval request's text
shows the exact payload and its SHA-256, so what the approver reads is what the gate binds to.
"""

from __future__ import annotations

from sagacity.notify._events import Event, EventKind

__all__ = ["describe", "subject"]

_TITLES = {
    EventKind.APPROVAL_REQUESTED: "Approval requested",
    EventKind.APPROVAL_REMINDER: "Reminder: approval still requested",
    EventKind.APPROVAL_ESCALATED: "Escalated: nobody decided",
    EventKind.APPROVAL_EXPIRED: "Approval request expired",
    EventKind.APPROVAL_VOIDED: "Approval request voided",
    EventKind.CALL_IN_DOUBT: "Call in doubt",
    EventKind.COMPENSATION_FAILED: "Compensation failed",
    EventKind.SAGA_ABANDONED: "Saga abandoned",
    EventKind.SWITCH_CHANGED: "Kill switch changed",
    EventKind.CHAIN_BROKEN: "Hash chain broken",
}


def subject(event: Event) -> str:
    """One line: what happened, where."""
    title = _TITLES[event.kind]
    tool = event.data.get("tool")
    where = f" in saga {event.saga_id}" if event.saga_id else ""
    return f"[sagacity] {title}: {tool}{where}" if tool else f"[sagacity] {title}{where}"


def describe(event: Event) -> str:
    """The body: the facts a person needs to act, one per line."""
    data = event.data
    lines = [subject(event).removeprefix("[sagacity] "), ""]
    if event.saga_id is not None:
        lines.append(f"saga: {event.saga_id}" + (f" (seq {event.seq})" if event.seq is not None else ""))
    labels = (
        ("tool", "tool"),
        ("input", "payload"),
        ("inputHash", "payload SHA-256"),
        ("requester", "requested by"),
        ("approvalsRequired", "approvals needed"),
        ("expiresAt", "expires"),
        ("rule", "policy rule"),
        ("amount", "amount"),
        ("reason", "reason"),
        ("kind", "what"),
        ("startedAt", "started"),
        ("summary", "setting"),
        ("detail", "detail"),
        ("action", "what to do"),
    )
    for key, label in labels:
        value = data.get(key)
        if value is not None and value != "":
            lines.append(f"{label}: {value}")
    if event.kind is EventKind.APPROVAL_ESCALATED:
        lines.append(f"undecided for {int(float(data.get('afterSeconds') or 0) // 60)} minutes or more")
    lines.append(f"event id: {event.id}")
    return "\n".join(lines)
