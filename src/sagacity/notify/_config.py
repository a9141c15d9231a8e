"""The notifier's file (TOML): its timings, its channels, who is in which group, and the routes.

Parsing is strict and happens once, at start-up, naming the line of a problem: an unknown key (a
typo must not silently tell nobody), a wrong type, a group naming a channel that does not exist,
a secret written into the file. Secrets are environment references only (``"${NAME}"``): the
file may be committed and shown, and nothing secret ever reaches the journal. See
docs/notifications.md for the format.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from sagacity.checks import LineIndex, duration_seconds, kind_of, read_config_text, toml_document
from sagacity.errors import ConfigurationError
from sagacity.notify._events import EventKind

__all__ = [
    "Channel",
    "Escalation",
    "NotifyConfig",
    "Route",
    "Target",
    "load_notify_config",
    "parse_notify_config",
]

CHANNEL_TYPES = ("webhook", "email", "slack")
SECURITY = ("starttls", "tls", "none")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_KEYS = {"secret", "password", "token", "link_secret"}
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

_TOP = {"notifier", "teams", "channels", "groups", "routes"}
_NOTIFIER = {
    "poll",
    "scan",
    "in_doubt_after",
    "remind_before",
    "max_attempts",
    "backoff",
    "max_backoff",
    "claim_timeout",
    "send_timeout",
    "amount_field",
    "link_base",
    "link_secret",
    "link_ttl",
}
_CHANNEL = {
    "webhook": {"type", "url", "secret"},
    "email": {"type", "host", "port", "security", "username", "password", "from", "ca_file"},
    "slack": {"type", "token", "channel", "base_url"},
}
_ROUTE = {"events", "tools", "rules", "teams", "prefix", "min_amount", "max_amount", "notify", "escalate"}
_ESCALATE = {"after", "notify"}


@dataclass(frozen=True, slots=True)
class Channel:
    """One way of telling someone: its name, its type, and its settings (secrets resolved)."""

    name: str
    type: str
    settings: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Target:
    """A channel, and for email (or a Slack channel other than the channel's own) to whom."""

    channel: str
    recipient: str | None = None

    @property
    def key(self) -> str:
        return self.channel if self.recipient is None else f"{self.channel}:{self.recipient}"


@dataclass(frozen=True, slots=True)
class Escalation:
    """After ``after`` with nobody deciding, the groups ``notify`` are told too."""

    after: timedelta
    notify: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Route:
    """Who is told about which events: every condition given must hold (none given: all)."""

    notify: tuple[str, ...]
    events: frozenset[EventKind] | None = None
    tools: frozenset[str] | None = None
    rules: frozenset[str] | None = None
    teams: frozenset[str] | None = None
    prefix: str | None = None
    min_amount: Decimal | None = None
    max_amount: Decimal | None = None
    escalate: tuple[Escalation, ...] = ()


@dataclass(frozen=True, slots=True)
class NotifyConfig:
    """The whole file, checked."""

    source: str
    channels: Mapping[str, Channel]
    groups: Mapping[str, tuple[Target, ...]]
    routes: tuple[Route, ...]
    teams: Mapping[str, str] = field(default_factory=dict)
    poll: timedelta = timedelta(seconds=0.5)
    scan: timedelta = timedelta(seconds=15)
    in_doubt_after: timedelta = timedelta(minutes=5)
    remind_before: timedelta | None = None
    max_attempts: int = 8
    backoff: timedelta = timedelta(seconds=2)
    max_backoff: timedelta = timedelta(minutes=10)
    claim_timeout: timedelta = timedelta(minutes=5)
    send_timeout: timedelta = timedelta(seconds=10)
    amount_field: str = "amount"
    link_base: str | None = None
    link_secret: str | None = None
    link_ttl: timedelta = timedelta(hours=24)

    def escalation_steps(self) -> list[timedelta]:
        """Every distinct escalation delay of every route, shortest first."""
        return sorted({step.after for route in self.routes for step in route.escalate})


def load_notify_config(path: str | Path, environ: Mapping[str, str] | None = None) -> NotifyConfig:
    """Read and check the file at ``path``; ``ConfigurationError`` names the line of a problem."""
    text = read_config_text(path, "the notifier's file", ConfigurationError)
    return parse_notify_config(text, source=str(path), environ=environ)


def parse_notify_config(
    text: str, *, source: str = "notify.toml", environ: Mapping[str, str] | None = None
) -> NotifyConfig:
    """Parse and check the notifier's file from TOML text (``${NAME}`` read from ``environ``)."""
    data = toml_document(text, source, ConfigurationError)
    return _Parser(source, LineIndex(text), os.environ if environ is None else environ).config(data)


class _Parser:
    def __init__(self, source: str, index: LineIndex, environ: Mapping[str, str]) -> None:
        self.source = source
        self.index = index
        self.environ = environ

    def fail(self, path: tuple[str, ...], message: str) -> ConfigurationError:
        line = self.index.line(path)
        where = f"{self.source} line {line}" if line is not None else self.source
        return ConfigurationError(f"{where}: {message}")

    def table(self, value: Any, path: tuple[str, ...], allowed: set[str] | None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"{'.'.join(path) or 'the file'} must be a table, not {kind_of(value)}")
        for key in value:
            if allowed is not None and key not in allowed:
                known = ", ".join(sorted(allowed))
                raise self.fail((*path, key), f"unknown key {'.'.join((*path, key))!r} (known here: {known})")
        return value

    def string(self, value: Any, path: tuple[str, ...]) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(path, f"{'.'.join(path)} must be a non-empty string, not {kind_of(value)}")
        key = path[-1]
        if key in _SECRET_KEYS:
            match = _ENV_REF.fullmatch(value)
            if match is None:
                raise self.fail(
                    path,
                    f'{".".join(path)} must be an environment reference such as "${{SMTP_PASSWORD}}": '
                    "a secret is never written in the file",
                )
            return self.env(match.group(1), path)
        return _ENV_REF.sub(lambda m: self.env(m.group(1), path), value)

    def env(self, name: str, path: tuple[str, ...]) -> str:
        if name not in self.environ:
            raise self.fail(path, f"{'.'.join(path)} uses ${{{name}}}, which is not set in the environment")
        return self.environ[name]

    def strings(self, value: Any, path: tuple[str, ...]) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail(path, f"{'.'.join(path)} must be a non-empty array of strings")
        return tuple(self.string(v, path) for v in value)

    def duration(self, value: Any, path: tuple[str, ...]) -> timedelta:
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds: float | None = float(value)
        else:
            seconds = duration_seconds(value) if isinstance(value, str) else None
        if seconds is None or not seconds > 0 or math.isinf(seconds):
            raise self.fail(path, f'{".".join(path)} must be a positive duration such as "30s", "15m", "2h"')
        return timedelta(seconds=seconds)

    def integer(self, value: Any, path: tuple[str, ...]) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(path, f"{'.'.join(path)} must be a whole number of at least 1, not {value!r}")
        return value

    def amount(self, value: Any, path: tuple[str, ...]) -> Decimal:
        if isinstance(value, int) and not isinstance(value, bool):
            return Decimal(value)
        try:
            if isinstance(value, str) and value.strip():
                amount = Decimal(value.strip())
                if amount.is_finite():
                    return amount
        except InvalidOperation:
            pass
        raise self.fail(
            path, f'{".".join(path)} must be a decimal such as "1000.00" or an integer, not {value!r}'
        )

    # -- the file ----------------------------------------------------------------------------------
    def config(self, data: dict[str, Any]) -> NotifyConfig:
        self.table(data, (), _TOP)
        options = self.notifier(self.table(data.get("notifier", {}), ("notifier",), _NOTIFIER))
        teams = {
            str(who): self.string(team, ("teams", who))
            for who, team in self.table(data.get("teams", {}), ("teams",), None).items()
        }
        channels = {
            name: self.channel(name, body)
            for name, body in self.table(data.get("channels", {}), ("channels",), None).items()
        }
        if not channels:
            raise self.fail(
                ("channels",),
                "name at least one channel: [channels.NAME] with type = " + "/".join(CHANNEL_TYPES),
            )
        groups = {
            name: self.group(name, members, channels)
            for name, members in self.table(data.get("groups", {}), ("groups",), None).items()
        }
        routes_data = data.get("routes", [])
        if not isinstance(routes_data, list) or not routes_data:
            raise self.fail(("routes",), "name at least one route: [[routes]] with notify = [GROUP, ...]")
        routes = tuple(self.route(body, ("routes", str(i)), groups) for i, body in enumerate(routes_data))
        if ("link_base" in options) != ("link_secret" in options):
            raise self.fail(
                ("notifier",), "link_base and link_secret go together (the email links need both)"
            )
        return NotifyConfig(self.source, channels, groups, routes, teams, **options)

    def notifier(self, body: dict[str, Any]) -> dict[str, Any]:
        path = ("notifier",)
        options: dict[str, Any] = {}
        for key, value in body.items():
            where = (*path, key)
            if key == "max_attempts":
                options[key] = self.integer(value, where)
            elif key in ("amount_field", "link_base", "link_secret"):
                options[key] = self.string(value, where)
            else:
                options[key] = self.duration(value, where)
        return options

    def channel(self, name: str, body: Any) -> Channel:
        path = ("channels", name)
        if not _NAME.match(name):
            raise self.fail(path, f"channel name {name!r}: letters, digits, _ . - only")
        kind = self.table(body, path, None).get("type")
        if kind not in CHANNEL_TYPES:
            raise self.fail(
                (*path, "type"), f"channels.{name}.type must be one of {', '.join(CHANNEL_TYPES)}"
            )
        self.table(body, path, _CHANNEL[kind])
        settings: dict[str, Any] = {}
        for key, value in body.items():
            if key == "port":
                settings[key] = self.integer(value, (*path, key))
            elif key != "type":
                settings[key] = self.string(value, (*path, key))
        required = {"webhook": ("url", "secret"), "email": ("host", "from"), "slack": ("token", "channel")}
        for key in required[kind]:
            if key not in settings:
                raise self.fail(path, f"a {kind} channel needs {key} (channels.{name}.{key})")
        if kind == "webhook" and not settings["url"].startswith(("http://", "https://")):
            raise self.fail((*path, "url"), f"channels.{name}.url must be an http:// or https:// URL")
        if kind == "email":
            security = settings.setdefault("security", "starttls")
            if security not in SECURITY:
                raise self.fail(
                    (*path, "security"), f"channels.{name}.security must be one of {', '.join(SECURITY)}"
                )
            if ("username" in settings) != ("password" in settings):
                raise self.fail(path, f"channels.{name}: username and password go together")
        return Channel(name, kind, settings)

    def group(self, name: str, members: Any, channels: Mapping[str, Channel]) -> tuple[Target, ...]:
        path = ("groups", name)
        targets = []
        for member in self.strings(members, path):
            channel, _, recipient = member.partition(":")
            if channel not in channels:
                raise self.fail(path, f"groups.{name} names {member!r}: there is no channel {channel!r}")
            if channels[channel].type == "email" and not recipient:
                raise self.fail(
                    path, f'groups.{name}: an email channel needs an address ("{channel}:alice@example.com")'
                )
            if channels[channel].type == "webhook" and recipient:
                raise self.fail(path, f"groups.{name}: a webhook channel takes no recipient ({member!r})")
            targets.append(Target(channel, recipient or None))
        return tuple(targets)

    def route(self, body: Any, path: tuple[str, ...], groups: Mapping[str, tuple[Target, ...]]) -> Route:
        self.table(body, path, _ROUTE)
        if "notify" not in body:
            raise self.fail(path, "a route needs notify = [GROUP, ...]")
        notify = self.groups(body["notify"], (*path, "notify"), groups)
        events = None
        if "events" in body:
            events = set()
            for name in self.strings(body["events"], (*path, "events")):
                try:
                    events.add(EventKind(name))
                except ValueError:
                    known = ", ".join(str(k) for k in EventKind)
                    raise self.fail((*path, "events"), f"unknown event {name!r} (known: {known})") from None
        escalate = []
        steps = body.get("escalate", [])
        if not isinstance(steps, list):
            raise self.fail((*path, "escalate"), "escalate must be an array of {after, notify} tables")
        for i, step in enumerate(steps):
            where = (*path, "escalate", str(i))
            self.table(step, where, _ESCALATE)
            if "after" not in step or "notify" not in step:
                raise self.fail(where, "an escalation needs after = DURATION and notify = [GROUP, ...]")
            escalate.append(
                Escalation(
                    self.duration(step["after"], (*where, "after")),
                    self.groups(step["notify"], (*where, "notify"), groups),
                )
            )

        def named(key: str) -> frozenset[str] | None:
            return frozenset(self.strings(body[key], (*path, key))) if key in body else None

        return Route(
            notify,
            frozenset(events) if events is not None else None,
            named("tools"),
            named("rules"),
            named("teams"),
            self.string(body["prefix"], (*path, "prefix")) if "prefix" in body else None,
            self.amount(body["min_amount"], (*path, "min_amount")) if "min_amount" in body else None,
            self.amount(body["max_amount"], (*path, "max_amount")) if "max_amount" in body else None,
            tuple(sorted(escalate, key=lambda s: s.after)),
        )

    def groups(
        self, value: Any, path: tuple[str, ...], groups: Mapping[str, tuple[Target, ...]]
    ) -> tuple[str, ...]:
        names = self.strings(value, path)
        for name in names:
            if name not in groups:
                raise self.fail(
                    path, f"{'.'.join(path)} names the group {name!r}, which [groups] does not define"
                )
        return names
