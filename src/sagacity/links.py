"""The formats of approval messages, for those who send their own: the signed email link and the
Slack buttons (docs/approvals-from-messages.md). The server reads both back; ``_links`` has them."""

from __future__ import annotations

from sagacity._links import (
    APPROVE_ACTION_ID,
    EMAIL_LINK_PATH,
    LINK_SECRET_ENV,
    REJECT_ACTION_ID,
    EmailToken,
    SlackAction,
    email_link,
    email_token,
    link_key,
    parse_slack_action,
    read_email_token,
    slack_buttons,
    slack_value,
)

__all__ = [
    "APPROVE_ACTION_ID",
    "EMAIL_LINK_PATH",
    "LINK_SECRET_ENV",
    "REJECT_ACTION_ID",
    "EmailToken",
    "SlackAction",
    "email_link",
    "email_token",
    "link_key",
    "parse_slack_action",
    "read_email_token",
    "slack_buttons",
    "slack_value",
]
