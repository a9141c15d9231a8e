"""What a message carries so that a decision can be taken from it: the email link and the Slack
buttons.

Both halves of issue #36 speak these formats: the notifier writes them into messages, the server
reads them back from a click. Each names one gate (saga id and seq) and the SHA-256 of the exact
payload the message showed, so a decision taken from a message binds to what the person saw; a
changed payload is refused where the decision is made, never here.

An email link is a signed token (a JWT, HS256, made and read by PyJWT: never parsed by hand)
naming one approver, one gate and one payload hash, with an expiry. It is single-use without any
state of its own: it can only decide its own gate for its own approver, and the journal says
whether that approver has decided already. The secret never leaves the server's configuration.

This module sits on the ground floor and imports PyJWT only when a token is made or read.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal
from urllib.parse import quote

from sagacity.errors import ApprovalRefusedError, ConfigurationError, InvalidValueError

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

#: Block Kit ``action_id`` of the two buttons on an approval message.
APPROVE_ACTION_ID: Final = "sagacity_approve"
REJECT_ACTION_ID: Final = "sagacity_reject"

#: The environment variable holding the secret that signs email links (the notifier that writes
#: them and the server that reads them share it).
LINK_SECRET_ENV: Final = "SAGACITY_LINK_SECRET"

#: Where the server answers an email link, under its mount point (``/sagacity`` by default).
EMAIL_LINK_PATH: Final = "/links/email"

#: RFC 7518 3.2: an HS256 key is at least as long as the hash.
_MIN_SECRET_BYTES: Final = 32
_ALGORITHM: Final = "HS256"
_AUDIENCE: Final = "sagacity-approval"
_ISSUER: Final = "sagacity"
_HEX = frozenset("0123456789abcdef")

Decision = Literal["approve", "reject"]
_DECISIONS: Final[dict[str, Decision]] = {APPROVE_ACTION_ID: "approve", REJECT_ACTION_ID: "reject"}


@dataclass(frozen=True, slots=True)
class EmailToken:
    """What a verified email link names: who may decide, which gate, on which payload, until when."""

    approver: str
    saga_id: str
    seq: int
    sha256: str
    expires_at: datetime
    token_id: str


@dataclass(frozen=True, slots=True)
class SlackAction:
    """A click on one of the buttons: the decision and the gate and payload hash it names."""

    decision: Decision
    saga_id: str
    seq: int
    sha256: str


def link_key(secret: str | bytes) -> bytes:
    """The secret as key bytes; ``ConfigurationError`` when it is too short for HS256."""
    key = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    if len(key) < _MIN_SECRET_BYTES:
        raise ConfigurationError(
            f"the email link secret has {len(key)} bytes; it needs at least {_MIN_SECRET_BYTES} "
            "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
        )
    return key


def _jwt() -> Any:
    try:
        import jwt
    except ImportError as exc:  # pragma: no cover - the extra is part of dev
        raise ConfigurationError("email approval links need PyJWT: pip install 'sagacity[messages]'") from exc
    return jwt


def _check_gate(saga_id: object, seq: object, sha256: object) -> tuple[str, int, str]:
    if not isinstance(saga_id, str) or not saga_id:
        raise InvalidValueError(f"a gate's saga id must be a non-empty string, not {saga_id!r}")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise InvalidValueError(f"a gate's seq must be a positive integer, not {seq!r}")
    if not isinstance(sha256, str) or len(sha256) != 64 or not set(sha256) <= _HEX:
        raise InvalidValueError(f"a payload's SHA-256 must be 64 lowercase hex digits, not {sha256!r}")
    return saga_id, seq, sha256


def email_token(
    secret: str | bytes, *, approver: str, saga_id: str, seq: int, sha256: str, ttl: timedelta
) -> str:
    """A signed token that lets ``approver`` decide gate ``seq`` of ``saga_id`` on the payload
    whose SHA-256 is ``sha256``, for ``ttl`` from now."""
    _check_gate(saga_id, seq, sha256)
    if not approver.strip():
        raise InvalidValueError("an email link names its approver")
    if ttl <= timedelta(0):
        raise InvalidValueError(f"an email link's lifetime must be positive, not {ttl}")
    now = datetime.now(UTC)
    claims = {
        "iss": _ISSUER,
        "aud": _AUDIENCE,
        "sub": approver,
        "sid": saga_id,
        "seq": seq,
        "sha": sha256,
        "iat": now,
        "exp": now + ttl,
        "jti": secrets.token_urlsafe(12),
    }
    token: str = _jwt().encode(claims, link_key(secret), algorithm=_ALGORITHM)
    return token


def email_link(
    base_url: str,
    secret: str | bytes,
    *,
    approver: str,
    saga_id: str,
    seq: int,
    sha256: str,
    ttl: timedelta,
) -> str:
    """The URL to put in an approval email: ``base_url`` is where the server's routes are mounted
    (e.g. ``https://ops.example.com/sagacity``). Opening it shows the payload and asks to confirm;
    only the confirmation decides."""
    token = email_token(secret, approver=approver, saga_id=saga_id, seq=seq, sha256=sha256, ttl=ttl)
    return f"{base_url.rstrip('/')}{EMAIL_LINK_PATH}?token={quote(token, safe='')}"


def read_email_token(secret: str | bytes, token: str) -> EmailToken:
    """The claims of a token this server signed, or ``ApprovalRefusedError`` saying why not
    (expired, not signed with this secret, malformed). Whether the gate is still open, and
    still on the same payload, is the decision's question, not this one's."""
    jwt = _jwt()
    try:
        claims = jwt.decode(
            token,
            link_key(secret),
            algorithms=[_ALGORITHM],
            audience=_AUDIENCE,
            issuer=_ISSUER,
            options={"require": ["exp", "iat", "sub", "sid", "seq", "sha", "jti"]},
        )
    except jwt.ExpiredSignatureError as exc:
        raise ApprovalRefusedError("this approval link has expired: ask for a new one") from exc
    except jwt.InvalidTokenError as exc:
        raise ApprovalRefusedError(f"this approval link is not valid ({exc})") from exc
    try:
        saga_id, seq, sha256 = _check_gate(claims["sid"], claims["seq"], claims["sha"])
    except InvalidValueError as exc:
        raise ApprovalRefusedError(f"this approval link is not valid ({exc})") from exc
    return EmailToken(
        approver=str(claims["sub"]),
        saga_id=saga_id,
        seq=seq,
        sha256=sha256,
        expires_at=datetime.fromtimestamp(int(claims["exp"]), UTC),
        token_id=str(claims["jti"]),
    )


def slack_value(saga_id: str, seq: int, sha256: str) -> str:
    """A button's ``value``: compact JSON naming the gate and the payload hash shown."""
    _check_gate(saga_id, seq, sha256)
    return json.dumps({"saga_id": saga_id, "seq": seq, "sha256": sha256}, separators=(",", ":"))


def slack_buttons(saga_id: str, seq: int, sha256: str) -> list[dict[str, Any]]:
    """The approve and reject buttons of an approval message (Block Kit ``button`` elements), to
    put in an ``actions`` block."""
    value = slack_value(saga_id, seq, sha256)
    return [
        {
            "type": "button",
            "action_id": APPROVE_ACTION_ID,
            "text": {"type": "plain_text", "text": "Approve"},
            "style": "primary",
            "value": value,
        },
        {
            "type": "button",
            "action_id": REJECT_ACTION_ID,
            "text": {"type": "plain_text", "text": "Reject"},
            "style": "danger",
            "value": value,
        },
    ]


def parse_slack_action(action: Mapping[str, Any]) -> SlackAction:
    """One element of a ``block_actions`` payload's ``actions``, read back; ``InvalidValueError``
    for a button that is not one of ours or a value that does not name a gate."""
    decision = _DECISIONS.get(str(action.get("action_id", "")))
    if decision is None:
        raise InvalidValueError(f"not a Sagacity button: action_id {action.get('action_id')!r}")
    try:
        value = json.loads(str(action.get("value", "")))
    except json.JSONDecodeError as exc:
        raise InvalidValueError(f"a Sagacity button's value is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise InvalidValueError("a Sagacity button's value is not a JSON object")
    saga_id, seq, sha256 = _check_gate(value.get("saga_id"), value.get("seq"), value.get("sha256"))
    return SlackAction(decision=decision, saga_id=saga_id, seq=seq, sha256=sha256)
