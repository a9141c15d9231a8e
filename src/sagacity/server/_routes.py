"""The routes: SPEC §7's paths (the Java starter's), the operator reads, and how their input is read.

Every body comes from :mod:`sagacity._wire`, the CLI's ``--json`` shapes too. Blocking library calls
never run on the event loop: ``def`` routes run in the threadpool, and the ``async def`` routes that
must read a body hand the library call to the threadpool too.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import partial
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError
from starlette.concurrency import run_in_threadpool

from sagacity import Sagacity
from sagacity._wire import (
    activity_json,
    approval_json,
    decision_json,
    diagnosis_json,
    error_json,
    in_doubt_json,
    reconciled_json,
    request_detail_json,
    resume_json,
    saga_json,
    saga_page_json,
    switch_json,
    verification_json,
)
from sagacity.chain import utc_now
from sagacity.checks import kind_of, require_storable, required_reason
from sagacity.doctor import DEFAULT_OLDER_THAN
from sagacity.errors import (
    ApprovalError,
    ApprovalNotFoundError,
    InvalidValueError,
    SagacityError,
    SagaNotFoundError,
    SagaRunningElsewhereError,
    SagaStateError,
)
from sagacity.model import SagaStatus, SagaView
from sagacity.server._errors import RETRY_AFTER, ApiError, about, answering, refused
from sagacity.server._guard import Admin, Anyone, Approver, Auditor, SagacityDep, authenticated_query
from sagacity.server.auth import InsecureNoAuth, Principal

#: Slices of GET /activity's window (one bar each in the dashboard's chart).
ACTIVITY_BUCKETS = 24
#: Sagas GET /activity reads at most (a view each); beyond it the answer says it is incomplete.
ACTIVITY_SAGAS = 500

#: The journal's seq is a BIGINT: anything larger names no entry and would overflow the driver.
MAX_SEQ = 2**63 - 1

log = logging.getLogger("sagacity.server")


def _digits(value: Any) -> Any:
    """A number from the URL exactly as written: the ASCII digits 0-9 and nothing else.

    Left to themselves, ``int()`` and pydantic also read ``" 3"`` and ``"+3"`` as 3, ``"3_0"``
    as 30, ``"3.0"`` as 3 and ``"٣"`` (an Arabic-Indic digit) as 3: a URL would then name one
    seq and act on another. The range (1 to 2^63-1 for a seq) is checked after this.
    """
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise PydanticCustomError(
            "digits",
            "must be a whole number written with the digits 0-9 only (no sign, space, '_', '.' "
            "or exponent), got {text}",
            {"text": repr(value)},
        )
    return value


Digits = BeforeValidator(_digits)


def _true_or_false(value: object) -> object:
    """A query flag is ``true`` or ``false``, nothing else: pydantic alone also reads ``1``,
    ``on``, ``yes``, ``y`` and ``t``, so a typo could silently ask for the opposite list."""
    if isinstance(value, str) and value not in ("true", "false"):
        raise PydanticCustomError("true_or_false", "must be true or false, got {text}", {"text": repr(value)})
    return value


TrueOrFalse = BeforeValidator(_true_or_false)
QueueSort = Literal["created", "expires", "saga", "tool"]
SagaIdParam = Annotated[str, PathParam(description="The saga id (may contain '/').")]
SeqParam = Annotated[
    int, PathParam(ge=1, le=MAX_SEQ, description="The seq of the AWAITING_APPROVAL entry."), Digits
]


def _saga_id(saga_id: str) -> str:
    """A saga id from the path that a store can look up; 400 saying why otherwise."""
    if not saga_id:
        raise ApiError(400, {"error": "sagaId must not be empty"})
    try:
        return require_storable("sagaId", saga_id)
    except InvalidValueError as exc:
        raise ApiError(400, {"error": str(exc)}) from exc


async def _json_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object ({} when empty); 400 naming what is wrong, 413 when too big.

    Any content type is accepted (``curl -d`` sends form encoding): authentication rides in a
    header, so a body can't be used for CSRF.
    """
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except UnicodeDecodeError as exc:
        raise ApiError(400, {"error": f"the request body is not UTF-8 JSON: {exc.reason}"}) from exc
    except ValueError as exc:
        raise ApiError(400, {"error": f"the request body is not JSON: {exc}"}) from exc
    except RecursionError as exc:
        raise ApiError(400, {"error": "the request body is JSON nested too deeply"}) from exc
    if not isinstance(data, dict):
        raise ApiError(400, {"error": f"the request body must be a JSON object, not {kind_of(data)}"})
    return data


