"""Notifications from the journal: the right people told at once, none lost, none twice.

Approval requests (with reminders before expiry and escalation when nobody decides), expired or
voided requests, calls in doubt, failed compensations, abandoned sagas, kill-switch changes and
broken chains are read off the journal and delivered through a durable outbox (the reserved
saga ``sagacity:notify``) to signed webhooks, email and Slack, as a TOML file routes them.
docs/notifications.md says how to set it up; ``sagacity notify run`` runs it::

    from sagacity.notify import Notifier, load_notify_config

    with Notifier(sg, load_notify_config("notify.toml")) as notifier:
        notifier.run()
"""

from __future__ import annotations

from sagacity.notify._channels import DeliveryError, approval_buttons, send
from sagacity.notify._config import (
    Channel,
    Escalation,
    NotifyConfig,
    Route,
    Target,
    load_notify_config,
    parse_notify_config,
)
from sagacity.notify._events import Event, EventKind, event_id
from sagacity.notify._notifier import Notifier, Round, outbox_status, requeue_dead_letters, retry_delay
from sagacity.notify._outbox import OUTBOX_SAGA, Delivery, OutboxStatus
from sagacity.notify._routing import targets

__all__ = [
    "OUTBOX_SAGA",
    "Channel",
    "Delivery",
    "DeliveryError",
    "Escalation",
    "Event",
    "EventKind",
    "Notifier",
    "NotifyConfig",
    "OutboxStatus",
    "Round",
    "Route",
    "Target",
    "approval_buttons",
    "event_id",
    "load_notify_config",
    "outbox_status",
    "parse_notify_config",
    "requeue_dead_letters",
    "retry_delay",
    "send",
    "targets",
]
