"""Deciding from a message: Slack's interactive callback and the email link's confirmation page.

Each ends in the one decision the API and the dashboard make (``Sagacity.approve`` / ``reject``:
one compare-and-append, four eyes, requester != approver, approver scopes), with the channel
journaled (``via=slack`` / ``via=email``) and the payload's SHA-256 the message showed, so a
changed payload is refused. Neither route takes a bearer token: Slack's request signature, or the
link's own signature, says who is deciding, and everything that fails that test is refused before
anything is read or journaled.
"""

from __future__ import annotations

import html
import json
import logging
import time
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.concurrency import run_in_threadpool

from sagacity import Sagacity
from sagacity._wire import error_json
from sagacity.errors import (
    ApprovalNotFoundError,
    ApproverScopeError,
    InvalidValueError,
    PayloadMismatchError,
    SagacityError,
    SagaNotFoundError,
)
from sagacity.links import (
    EMAIL_LINK_PATH,
    EmailToken,
    SlackAction,
    parse_slack_action,
    read_email_token,
)
from sagacity.model import ApprovalDecision, PendingApproval
from sagacity.server._errors import status_of
from sagacity.server._guard import SagacityDep, cross_origin, declared_query
from sagacity.server.auth import Authenticator, InsecureNoAuth
from sagacity.server.messages import Messages

__all__ = ["SLACK_ACTIONS_PATH", "message_router"]

#: Where Slack posts button clicks (the app's "Interactivity Request URL"), under the prefix.
SLACK_ACTIONS_PATH = "/slack/actions"
#: Slack's own rule: a request signed more than five minutes ago may be a replay.
SLACK_MAX_AGE = 300
#: What a rejection from a message journals as its reason (a button carries no text).
SLACK_REJECT_REASON = "rejected from Slack"

log = logging.getLogger("sagacity.server")


def _messages(request: Request) -> Messages:
    settings: Messages = request.app.state.messages
    return settings


# -- Slack ---------------------------------------------------------------------------------------
def _slack_refusal(status: int, error: str) -> JSONResponse:
    return JSONResponse({"error": error}, status)


def _verified_slack_body(settings: Messages, body: bytes, headers: Any) -> str | None:
    """None when Slack signed ``body`` within the last five minutes; else why not."""
    from slack_sdk.signature import SignatureVerifier

    assert settings.slack_signing_secret is not None
    timestamp = headers.get("x-slack-request-timestamp", "")
    signature = headers.get("x-slack-signature", "")
    if not timestamp.isascii() or not timestamp.isdigit() or not signature:
        return "missing or malformed Slack signature headers"
    if abs(time.time() - int(timestamp)) > SLACK_MAX_AGE:
        return "stale Slack request: its timestamp is more than five minutes off"
    verifier = SignatureVerifier(settings.slack_signing_secret)
    if not verifier.is_valid(body=body, timestamp=timestamp, signature=signature):
        return "bad Slack signature"
    return None


