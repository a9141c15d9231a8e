"""A stand-in for ``sagacity._links.email_link`` (issue #36, part 2), same signature.

The link an email carries is made by the module that also checks it when it is opened (the
confirmation page, on branch ``act``). Until that module lands here, this makes a link of the
same shape: ``<base>/email/confirm?token=<claims>.<HMAC-SHA256>``, naming one approver, one gate
and one payload hash, expiring after ``ttl``. Replace the import in ``_channels.py`` with
``sagacity._links.email_link`` when it exists; nothing else changes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import urllib.parse
from datetime import UTC, timedelta

from sagacity.chain import utc_now

__all__ = ["email_link"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


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
    """A signed link for ``approver`` to decide on gate ``seq`` of ``saga_id`` with payload ``sha256``."""
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    expires = int((utc_now() + ttl).replace(tzinfo=UTC).timestamp())
    claims = {"a": approver, "s": saga_id, "q": seq, "h": sha256, "e": expires, "n": secrets.token_hex(8)}
    body = _b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode("utf-8"))
    mac = _b64(hmac.new(key, body.encode("ascii"), hashlib.sha256).digest())
    return f"{base_url.rstrip('/')}/email/confirm?token={urllib.parse.quote(body + '.' + mac)}"
