"""Deciding from a message against a real ``sagacity serve`` process: Slack's signed callback and
the email link's confirmation page decide exactly as the dashboard does, bound to the payload the
message showed, with the channel journaled; everything refused journals nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import jwt
import pytest

from sagacity import Sagacity, SagaStatus
from sagacity._links import APPROVE_ACTION_ID, REJECT_ACTION_ID

from .messaging import (
    BOB_TOKEN,
    LINK_SECRET,
    SlackFake,
    confirm,
    decisions,
    link,
    messages_server,
    post_slack,
    slack_click,
    token_of,
)

ZEROS = "0" * 64
ALICE = "alice@example.com"
#: What a reverse proxy in front of the server says of a signed-in bob.
AS_BOB = {"X-Forwarded-User": "bob@example.com"}


@pytest.fixture
def slack() -> Iterator[SlackFake]:
    fake = SlackFake()
    yield fake
    fake.close()


def _gate(db: str, saga_id: str, agent: object) -> tuple[int, str]:
    with Sagacity(db) as sg:
        result = sg.run(saga_id, agent)
        [request] = result.awaiting
        return request.journal_seq, request.input_hash


def test_slack_decides_as_the_mapped_user_and_refuses_the_rest(
    tmp_path: Path, tools: ModuleType, slack: SlackFake
) -> None:
    """A signed click by a mapped user journals the decision ``via=slack`` and updates the message;
    a bad signature, a stale timestamp, an unmapped user, a changed payload and a user outside the
    policy's scope are refused and journal nothing; a second approver on the dashboard completes
    the four eyes."""
    db = f"sqlite:///{tmp_path}/journal.db"
    seq, sha = _gate(db, "slack-1", tools.four_eyes)
    wire_seq, wire_sha = _gate(db, "slack-2", tools.transfer)
    with messages_server(tmp_path, db) as url, httpx.Client(base_url=url, timeout=20) as http:
        click = slack_click("U_ALICE", APPROVE_ACTION_ID, "slack-1", seq, sha, slack.url)
        bad = post_slack(http, click, secret="another-secret")
        assert (bad.status_code, bad.json()["error"]) == (401, "bad Slack signature")
        stale = post_slack(http, click, age=600)
        assert stale.status_code == 401
        assert "stale" in stale.json()["error"]
        eve = post_slack(http, slack_click("U_EVE", APPROVE_ACTION_ID, "slack-1", seq, sha, slack.url))
        assert eve.status_code == 403
        assert "not mapped" in eve.json()["error"]
        changed = post_slack(
            http, slack_click("U_ALICE", APPROVE_ACTION_ID, "slack-1", seq, "0" * 64, slack.url)
        )
        assert changed.status_code == 409
        assert changed.json()["type"] == "PayloadMismatchError"
        out_of_scope = post_slack(
            http, slack_click("U_BOB", REJECT_ACTION_ID, "slack-2", wire_seq, wire_sha, slack.url)
        )
        assert out_of_scope.status_code == 403
        assert out_of_scope.json()["type"] == "ApproverScopeError"
        assert decisions(db, "slack-1") == decisions(db, "slack-2") == []

        approved = post_slack(http, click)
        assert approved.status_code == 200, approved.text
        assert decisions(db, "slack-1") == [("APPROVED", "approver=alice@example.com\nvia=slack")]
        assert slack.received[-1]["replace_original"] is True
        assert slack.received[-1]["text"].startswith("Approved by alice@example.com")
        again = post_slack(http, click)
        assert again.status_code == 409
        assert "already approved by" in again.json()["error"]
        assert len(decisions(db, "slack-1")) == 1

        dashboard = http.post(
            f"/sagacity/approve/slack-1/{seq}", headers={"Authorization": f"Bearer {BOB_TOKEN}"}
        )
        assert dashboard.status_code == 200, dashboard.text
        rejected = post_slack(
            http, slack_click("U_ALICE", REJECT_ACTION_ID, "slack-2", wire_seq, wire_sha, slack.url)
        )
        assert rejected.status_code == 200, rejected.text
    assert [p for _, p in decisions(db, "slack-1")] == [
        "approver=alice@example.com\nvia=slack",
        "approver=bob@example.com",
    ]
    assert decisions(db, "slack-2") == [
        ("REJECTED", "approver=alice@example.com\nvia=slack\nreason=rejected from Slack")
    ]
    with Sagacity(db) as sg:
        [pending] = sg.approvals("slack-1")
        assert pending.approvers == ("alice@example.com", "bob@example.com")
        assert pending.ready_to_resume
        assert sg.status("slack-2") is SagaStatus.REJECTED
        assert sg.verify("slack-1").valid
        assert sg.verify("slack-2").valid
        [gate] = sg.view("slack-2").gates
        assert gate.rejection is not None
        assert gate.rejection.reason == "rejected from Slack"


def test_email_link_page_decides_nothing_until_confirmed_and_only_once(
    tmp_path: Path, tools: ModuleType
) -> None:
    """Opening a link shows the payload and journals nothing; an expired, forged, forwarded,
    out-of-scope or payload-changed link is refused with a clear page; the named approver's
    confirmation journals ``via=email``; the used link is refused afterwards."""
    db = f"sqlite:///{tmp_path}/journal.db"
    seq, sha = _gate(db, "mail-1", tools.transfer)
    with messages_server(tmp_path, db) as url, httpx.Client(base_url=url, timeout=20) as http:
        mine = link(url, "alice@example.com", "mail-1", seq, sha)
        page = http.get(mine)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "&quot;amount&quot;: &quot;100.00&quot;" in page.text
        assert sha in page.text
        assert http.get(mine).status_code == 200  # a scanner opening it twice decides nothing

        claims = jwt.decode(token_of(mine), LINK_SECRET, algorithms=["HS256"], audience="sagacity-approval")
        expired = mine.replace(
            token_of(mine), jwt.encode({**claims, "exp": claims["iat"] - 1}, LINK_SECRET, algorithm="HS256")
        )
        refusals = {
            "expired": (http.get(expired), 410, "Link expired"),
            "forged": (http.get(mine[:-4] + "AAAA"), 400, "Link not valid"),
            "changed": (http.get(link(url, ALICE, "mail-1", seq, ZEROS)), 409, "Payload changed"),
            "bob": (http.get(link(url, "bob@example.com", "mail-1", seq, sha)), 403, "Not yours to decide"),
            "signed in as bob": (http.get(mine, headers=AS_BOB), 403, "Not your link"),
            "forwarded": (confirm(http, mine, "mallory@example.com"), 403, "Not your link"),
            "post expired": (confirm(http, expired, "alice@example.com"), 410, "Link expired"),
            "post changed": (
                confirm(http, link(url, "alice@example.com", "mail-1", seq, "0" * 64), "alice@example.com"),
                409,
                "Payload changed",
            ),
            "post bob": (
                confirm(http, link(url, "bob@example.com", "mail-1", seq, sha), "bob@example.com"),
                403,
                "Not yours to decide",
            ),
        }  # fmt: skip
        for name, (response, status, title) in refusals.items():
            assert (response.status_code, name) == (status, name), response.text
            assert f"<h1>{title}</h1>" in response.text, name
            assert "Nothing was decided" in response.text, name
        assert decisions(db, "mail-1") == []

        done = confirm(http, mine, "alice@example.com")
        assert done.status_code == 200, done.text
        assert "Approved by alice@example.com" in done.text
        assert decisions(db, "mail-1") == [("APPROVED", "approver=alice@example.com\nvia=email")]
        used_get, used_post = (
            http.get(mine),
            confirm(http, mine, "alice@example.com", "reject", "changed my mind"),
        )
        assert (used_get.status_code, used_post.status_code) == (410, 410)
        assert "<h1>Link used</h1>" in used_get.text
    assert len(decisions(db, "mail-1")) == 1


def test_the_message_routes_are_off_without_configuration(tmp_path: Path) -> None:
    """Without a link secret or a Slack signing secret the routes do not exist."""
    from sagacity.server import TokenAuth, create_app

    with Sagacity("memory://") as sg:
        app = create_app(sg, auth=TokenAuth({"t" * 20: {"name": "a", "roles": ["admin"]}}))
        paths = {getattr(r, "path", "") for r in app.routes}
    assert "/sagacity/slack/actions" not in paths
    assert "/sagacity/links/email" not in paths