def _slack_payload(body: bytes) -> dict[str, Any]:
    form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    raw = form.get("payload", [""])
    try:
        payload = json.loads(raw[0])
    except ValueError as exc:
        raise InvalidValueError(f"the Slack callback's payload is not JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise InvalidValueError("the Slack callback's payload is not a JSON object")
    return payload


def _tell_slack(response_url: str, text: str, *, replace: bool) -> None:
    """Update the message (the outcome, replacing the buttons) or tell the clicker alone why not.
    A failure here is logged: the decision is journaled whatever Slack hears."""
    from slack_sdk.webhook import WebhookClient

    if not response_url.startswith(("https://", "http://")):
        return
    try:
        answer = WebhookClient(response_url, timeout=5).send(
            text=text,
            replace_original=replace,
            response_type=None if replace else "ephemeral",
        )
        if answer.status_code >= 300:
            log.warning("Slack's response_url answered %d", answer.status_code)
    except Exception as exc:  # noqa: BLE001 - any network failure: the journal already has the truth
        log.warning("could not update the Slack message: %s", exc)


def _decide(
    sg: Sagacity,
    action: SlackAction | str,
    saga_id: str,
    seq: int,
    sha256: str,
    approver: str,
    via: str,
    reason: str,
) -> ApprovalDecision:
    decision = action.decision if isinstance(action, SlackAction) else action
    if decision == "approve":
        return sg.approve(saga_id, seq, approver, via=via, input_hash=sha256)
    return sg.reject(saga_id, seq, approver, reason, via=via, input_hash=sha256)


def _outcome(decision: ApprovalDecision, by: str) -> str:
    what = "Approved" if decision.approved else "Rejected"
    return f"{what} by {by} (saga {decision.saga_id}, request {decision.journal_seq})"


message_router = APIRouter(dependencies=[Depends(declared_query)])


@message_router.post(
    SLACK_ACTIONS_PATH,
    tags=["messages"],
    summary="Slack's interactive callback: an approve or reject button clicked in an approval message",
)
async def slack_actions(request: Request, sg: SagacityDep) -> JSONResponse:
    settings = _messages(request)
    if settings.slack_signing_secret is None:
        return _slack_refusal(404, "Slack is not configured on this server")
    body = await request.body()
    why = _verified_slack_body(settings, body, request.headers)
    if why is not None:
        return _slack_refusal(401, why)
    try:
        payload = _slack_payload(body)
        actions = payload.get("actions") or [{}]
        action = parse_slack_action(actions[0] if isinstance(actions, list) else {})
    except InvalidValueError as exc:
        return _slack_refusal(400, str(exc))
    user = payload.get("user") if isinstance(payload.get("user"), dict) else {}
    user_id = str((user or {}).get("id", ""))
    response_url = str(payload.get("response_url", ""))
    approver = settings.slack_users.get(user_id)
    if approver is None:
        error = f"Slack user {user_id!r} is not mapped to an approver: nothing was decided"
        await run_in_threadpool(_tell_slack, response_url, error, replace=False)
        return _slack_refusal(403, error)
    try:
        decision = await run_in_threadpool(
            _decide,
            sg,
            action,
            action.saga_id,
            action.seq,
            action.sha256,
            approver,
            "slack",
            SLACK_REJECT_REASON,
        )
    except SagacityError as exc:
        status = status_of(exc)
        await run_in_threadpool(_tell_slack, response_url, f"Not decided: {exc}", replace=False)
        body_json = {"sagaId": action.saga_id, "journalSeq": action.seq, **error_json(exc)}
        return JSONResponse(body_json, status)
    log.info("saga %r seq %d %s from Slack by %r", action.saga_id, action.seq, action.decision, approver)
    await run_in_threadpool(_tell_slack, response_url, _outcome(decision, approver), replace=True)
    return JSONResponse(
        {
            "sagaId": action.saga_id,
            "journalSeq": action.seq,
            "approved": decision.approved,
            "approverIdentity": approver,
        }
    )


# -- email links ---------------------------------------------------------------------------------
def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    document = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<meta name='robots' content='noindex'><title>{html.escape(title)} · Sagacity</title>"
        "<link rel='stylesheet' href='../ui/style.css'></head>"  # the dashboard's, when it is served
        f"<body><main><h1>{html.escape(title)}</h1>{body}</main></body></html>"
    )
    return HTMLResponse(document, status)


def _refused(title: str, why: str, status: int) -> HTMLResponse:
    return _page(title, f"<p class='refused'>{html.escape(why)}</p><p>Nothing was decided.</p>", status)


def _token(settings: Messages, token: str) -> EmailToken | HTMLResponse:
    if settings.link_secret is None:
        return _refused("Links are off", "This server does not accept approval links.", 404)
    try:
        return read_email_token(settings.link_secret, token)
    except SagacityError as exc:
        expired = "expired" in str(exc)
        return _refused("Link expired" if expired else "Link not valid", str(exc), 410 if expired else 400)


def _signed_in_elsewhere(request: Request, token: EmailToken) -> HTMLResponse | None:
    """A link forwarded to someone else: the person signed in (a proxy's header, a bearer token)
    is not the approver the link names."""
    authenticator: Authenticator = request.app.state.authenticator
    if isinstance(authenticator, InsecureNoAuth):
        return None
    try:
        who = authenticator.authenticate(request)
    except SagacityError:
        who = None
    if who is not None and who.name != token.approver:
        return _refused(
            "Not your link",
            f"This link was sent to {token.approver}, and you are signed in as {who.name}.",
            403,
        )
    return None


def _pending(sg: Sagacity, token: EmailToken) -> PendingApproval | HTMLResponse:
    """The request the link names, as its approver would decide it, or the page saying why not."""
    try:
        found = next((p for p in sg.approvals(token.saga_id) if p.request.journal_seq == token.seq), None)
    except SagaNotFoundError:
        found = None
    if found is None:
        return _refused(
            "Link used", "This request was already decided (or resumed): the link has been used.", 410
        )
    if found.request.input_hash != token.sha256:
        return _refused(
            "Payload changed",
            f"The payload waiting now (SHA-256 {found.request.input_hash}) is not the one this link "
            f"was sent for ({token.sha256}).",
            409,
        )
    if token.approver in found.approvers:
        return _refused("Link used", f"{token.approver} already approved this request with it.", 410)
    if not found.may_decide(token.approver):
        names = ", ".join(found.scope or ()) or "nobody"
        return _refused(
            "Not yours to decide", f"The policy names {names} as the approvers of this request.", 403
        )
    return found


