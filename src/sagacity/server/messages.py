"""What the server needs to take a decision from an approval message: the secret that signs email
links, Slack's signing secret and the table of Slack users who may decide (docs/approvals-from-messages.md).

Nothing here is journaled: the secrets stay in the server's configuration, and a Slack user id
becomes an approver identity only through the table, never from what a request says.

From the environment (``sagacity serve``)::

    SAGACITY_LINK_SECRET            the email links' signing secret (32 bytes or more)
    SAGACITY_SLACK_SIGNING_SECRET   the Slack app's signing secret
    SAGACITY_SLACK_USERS_FILE       a JSON or TOML file: {"U0123ABCD": "alice@example.com", ...}
    SAGACITY_SLACK_USERS            the same table as JSON
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagacity.checks import require_identity
from sagacity.errors import ConfigurationError, InvalidValueError
from sagacity.links import LINK_SECRET_ENV, link_key

__all__ = [
    "LINK_SECRET_ENV",
    "SLACK_SECRET_ENV",
    "SLACK_USERS_ENV",
    "SLACK_USERS_FILE_ENV",
    "Messages",
    "messages_from_environment",
    "slack_users",
]

SLACK_SECRET_ENV = "SAGACITY_SLACK_SIGNING_SECRET"
SLACK_USERS_ENV = "SAGACITY_SLACK_USERS"
SLACK_USERS_FILE_ENV = "SAGACITY_SLACK_USERS_FILE"


@dataclass(frozen=True)
class Messages:
    """The channels a decision may come from besides the API and the dashboard.

    ``link_secret`` turns on the email link pages (``/links/email``); ``slack_signing_secret``
    the Slack callback (``/slack/actions``), with ``slack_users`` mapping a Slack user id to the
    approver identity journaled for that person's clicks (a user not in it decides nothing).
    """

    link_secret: str | bytes | None = field(default=None, repr=False)
    slack_signing_secret: str | None = field(default=None, repr=False)
    slack_users: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.link_secret is not None:
            link_key(self.link_secret)  # too short: refused now, not at the first click
        if self.slack_signing_secret is not None and not self.slack_signing_secret.strip():
            raise ConfigurationError("the Slack signing secret is empty")
        object.__setattr__(self, "slack_users", slack_users(self.slack_users, "slack_users"))


def slack_users(table: Any, source: str) -> dict[str, str]:
    """A checked table of Slack user id -> approver identity; ``ConfigurationError`` naming the
    bad entry."""
    if not isinstance(table, Mapping):
        raise ConfigurationError(f"{source}: the Slack users must be a table of user id -> identity")
    found: dict[str, str] = {}
    for user, identity in table.items():
        if not isinstance(user, str) or not user.strip():
            raise ConfigurationError(f"{source}: a Slack user id must be a non-empty string, not {user!r}")
        if not isinstance(identity, str):
            raise ConfigurationError(f"{source}: Slack user {user!r} must map to an identity string")
        try:
            found[user] = require_identity(identity)
        except InvalidValueError as exc:
            raise ConfigurationError(f"{source}: Slack user {user!r}: {exc}") from exc
    return found


def _users_file(path: str) -> dict[str, str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
        table = tomllib.loads(text) if path.endswith(".toml") else json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the Slack users file {path}: {exc}") from exc
    return slack_users(table, path)


def messages_from_environment(environ: Mapping[str, str] | None = None) -> Messages | None:
    """The settings the environment gives (None when it gives none)."""
    env = os.environ if environ is None else environ
    link = env.get(LINK_SECRET_ENV) or None
    slack = env.get(SLACK_SECRET_ENV) or None
    users: dict[str, str] = {}
    if env.get(SLACK_USERS_FILE_ENV):
        users = _users_file(env[SLACK_USERS_FILE_ENV])
    elif env.get(SLACK_USERS_ENV):
        try:
            users = slack_users(json.loads(env[SLACK_USERS_ENV]), SLACK_USERS_ENV)
        except ValueError as exc:
            raise ConfigurationError(f"{SLACK_USERS_ENV} is not JSON: {exc}") from exc
    if link is None and slack is None:
        return None
    return Messages(link_secret=link, slack_signing_secret=slack, slack_users=users)