def _text_field(body: dict[str, Any], name: str, *, meaning: str) -> str | None:
    """A string field of the body (None when absent or null); 400 if it is not journal-safe text."""
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, {"error": f"{name} must be a string ({meaning}), not {kind_of(value)}"})
    try:
        return require_storable(name, value)
    except InvalidValueError as exc:
        raise ApiError(400, {"error": str(exc)}) from exc


def _view_or_404(sg: Sagacity, saga_id: str) -> SagaView:
    try:
        return sg.view(saga_id)
    except SagaNotFoundError as exc:
        raise ApiError(404, {"sagaId": saga_id, "error": str(exc)}) from exc


#: RFC 5987 ``attr-char``: what may stand unescaped in ``filename*``.
_ATTR_CHARS = "!#$&+-.^_`|~"


def _attachment(saga_id: str) -> str:
    """``Content-Disposition`` for a download named after a saga: any Unicode id, Latin-1 header.

    HTTP header values are Latin-1, so the id itself cannot go in ``filename=``. As RFC 6266
    recommends, ``filename`` carries an ASCII stand-in (letters, digits, ``-_.``, the rest as
    ``_``) for old clients and ``filename*=UTF-8''...`` the id percent-encoded, which browsers
    prefer. Characters no file name should hold (``/``, ``\\``, controls) become ``_`` in both.
    """
    name = "".join("_" if c in "/\\" or not c.isprintable() else c for c in saga_id)[:100] + ".jsonl"
    fallback = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe=_ATTR_CHARS)}"