def _confirmation(action: str, token_text: str, pending: PendingApproval, token: EmailToken) -> HTMLResponse:
    request = pending.request
    try:
        shown = json.dumps(json.loads(request.input), indent=2, ensure_ascii=False)
    except ValueError:
        shown = request.input
    e = html.escape
    body = (
        f"<p>{e(request.tool_name)} is waiting for your decision in saga <code>{e(request.saga_id)}</code>"
        f" (request {request.journal_seq}).</p>"
        f"<dl class='grid'><dt>Payload</dt><dd><pre id='payload' class='payload'>{e(shown)}</pre></dd>"
        f"<dt>SHA-256</dt><dd><code id='sha256'>{e(request.input_hash)}</code></dd>"
        f"<dt>Requested by</dt><dd>{e(pending.requester or 'unknown')}</dd>"
        f"<dt>Approvals</dt><dd>{len(pending.approvers)} of {pending.approvals_required}</dd>"
        f"<dt>This link is for</dt><dd id='approver'>{e(token.approver)}</dd></dl>"
        f"<form method='post' action='{e(action)}'>"
        f"<input type='hidden' name='token' value='{e(token_text)}'>"
        "<p><label>Type your identity to confirm it is you: "
        "<input name='identity' id='identity' autocomplete='username' required></label></p>"
        "<p><label>Reason (to reject): <input name='reason' id='reason'></label></p>"
        "<p class='actions'><button class='btn approve' name='decision' value='approve' id='approve'>"
        "Approve this payload</button> "
        "<button class='btn reject' name='decision' value='reject' id='reject'>Reject</button></p></form>"
        "<p>Opening this page decided nothing; only these buttons do.</p>"
    )
    return _page("Confirm your decision", body)


@message_router.get(
    EMAIL_LINK_PATH, tags=["messages"], summary="An email link: the payload and a form to confirm"
)
def email_link_page(request: Request, sg: SagacityDep, token: str = "") -> HTMLResponse:
    read = _token(_messages(request), token)
    if isinstance(read, HTMLResponse):
        return read
    elsewhere = _signed_in_elsewhere(request, read)
    if elsewhere is not None:
        return elsewhere
    pending = _pending(sg, read)
    if isinstance(pending, HTMLResponse):
        return pending
    return _confirmation(str(request.url.remove_query_params("token")), token, pending, read)


_PAGE_OF: list[tuple[type[Exception], str, int]] = [
    (ApproverScopeError, "Not yours to decide", 403),
    (PayloadMismatchError, "Payload changed", 409),
    (ApprovalNotFoundError, "Link used", 410),
]


@message_router.post(EMAIL_LINK_PATH, tags=["messages"], summary="Confirm an email link's decision")
async def email_link_confirm(request: Request, sg: SagacityDep) -> HTMLResponse:
    if cross_origin(request):
        return _refused("Refused", "A confirmation must come from this server's own page.", 403)
    form = parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)

    def field(name: str) -> str:
        values = form.get(name, [""])
        return values[0].strip() if len(values) == 1 else ""

    read = _token(_messages(request), field("token"))
    if isinstance(read, HTMLResponse):
        return read
    elsewhere = _signed_in_elsewhere(request, read)
    if elsewhere is not None:
        return elsewhere
    if field("identity") != read.approver:
        return _refused(
            "Not your link", f"This link was sent to someone else, not to {field('identity')!r}.", 403
        )
    decision = field("decision")
    if decision not in {"approve", "reject"}:
        return _refused("Nothing to do", "Choose approve or reject.", 400)
    pending = await run_in_threadpool(_pending, sg, read)  # used already, changed, not theirs
    if isinstance(pending, HTMLResponse):
        return pending
    try:
        done = await run_in_threadpool(
            _decide,
            sg,
            decision,
            read.saga_id,
            read.seq,
            read.sha256,
            read.approver,
            "email",
            field("reason"),
        )
    except SagacityError as exc:
        title, status = next(
            ((t, s) for cls, t, s in _PAGE_OF if isinstance(exc, cls)), ("Refused", status_of(exc))
        )
        return _refused(title, str(exc), status)
    log.info("saga %r seq %d %s from an email link by %r", read.saga_id, read.seq, decision, read.approver)
    return _page("Decided", f"<p id='outcome'>{html.escape(_outcome(done, read.approver))}.</p>")
