"""Sending one delivery on its channel: a signed webhook, an email over SMTP, a Slack message.

Each sender raises :class:`DeliveryError` when the target did not take the message (the
notifier retries it later); returning means it was accepted. Every message carries the event's
id where its receiver can read it (``webhook-id``, the email's ``Message-ID``, the Slack
message's metadata), so a resend after a crash is recognisably the same message.

The extras: ``standardwebhooks`` signs webhooks and ``slack-sdk`` posts to Slack
(``pip install 'sagacity[notify]'``); email is the standard library's ``smtplib``.
"""

from __future__ import annotations

import json
import smtplib
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC
from email.message import EmailMessage
from typing import Any

from sagacity._links import email_link, slack_buttons
from sagacity.chain import utc_now
from sagacity.errors import ConfigurationError
from sagacity.notify._config import Channel, NotifyConfig, Target
from sagacity.notify._events import Event, EventKind
from sagacity.notify._text import describe, subject

__all__ = ["DeliveryError", "Sender", "approval_buttons", "send"]

#: What a sender is: (channel, target, event, config) -> None, or DeliveryError.
Sender = Callable[[Channel, Target, Event, NotifyConfig], None]
#: Events an approver acts on: their messages carry the approve/reject buttons and links.
ACTIONABLE = (EventKind.APPROVAL_REQUESTED, EventKind.APPROVAL_REMINDER, EventKind.APPROVAL_ESCALATED)


class DeliveryError(Exception):
    """The target did not take the message; the notifier tries again later."""


def _extra(module: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        raise ConfigurationError(
            f"this channel needs {module.split('.', maxsplit=1)[0]}: pip install 'sagacity[notify]'"
        ) from exc


def send(channel: Channel, target: Target, event: Event, config: NotifyConfig) -> None:
    """Send ``event`` to ``target`` on ``channel`` (of its type)."""
    SENDERS[channel.type](channel, target, event, config)


# -- webhooks (Standard Webhooks) ------------------------------------------------------------------
def send_webhook(channel: Channel, target: Target, event: Event, config: NotifyConfig) -> None:
    """POST the event's JSON, signed per the Standard Webhooks spec (``webhook-id`` is the event id)."""
    webhooks = _extra("standardwebhooks")
    body = json.dumps(event.body(), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    now = utc_now()
    signature = webhooks.Webhook(channel.settings["secret"]).sign(event.id, now, body)
    request = urllib.request.Request(
        channel.settings["url"],
        data=body,
        method="POST",
        headers={
            "content-type": "application/json",
            "user-agent": "sagacity-notifier",
            "webhook-id": event.id,
            "webhook-timestamp": str(int(now.replace(tzinfo=UTC).timestamp())),
            "webhook-signature": signature,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=config.send_timeout.total_seconds()) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        raise DeliveryError(f"{channel.name}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise DeliveryError(f"{channel.name}: {exc}") from exc


# -- email (SMTP) -------------------------------------------------------------------------------------
def send_email(channel: Channel, target: Target, event: Event, config: NotifyConfig) -> None:
    """One message to one address, over SMTP with STARTTLS, TLS, or (for a local relay) neither."""
    settings = channel.settings
    message = EmailMessage()
    message["Subject"] = subject(event)
    message["From"] = settings["from"]
    message["To"] = target.recipient or ""
    message["Message-ID"] = f"<{event.id}@sagacity>"
    message["X-Sagacity-Event"] = event.id
    text = describe(event)
    if event.kind in ACTIONABLE and config.link_base and config.link_secret and target.recipient:
        link = approval_link(config, target.recipient, event)
        text += f"\n\nTo approve or reject this exact payload, open:\n{link}\n"
    message.set_content(text)
    security = settings.get("security", "starttls")
    timeout = config.send_timeout.total_seconds()
    context = ssl.create_default_context(cafile=settings.get("ca_file"))
    try:
        if security == "tls":
            client: smtplib.SMTP = smtplib.SMTP_SSL(
                settings["host"], settings.get("port", 465), timeout=timeout, context=context
            )
        else:
            client = smtplib.SMTP(settings["host"], settings.get("port", 587), timeout=timeout)
        with client:
            if security == "starttls":
                client.starttls(context=context)
            if "username" in settings:
                client.login(settings["username"], settings["password"])
            client.send_message(message)
    except (smtplib.SMTPException, OSError) as exc:
        raise DeliveryError(f"{channel.name}: {exc}") from exc


def approval_link(config: NotifyConfig, approver: str, event: Event) -> str:
    """The signed, single-use link for ``approver`` to decide on this exact payload."""
    assert config.link_base is not None
    assert config.link_secret is not None
    return email_link(
        config.link_base,
        config.link_secret,
        approver=approver,
        saga_id=str(event.saga_id),
        seq=int(event.seq or 0),
        sha256=str(event.data.get("inputHash")),
        ttl=config.link_ttl,
    )


# -- Slack ----------------------------------------------------------------------------------------
def approval_buttons(event: Event) -> dict[str, Any]:
    """The actions block: Approve / Reject (``sagacity._links``), each naming the gate and the
    SHA-256 of the payload the message shows."""
    buttons = slack_buttons(str(event.saga_id), int(event.seq or 0), str(event.data.get("inputHash")))
    return {"type": "actions", "block_id": f"sagacity_{event.id}", "elements": buttons}


def send_slack(channel: Channel, target: Target, event: Event, config: NotifyConfig) -> None:
    """``chat.postMessage`` with Block Kit: the text, and for a request its two buttons."""
    web = _extra("slack_sdk.web")
    errors = _extra("slack_sdk.errors")
    settings = channel.settings
    options: dict[str, Any] = {
        "token": settings["token"],
        "timeout": int(max(1, config.send_timeout.total_seconds())),
    }
    if "base_url" in settings:
        options["base_url"] = settings["base_url"]
    text = describe(event)
    blocks: list[Mapping[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": text[:2900]}}]
    if event.kind in ACTIONABLE:
        blocks.append(approval_buttons(event))
    try:
        web.WebClient(**options).chat_postMessage(
            channel=target.recipient or settings["channel"],
            text=subject(event),
            blocks=blocks,
            metadata={
                "event_type": "sagacity_event",
                "event_payload": {"id": event.id, "type": str(event.kind)},
            },
        )
    except (errors.SlackApiError, errors.SlackClientError, OSError) as exc:
        raise DeliveryError(f"{channel.name}: {exc}") from exc


SENDERS: dict[str, Sender] = {"webhook": send_webhook, "email": send_email, "slack": send_slack}