def _body_schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """OpenAPI for a body the route reads itself (to answer bad JSON with our own 400)."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    content = {"application/json": {"schema": schema}}
    return {"requestBody": {"required": bool(required), "content": content}}


_IGNORED_APPROVER = {"type": "string", "description": "Ignored: the authenticated principal is journaled."}

router = APIRouter(dependencies=[Depends(authenticated_query)])


# -- approvals (role: approver) -----------------------------------------------------------------
@router.get("/me", tags=["session"], summary="The authenticated principal")
def me(who: Anyone, request: Request) -> dict[str, Any]:
    insecure = isinstance(request.app.state.authenticator, InsecureNoAuth)
    return {"name": who.name, "roles": sorted(who.roles), "insecure": insecure}


_PREFIX_QUERY = Query(max_length=512, description="Only saga ids that start with this (case-sensitive).")


@router.get("/approvals", tags=["approvals"], summary="Pending approval requests, oldest first")
def list_approvals(
    who: Approver,
    sg: SagacityDep,
    response: Response,
    limit: Annotated[
        int | None, Query(ge=1, le=1000, description="At most this many, the first (default: all)."), Digits
    ] = None,
    after: Annotated[
        str | None,
        Query(max_length=2048, description="The X-Next-Cursor of the previous page: go on after it."),
    ] = None,
    prefix: Annotated[str | None, _PREFIX_QUERY] = None,
    tool: Annotated[str | None, Query(max_length=512, description="Only requests to run this tool.")] = None,
    since: Annotated[
        datetime | None,
        Query(description="Only requests made at or after this ISO 8601 time (UTC without an offset)."),
    ] = None,
    until: Annotated[
        datetime | None, Query(description="Only requests made before this ISO 8601 time.")
    ] = None,
    requester: Annotated[
        str | None, Query(max_length=512, description="Only requests this principal asked for (exactly).")
    ] = None,
    needsMe: Annotated[
        bool,
        Query(description="true: only requests that want the authenticated principal's approval now."),
        TrueOrFalse,
    ] = False,
    sort: Annotated[
        QueueSort, Query(description="created (oldest first), expires (soonest first), saga or tool.")
    ] = "created",
    desc: Annotated[bool, Query(description="true: the order reversed."), TrueOrFalse] = False,
) -> list[dict[str, Any]]:
    # The Java starter's body (a bare list), so the paging rides in headers: how many requests
    # the filters keep in all, and when more follow the cursor of the next page.
    page = sg.approval_page(
        limit=limit,
        after=after,
        prefix=prefix,
        tool=tool,
        since=since,
        until=until,
        requester=requester,
        awaiting=who.name if needsMe else None,
        sort=sort,
        descending=desc,
    )
    response.headers["X-Total-Count"] = str(page.total)
    if page.next is not None:
        response.headers["X-Next-Cursor"] = page.next
    return [approval_json(p) | {"mayDecide": p.may_decide(who.name)} for p in page.items]


@router.get(
    "/requests/{sagaId:path}/{seq}",
    tags=["approvals"],
    summary="One pending request with its saga's journal so far (what an approver decides on)",
)
def approval_request(sagaId: SagaIdParam, seq: SeqParam, who: Approver, sg: SagacityDep) -> dict[str, Any]:
    saga_id = _saga_id(sagaId)
    error = f"no pending approval request for saga {saga_id!r} seq {seq}"
    try:
        saga = sg.view(saga_id)
    except SagaNotFoundError as exc:
        raise ApiError(404, {"sagaId": saga_id, "journalSeq": seq, "error": error}) from exc
    pending = saga.request(seq)
    if pending is None:
        raise ApiError(404, {"sagaId": saga_id, "journalSeq": seq, "error": error})
    # The queue's reading of it carries the policy's approver scope (the saga view has none).
    scoped = next((p for p in sg.approvals(saga_id) if p.request.journal_seq == seq), pending)
    detail = request_detail_json(scoped, saga, sg.registry.find(pending.request.tool_name))
    return detail | {"mayDecide": scoped.may_decide(who.name)}


@router.get("/approvals/{sagaId:path}", tags=["approvals"], summary="A saga's pending requests")
def saga_approvals(sagaId: SagaIdParam, who: Approver, sg: SagacityDep) -> list[dict[str, Any]]:
    return [approval_json(p) for p in _view_or_404(sg, _saga_id(sagaId)).pending]


def _approve(sg: Sagacity, saga_id: str, seq: int, who: Principal) -> dict[str, Any]:
    decision = sg.approve(saga_id, seq, who.name)
    after = sg.view(saga_id).request(seq)
    return decision_json(decision, after, pending=after is not None)


@router.post(
    "/approve/{sagaId:path}/{seq}",
    tags=["approvals"],
    summary="Journal APPROVED by the authenticated principal (approving is not executing)",
    openapi_extra=_body_schema({"approver": _IGNORED_APPROVER}),
)
async def approve(
    sagaId: SagaIdParam, seq: SeqParam, request: Request, who: Approver, sg: SagacityDep
) -> dict[str, Any]:
    saga_id = _saga_id(sagaId)
    await _json_object(request)  # {"approver"} from Java clients is read and ignored
    body = await answering(partial(about, saga_id, seq), _approve, sg, saga_id, seq, who)
    log.info("saga %r seq %d approved by %r", saga_id, seq, who.name)
    return body


@router.post(
    "/reject/{sagaId:path}/{seq}",
    tags=["approvals"],
    summary="Journal REJECTED by the authenticated principal and compensate the saga",
    openapi_extra=_body_schema(
        {
            "reason": {
                "type": "string",
                "description": "Why, in one line (required, not blank): journaled with the decision.",
            },
            "approver": _IGNORED_APPROVER,
        },
        ["reason"],
    ),
)
async def reject(
    sagaId: SagaIdParam, seq: SeqParam, request: Request, who: Approver, sg: SagacityDep
) -> dict[str, Any]:
    saga_id = _saga_id(sagaId)
    reason = _text_field(await _json_object(request), "reason", meaning="why it is rejected") or ""
    try:
        reason = required_reason(reason)
    except InvalidValueError as exc:
        raise about(saga_id, seq, exc) from exc
    decision = await answering(partial(about, saga_id, seq), sg.reject, saga_id, seq, who.name, reason)
    log.info("saga %r seq %d rejected by %r", saga_id, seq, who.name)
    return decision_json(decision)


@router.post(
    "/resume/{sagaId:path}/{seq}",
    tags=["approvals"],
    summary="Run an approved tool with the payload, if its SHA-256 is the approved one",
    openapi_extra=_body_schema(
        {"payload": {"type": "string", "description": "The approved input JSON as a string, byte for byte."}},
        ["payload"],
    ),
    responses={
        400: {"description": "No payload, or not a string"},
        404: {"description": "No pending request, or its tool is not imported here"},
        409: {
            "description": "Refused (not approved, expired, payload mismatch), the tool failed, or "
            "another resume of the gate is still running (status RUNNING, type "
            "SagaRunningElsewhereError, Retry-After)"
        },
    },
)
async def resume(
    sagaId: SagaIdParam, seq: SeqParam, request: Request, who: Approver, sg: SagacityDep
) -> Response:
    saga_id = _saga_id(sagaId)
    payload = _text_field(
        await _json_object(request), "payload", meaning="the approved input JSON as a string"
    )
    if payload is None:
        raise ApiError(400, {"error": "payload is required: the approved input JSON as a string"})
    try:
        result = await run_in_threadpool(partial(sg.resume, resumed_by=who.name), saga_id, seq, payload)
    except (ApprovalError, SagaStateError) as exc:
        if isinstance(exc, ApprovalNotFoundError):
            raise about(saga_id, seq, exc) from exc
        running = isinstance(exc, SagaRunningElsewhereError)  # not refused: ask again later
        # RUNNING is what the error found (a read now may find the call just ended).
        status = SagaStatus.RUNNING if running else await run_in_threadpool(sg.status, saga_id)
        body = {"sagaId": saga_id, "journalSeq": seq, "status": str(status), "reason": str(exc)}
        again = {"Retry-After": RETRY_AFTER} if running else None
        raise ApiError(409, {**body, **error_json(exc)}, again) from exc
    except SagacityError as exc:
        raise about(saga_id, seq, exc) from exc
    log.info("saga %r seq %d resumed by %r: %s", saga_id, seq, who.name, result.status)
    # Refused on the payload (journaled REJECTED) or the tool failed: either way the saga compensated.
    return JSONResponse(resume_json(saga_id, seq, result), 200 if result.error is None else 409)


@router.post(
    "/resolve/{sagaId:path}/{seq}",
    tags=["approvals"],
    summary="Settle an in-doubt INTENT: it happened or it did not (resolver: the authenticated principal)",
    openapi_extra=_body_schema(
        {
            "happened": {"type": "boolean", "description": "Whether the call (or compensation) took effect."},
            "result": {"type": "string", "description": "With happened on a call: its result, journaled."},
            "reason": {"type": "string", "description": "How you know, in one line: journaled."},
        },
        ["happened"],
    ),
)
async def resolve(
    sagaId: SagaIdParam, seq: SeqParam, request: Request, who: Approver, sg: SagacityDep
) -> dict[str, Any]:
    """The resolution runs here, in the process that serves the API: a saga that was compensating
    carries on with the tools this process has (an MCP proxy's upstream tools included), so no
    module needs importing anywhere else."""
    saga_id = _saga_id(sagaId)
    body = await _json_object(request)
    happened = body.get("happened")
    if not isinstance(happened, bool):
        raise ApiError(400, {"error": "happened is required: true (it took effect) or false (it did not)"})
    result = _text_field(body, "result", meaning="the call's result") or ""
    reason = _text_field(body, "reason", meaning="how you know") or ""
    settle = partial(sg.resolve_in_doubt, happened=happened, resolver=who.name, result=result, reason=reason)
    status = await answering(partial(about, saga_id, seq), settle, saga_id, seq)
    log.info("saga %r seq %d resolved by %r: happened=%s, now %s", saga_id, seq, who.name, happened, status)
    return {
        "sagaId": saga_id,
        "journalSeq": seq,
        "happened": happened,
        "resolver": who.name,
        "status": str(status),
    }


@router.post(
    "/reconcile",
    tags=["approvals"],
    summary="Ask the tools' reconcilers about in-doubt calls and settle what they know (docs/reconcile.md)",
    openapi_extra=_body_schema(
        {"sagaId": {"type": "string", "description": "Only this saga's calls (default: every saga's)."}},
        [],
    ),
)
async def reconcile(request: Request, who: Approver, sg: SagacityDep) -> dict[str, Any]:
    """The reconcilers run here, with this process's tools (an MCP proxy's upstream read tools
    included); each answer is journaled under the reconciler's name, not the caller's."""
    body = await _json_object(request)
    saga_id = _text_field(body, "sagaId", meaning="the saga whose calls to reconcile")
    if saga_id is not None:
        saga_id = _saga_id(saga_id)
    done = await answering(refused, sg.reconcile, saga_id)
    settled = sum(r.settled for r in done)
    log.info("reconcile asked by %r: %d call(s) asked about, %d settled", who.name, len(done), settled)
    return {"reconciled": [reconciled_json(r) for r in done]}


# -- audit (role: auditor) ----------------------------------------------------------------------
@router.get("/audit/{sagaId:path}/verify", tags=["audit"], summary="Recompute the saga's hash chain")
def verify(sagaId: SagaIdParam, who: Auditor, sg: SagacityDep) -> dict[str, Any]:
    return verification_json(sg.verify(_saga_id(sagaId)))


@router.get(
    "/audit/{sagaId:path}",
    tags=["audit"],
    summary="The saga's journal as JSON Lines (streamed)",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
def audit(sagaId: SagaIdParam, who: Auditor, sg: SagacityDep) -> StreamingResponse:
    saga_id = _saga_id(sagaId)
    lines = sg.export(saga_id)  # SagaNotFoundError (404) now, before the 200 is sent

    def body() -> Iterator[str]:
        for line in lines:
            yield line + "\n"

    return StreamingResponse(
        body(), media_type="application/x-ndjson", headers={"Content-Disposition": _attachment(saga_id)}
    )


@router.get("/sagas", tags=["audit"], summary="Sagas, most recently updated first, a page at a time")
def list_sagas(
    who: Auditor,
    sg: SagacityDep,
    status: Annotated[SagaStatus | None, Query(description="Only sagas with this status.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="Sagas per page."), Digits] = 50,
    after: Annotated[
        str | None, Query(max_length=2048, description='The "next" of the previous page: go on after it.')
    ] = None,
    prefix: Annotated[str | None, _PREFIX_QUERY] = None,
    tool: Annotated[
        str | None, Query(max_length=512, description="Only sagas whose journal has a call of this tool.")
    ] = None,
    since: Annotated[
        datetime | None,
        Query(description="Only sagas last updated at or after this ISO 8601 time (UTC without an offset)."),
    ] = None,
    until: Annotated[
        datetime | None, Query(description="Only sagas last updated before this ISO 8601 time.")
    ] = None,
    brokenChain: Annotated[
        bool | None,
        Query(description="true: only sagas whose hash chain did not verify; false: only those whose did."),
        TrueOrFalse,
    ] = None,
) -> dict[str, Any]:
    summaries = sg.sagas(
        status=status,
        limit=limit,
        after=after,
        prefix=prefix,
        tool=tool,
        since=since,
        until=until,
        broken_chain=brokenChain,
    )
    return saga_page_json(summaries, limit)


@router.get("/overview", tags=["audit"], summary="How many sagas have each status, and broken chains")
def overview(who: Auditor, sg: SagacityDep) -> dict[str, Any]:
    counts = sg.saga_counts()
    return {
        "counts": {str(k): v for k, v in sorted(counts.items())},
        "total": sum(counts.values()),
        "brokenChains": sg.broken_chain_count(),
    }


@router.get(
    "/activity",
    tags=["approvals"],
    summary="Decisions and pending approvals over the last hours, 24 buckets (read-only)",
)
def activity(
    who: Approver,
    sg: SagacityDep,
    hours: Annotated[int, Query(ge=1, le=24 * 90, description="How far back the window goes."), Digits] = 24,
) -> dict[str, Any]:
    """Read from the saga views of the sagas with a request pending now (one asked for before
    the window and still waiting updated nothing since) and those updated in the window (a
    decision or a resume is an update): at most ACTIVITY_SAGAS, most recently updated first."""
    end = utc_now()
    start = end - timedelta(hours=hours)
    pending = (r.saga_id for r in sg.pending_approvals())
    updated = (s.saga_id for s in sg.sagas(since=start, limit=ACTIVITY_SAGAS + 1))
    ids = list(dict.fromkeys(itertools.chain(pending, updated)))  # each once, pending first
    views = []
    for saga_id in ids[:ACTIVITY_SAGAS]:
        try:
            views.append(sg.view(saga_id))
        except SagaNotFoundError:  # gone between the listing and the read
            continue
    complete = len(ids) <= ACTIVITY_SAGAS
    return activity_json(views, start, end, ACTIVITY_BUCKETS, complete=complete)


@router.get("/sagas/{sagaId:path}", tags=["audit"], summary="A saga: status, journal, verification")
def saga(sagaId: SagaIdParam, who: Auditor, sg: SagacityDep) -> dict[str, Any]:
    return saga_json(_view_or_404(sg, _saga_id(sagaId)))


@router.get("/in-doubt", tags=["audit"], summary="Calls and compensations with no outcome, oldest first")
def in_doubt(who: Auditor, sg: SagacityDep) -> list[dict[str, Any]]:
    return [in_doubt_json(c) for c in sg.in_doubt()]


@router.get("/doctor", tags=["audit"], summary="What in the journal needs a human (read-only)")
def doctor(
    who: Auditor,
    sg: SagacityDep,
    olderThan: Annotated[
        int,
        Query(
            ge=0,
            le=10**9,
            description="Seconds an unfinished state must have lasted to be reported (in-doubt "
            "calls, running compensations, lost requests).",
        ),
        Digits,
    ] = int(DEFAULT_OLDER_THAN.total_seconds()),
) -> dict[str, Any]:
    older_than = timedelta(seconds=olderThan)
    return diagnosis_json(sg.diagnose(older_than=older_than), older_than)


@router.get("/switch", tags=["guardrails"], summary="The kill switch's settings in force")
def switch_status(who: Auditor, sg: SagacityDep) -> list[dict[str, Any]]:
    return [switch_json(s) for s in sg.kill_switch.in_force()]


@router.post(
    "/switch",
    tags=["guardrails"],
    summary="Halt, drain or lift (admin); journaled under the authenticated principal",
    openapi_extra=_body_schema(
        {
            "state": {"type": "string", "enum": ["halt", "drain", "lift"]},
            "tool": {"type": "string", "description": "Only this tool's calls."},
            "agent": {"type": "string", "description": "Only this agent's sagas and calls."},
            "ttl": {"type": "number", "description": "Seconds until it lifts by itself."},
            "reason": {"type": "string", "description": "Journaled with the change."},
        },
        ["state"],
    ),
)
async def set_switch(request: Request, who: Admin, sg: SagacityDep) -> dict[str, Any]:
    body = await _json_object(request)
    state = body.get("state")
    if state not in ("halt", "drain", "lift"):
        raise ApiError(400, {"error": 'state must be "halt", "drain" or "lift"'})
    ttl = body.get("ttl")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0):
        raise ApiError(400, {"error": f"ttl must be a positive number of seconds, not {ttl!r}"})
    tool = _text_field(body, "tool", meaning="the tool to halt or drain")
    agent = _text_field(body, "agent", meaning="the agent to halt or drain")
    reason = _text_field(body, "reason", meaning="why") or ""
    try:
        setting = await run_in_threadpool(
            partial(sg.kill_switch.set, state, by=who.name, tool=tool, agent=agent, ttl=ttl, reason=reason)
        )
    except InvalidValueError as exc:
        raise ApiError(400, {"error": str(exc)}) from exc
    log.warning("kill switch %s (%s) by %r", state, tool or agent or "global", who.name)
    return switch_json(setting)
