"""The message formats both halves of #36 share: the signed email link and the Slack buttons."""

from __future__ import annotations

import json
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest

from sagacity._links import (
    APPROVE_ACTION_ID,
    REJECT_ACTION_ID,
    email_link,
    email_token,
    parse_slack_action,
    read_email_token,
    slack_buttons,
)
from sagacity.errors import ApprovalRefusedError, ConfigurationError, InvalidValueError

SECRET = "s" * 64
SHA = "a" * 64


def _token(url: str) -> str:
    return parse_qs(urlsplit(url).query)["token"][0]


def test_a_link_names_one_approver_one_gate_one_payload() -> None:
    """What the link was made for is what a verified token reads back."""
    url = email_link(
        "https://ops.example.com/sagacity/",
        SECRET,
        approver="carol@example.com",
        saga_id="order 7/x",
        seq=3,
        sha256=SHA,
        ttl=timedelta(hours=1),
    )
    assert url.startswith("https://ops.example.com/sagacity/links/email?token=")
    token = read_email_token(SECRET, _token(url))
    assert (token.approver, token.saga_id, token.seq, token.sha256) == (
        "carol@example.com",
        "order 7/x",
        3,
        SHA,
    )


def test_an_expired_link_is_refused() -> None:
    """A token past its expiry is refused with a message that says so."""
    token = email_token(SECRET, approver="a", saga_id="s", seq=1, sha256=SHA, ttl=timedelta(seconds=1))
    claims = jwt.decode(token, SECRET, algorithms=["HS256"], audience="sagacity-approval")
    claims["exp"] = claims["iat"] - 10
    stale = jwt.encode(claims, SECRET, algorithm="HS256")
    with pytest.raises(ApprovalRefusedError, match="expired"):
        read_email_token(SECRET, stale)


def test_a_token_signed_with_another_secret_or_edited_is_refused() -> None:
    """A token forged with another key, or whose claims were edited, does not verify."""
    token = email_token("o" * 32, approver="a", saga_id="s", seq=1, sha256=SHA, ttl=timedelta(hours=1))
    with pytest.raises(ApprovalRefusedError, match="not valid"):
        read_email_token(SECRET, token)
    mine = email_token(SECRET, approver="a", saga_id="s", seq=1, sha256=SHA, ttl=timedelta(hours=1))
    head, _body, sig = mine.split(".")
    claims = jwt.decode(mine, SECRET, algorithms=["HS256"], audience="sagacity-approval")
    claims["sub"] = "mallory"
    forged_body = jwt.encode(claims, "x" * 32, algorithm="HS256").split(".")[1]
    with pytest.raises(ApprovalRefusedError):
        read_email_token(SECRET, f"{head}.{forged_body}.{sig}")
    with pytest.raises(ApprovalRefusedError):
        read_email_token(SECRET, jwt.encode(claims, SECRET, algorithm="HS512"))


def test_a_short_secret_is_a_configuration_error() -> None:
    """An HS256 key shorter than the hash is refused before anything is signed."""
    with pytest.raises(ConfigurationError, match="at least 32"):
        email_token("short", approver="a", saga_id="s", seq=1, sha256=SHA, ttl=timedelta(hours=1))


def test_slack_buttons_round_trip() -> None:
    """Each button's value is compact JSON that parses back to its decision and gate."""
    approve, reject = slack_buttons("s-1", 4, SHA)
    assert (approve["action_id"], reject["action_id"]) == (APPROVE_ACTION_ID, REJECT_ACTION_ID)
    assert approve["value"] == json.dumps({"saga_id": "s-1", "seq": 4, "sha256": SHA}, separators=(",", ":"))
    parsed = parse_slack_action(reject)
    assert (parsed.decision, parsed.saga_id, parsed.seq, parsed.sha256) == ("reject", "s-1", 4, SHA)
    assert parse_slack_action(approve).decision == "approve"


@pytest.mark.parametrize(
    "action",
    [
        {"action_id": "other", "value": "{}"},
        {"action_id": APPROVE_ACTION_ID, "value": "not json"},
        {"action_id": APPROVE_ACTION_ID, "value": '{"saga_id":"s","seq":0,"sha256":"' + SHA + '"}'},
        {"action_id": APPROVE_ACTION_ID, "value": '{"saga_id":"s","seq":1,"sha256":"ABC"}'},
        {"action_id": APPROVE_ACTION_ID, "value": "[1]"},
    ],
)
def test_a_button_that_names_no_gate_is_refused(action: dict[str, str]) -> None:
    """Anything but one of our buttons naming a gate and a hash is a clear error."""
    with pytest.raises(InvalidValueError):
        parse_slack_action(action)
