"""``create_app``: the SPEC §7 routes, the dashboard, and the rules every request goes through.

Paths and JSON field names are the Java starter's, so its clients work unchanged; what differs is
on purpose: every route needs a principal, and a decision is journaled under the principal that
made it (an ``approver`` sent in the body is accepted and ignored).

Blocking library calls never run on the event loop: ``def`` routes run in the threadpool, and
the ``async def`` routes that must read a body hand the library call to the threadpool too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sagacity import __version__
from sagacity._approvals import utc_now
from sagacity._json import encode_result, kind_of, require_storable
from sagacity._sagacity import Sagacity
from sagacity._state import GATE_TOOL, SagaState, fold, parse_decision_payload
from sagacity.chain import Verification
from sagacity.errors import (
    ApprovalError,
    ApprovalNotFoundError,
    ConfigurationError,
    InvalidValueError,
    SagacityError,
    SagaNotFoundError,
    SagaStateError,
    StoreError,
    StoreUnavailableError,
    UnknownToolError,
)
from sagacity.model import ApprovalRequest, Entry, InDoubtCall, SagaStatus, SagaSummary
from sagacity.server.auth import (
    APPROVER,
    AUDITOR,
    AuthenticationError,
    Authenticator,
    InsecureNoAuth,
    Principal,
    auth_from_environment,
)
from sagacity.stores._deadline import limited_wait

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_STORE_TIMEOUT", "create_app"]

#: Request bodies larger than this are refused with 413 while being read.
DEFAULT_MAX_BODY_BYTES = 1 << 20
#: Seconds a request waits for an unreachable database before answering 503.
DEFAULT_STORE_TIMEOUT = 5.0
#: What a 503 tells clients (a dashboard, a load balancer) about when to try again, in seconds.
RETRY_AFTER = "5"
#: The journal's seq is a BIGINT: anything larger names no entry and would overflow the driver.
MAX_SEQ = 2**63 - 1
STATIC_DIR = Path(__file__).parent / "static"

log = logging.getLogger("sagacity.server")

_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
_SECURITY_HEADERS = [
    (b"content-security-policy", _CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]
_BEARER_CHALLENGE = 'Bearer realm="sagacity"'

# Library errors by HTTP status, most specific first (SPEC §7: 404 no pending request or unknown
# tool, 409 refused, 400 bad input; a database outage is the server's 503, not the caller's fault).
_STATUS_OF: list[tuple[type[Exception], int]] = [
    (SagaNotFoundError, 404),
    (ApprovalNotFoundError, 404),
    (UnknownToolError, 404),
    (ApprovalError, 409),
    (SagaStateError, 409),
    (InvalidValueError, 400),
    (StoreError, 503),
]


def _status_of(exc: Exception) -> int:
    return next((status for cls, status in _STATUS_OF if isinstance(exc, cls)), 500)


def _headers_for(status: int) -> dict[str, str] | None:
    return {"Retry-After": RETRY_AFTER} if status == 503 else None


def _error_body(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, StoreUnavailableError):
        return {
            "error": f"the journal database is unavailable, try again shortly: {exc}",
            "type": type(exc).__name__,
        }
    return {"error": str(exc), "type": type(exc).__name__}


class ApiError(Exception):
    """An HTTP error with the JSON body to send; every body carries ``error``."""

    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        super().__init__(body.get("error", ""))
        self.status = status
        self.body = body
        self.headers = headers


class BodyTooLargeError(Exception):
    """Raised from ``receive`` the moment a body passes the limit, before it is all read."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than the limit of {limit} bytes")


class _Guard:
    """Pure ASGI middleware: body size limit while reading, security headers on every response,
    and the request's wait limit for the store.

    Pure ASGI (not ``BaseHTTPMiddleware``) so a streamed export is not buffered, the limit is
    enforced on the bytes as they arrive, whatever ``Content-Length`` claims, and the wait limit
    (a context variable) is seen by the route and by the threads it hands library calls to.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int, store_timeout: float | None) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.store_timeout = store_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with limited_wait(self.store_timeout):
            await self._guarded(scope, receive, send)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_SECURITY_HEADERS]
            await send(message)

        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            response = JSONResponse({"error": str(BodyTooLargeError(self.max_body_bytes))}, 413)
            await response(scope, receive, send_with_headers)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLargeError(self.max_body_bytes)
            return message

        await self.app(scope, limited_receive, send_with_headers)


def _iso(value: datetime | None) -> str | None:
    """Naive UTC as ISO 8601 with microseconds and ``Z`` (the export's timestamp form)."""
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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


def _cross_origin(request: Request) -> bool:
    """True for a browser request sent from another site (Fetch metadata, else Origin vs Host).

    Bearer tokens already defeat CSRF; this matters when a proxy authenticates with a cookie
    and forwards a user header, so another site must not be able to post through it.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site not in {"same-origin", "none"}
    origin = request.headers.get("origin")
    if origin is None:
        return False
    host = request.headers.get("host", "")
    return origin.split("://", 1)[-1].rstrip("/") != host


# -- who is calling --------------------------------------------------------------------------
_bearer = HTTPBearer(auto_error=False, description="A token from the tokens file or $SAGACITY_TOKENS.")


def _sagacity(request: Request) -> Sagacity:
    """The app's Sagacity (``request.app`` is this app even when it is mounted in another)."""
    sg: Sagacity = request.app.state.sagacity
    return sg


async def _principal(request: Request, _: Annotated[Any, Depends(_bearer)]) -> Principal:
    """The authenticated caller, or 401 (with a Bearer challenge); cross-site posts get 403."""
    if request.method not in {"GET", "HEAD", "OPTIONS"} and _cross_origin(request):
        raise ApiError(403, {"error": "cross-origin request refused"})
    authenticator: Authenticator = request.app.state.authenticator
    try:
        who = authenticator.authenticate(request)
    except AuthenticationError as exc:
        challenge = f'{_BEARER_CHALLENGE}, error="invalid_token"'
        raise ApiError(401, {"error": str(exc)}, {"WWW-Authenticate": challenge}) from exc
    if who is None:
        raise ApiError(
            401,
            {"error": "authentication required: send 'Authorization: Bearer <token>'"},
            {"WWW-Authenticate": _BEARER_CHALLENGE},
        )
    return who


def _role(name: str) -> Callable[[Principal], Principal]:
    def check(who: Annotated[Principal, Depends(_principal)]) -> Principal:
        if not who.has(name):
            raise ApiError(403, {"error": f"{who.name!r} does not have the {name!r} role"})
        return who

    return check


def _query_names(dependant: Dependant) -> set[str]:
    """The query parameters a route declares, its dependencies' included."""
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def _declared_query(request: Request) -> None:
    """400 for a query parameter the route does not declare, or one given twice.

    Otherwise ``?stauts=FAILED`` (misspelt) would list every saga as if unfiltered, and
    ``?status=A&status=B`` would quietly use one of the two.
    """
    route = request.scope.get("route")
    allowed = _query_names(route.dependant) if isinstance(route, APIRoute) else set()
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if name not in allowed:
            takes = f"it takes {', '.join(sorted(allowed))}" if allowed else "it takes none"
            raise ApiError(400, {"error": f"unknown query parameter {name!r} for this route ({takes})"})
        if name in seen:
            raise ApiError(400, {"error": f"query parameter {name!r} is given more than once"})
        seen.add(name)


async def _authenticated_query(request: Request, who: Annotated[Principal, Depends(_principal)]) -> None:
    """The query check of an authenticated route: after authentication, so a stranger gets 401."""
    _declared_query(request)


Anyone = Annotated[Principal, Depends(_principal)]
Approver = Annotated[Principal, Depends(_role(APPROVER))]
Auditor = Annotated[Principal, Depends(_role(AUDITOR))]
SagacityDep = Annotated[Sagacity, Depends(_sagacity)]


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
SagaIdParam = Annotated[str, PathParam(description="The saga id (may contain '/').")]
SeqParam = Annotated[
    int, PathParam(ge=1, le=MAX_SEQ, description="The seq of the AWAITING_APPROVAL entry."), Digits
]


# -- JSON shapes --------------------------------------------------------------------------------
def _approval_json(sg: Sagacity, request: ApprovalRequest, state: SagaState | None) -> dict[str, Any]:
    """SPEC §7's approval fields, plus what a human needs to decide and what resume needs."""
    spec = sg.registry.find(request.tool_name)
    gate = state.gates.get(request.journal_seq) if state is not None else None
    approvers = list(gate.approvers(request.input_hash)) if gate is not None else []
    required = spec.approvals_required if spec is not None else 1
    now = utc_now()
    expired = request.expires_at is not None and now >= request.expires_at
    return {
        "sagaId": request.saga_id,
        "journalSeq": request.journal_seq,
        "toolName": request.tool_name,
        "input": request.input,
        "inputHash": request.input_hash,
        "createdAt": _iso(request.created_at),
        "expiresAt": _iso(request.expires_at),
        "expired": expired,
        "waitingSeconds": max(0.0, (now - request.created_at).total_seconds()),
        "approvalsRequired": required,
        "approvers": approvers,
        "readyToResume": len(approvers) >= required and not expired,
        "toolImported": spec is not None,
    }


def _approvals_json(sg: Sagacity, requests: list[ApprovalRequest]) -> list[dict[str, Any]]:
    states = {sid: fold(sid, sg.entries(sid)) for sid in {r.saga_id for r in requests}}
    return [_approval_json(sg, r, states[r.saga_id]) for r in requests]


def _summary_json(s: SagaSummary) -> dict[str, Any]:
    return {
        "sagaId": s.saga_id,
        "status": str(s.status),
        "entryCount": s.entry_count,
        "startedAt": _iso(s.started_at),
        "updatedAt": _iso(s.updated_at),
        "awaitingApproval": s.awaiting_approval,
        "inDoubt": s.in_doubt,
    }


def _in_doubt_json(c: InDoubtCall) -> dict[str, Any]:
    return {
        "sagaId": c.saga_id,
        "seq": c.seq,
        "toolName": c.tool_name,
        "input": c.input,
        "startedAt": _iso(c.started_at),
        "ageSeconds": c.age.total_seconds(),
        "kind": c.kind,
        "compensatesSeq": c.compensates_seq,
    }


def _decisions_json(entries: list[Entry]) -> list[dict[str, Any]]:
    """Who decided what: each decision entry's approver and reason, read as the library reads them.

    ``approver`` is null for the library's own decisions (expiry, void, payload mismatch).
    """
    found = []
    for e in entries:
        if e.tool_name != GATE_TOOL:
            continue
        approver, reason = parse_decision_payload(e.payload)
        try:
            decided = json.loads(e.input)
        except ValueError:
            decided = None
        target = decided.get("seq") if isinstance(decided, dict) else None
        found.append(
            {
                "seq": e.seq,
                "phase": e.phase,
                "decides": target if isinstance(target, int) else None,
                "approver": approver or None,
                "reason": reason,
            }
        )
    return found


def _verification_json(v: Verification) -> dict[str, Any]:
    return {
        "valid": v.valid,
        "entryCount": v.entry_count,
        "breakAtIndex": v.break_at_index,
        "message": v.message,
    }


def _entries_or_404(sg: Sagacity, saga_id: str) -> list[Entry]:
    entries = sg.entries(saga_id)
    if not entries:
        raise ApiError(404, {"sagaId": saga_id, "error": f"no journal entries for saga {saga_id!r}"})
    return entries


def _about(saga_id: str, seq: int, exc: Exception) -> ApiError:
    """A failed decision or resume: 404/409/400 (503 for the database) naming the saga and seq."""
    status = _status_of(exc)
    if status == 503:
        _log_unavailable(exc)
    return ApiError(status, {"sagaId": saga_id, "journalSeq": seq, **_error_body(exc)}, _headers_for(status))


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

router = APIRouter(dependencies=[Depends(_authenticated_query)])


# -- approvals (role: approver) -----------------------------------------------------------------
@router.get("/me", tags=["session"], summary="The authenticated principal")
def me(who: Anyone, request: Request) -> dict[str, Any]:
    insecure = isinstance(request.app.state.authenticator, InsecureNoAuth)
    return {"name": who.name, "roles": sorted(who.roles), "insecure": insecure}


@router.get("/approvals", tags=["approvals"], summary="Every pending approval request")
def list_approvals(who: Approver, sg: SagacityDep) -> list[dict[str, Any]]:
    return _approvals_json(sg, sg.pending_approvals())


@router.get(
    "/requests/{sagaId:path}/{seq}",
    tags=["approvals"],
    summary="One pending request with its saga's journal so far (what an approver decides on)",
)
def approval_request(sagaId: SagaIdParam, seq: SeqParam, who: Approver, sg: SagacityDep) -> dict[str, Any]:
    saga_id = _saga_id(sagaId)
    entries = sg.entries(saga_id)
    request = next((q for q in sg.pending_approvals(saga_id) if q.journal_seq == seq), None)
    if request is None:
        error = f"no pending approval request for saga {saga_id!r} seq {seq}"
        raise ApiError(404, {"sagaId": saga_id, "journalSeq": seq, "error": error})
    body = _approval_json(sg, request, fold(saga_id, entries))
    body["sagaStatus"] = str(sg.status(saga_id))
    body["journal"] = [e.to_json() for e in entries]
    body["inDoubt"] = [_in_doubt_json(c) for c in sg.in_doubt(saga_id)]
    return body


@router.get("/approvals/{sagaId:path}", tags=["approvals"], summary="A saga's pending requests")
def saga_approvals(sagaId: SagaIdParam, who: Approver, sg: SagacityDep) -> list[dict[str, Any]]:
    saga_id = _saga_id(sagaId)
    _entries_or_404(sg, saga_id)
    return _approvals_json(sg, sg.pending_approvals(saga_id))


def _approve(sg: Sagacity, saga_id: str, seq: int, who: Principal) -> dict[str, Any]:
    decision = sg.approve(saga_id, seq, who.name)
    gate = fold(saga_id, sg.entries(saga_id)).gates.get(seq)
    pending = any(q.journal_seq == seq for q in sg.pending_approvals(saga_id))
    spec = sg.registry.find(gate.entry.tool_name) if gate is not None else None
    return {
        "sagaId": decision.saga_id,
        "journalSeq": decision.journal_seq,
        "approved": True,
        "approverIdentity": decision.approver,
        "decidedAt": _iso(decision.decided_at),
        "approvers": list(gate.approvers(gate.input_hash)) if gate is not None else [decision.approver],
        "approvalsRequired": spec.approvals_required if spec is not None else 1,
        "pending": pending,
    }


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
    try:
        body = await run_in_threadpool(_approve, sg, saga_id, seq, who)
    except SagacityError as exc:
        raise _about(saga_id, seq, exc) from exc
    log.info("saga %r seq %d approved by %r", saga_id, seq, who.name)
    return body


@router.post(
    "/reject/{sagaId:path}/{seq}",
    tags=["approvals"],
    summary="Journal REJECTED by the authenticated principal and compensate the saga",
    openapi_extra=_body_schema(
        {
            "reason": {"type": "string", "description": "Journaled with the decision."},
            "approver": _IGNORED_APPROVER,
        }
    ),
)
async def reject(
    sagaId: SagaIdParam, seq: SeqParam, request: Request, who: Approver, sg: SagacityDep
) -> dict[str, Any]:
    saga_id = _saga_id(sagaId)
    reason = _text_field(await _json_object(request), "reason", meaning="why it is rejected") or ""
    try:
        decision = await run_in_threadpool(sg.reject, saga_id, seq, who.name, reason)
    except SagacityError as exc:
        raise _about(saga_id, seq, exc) from exc
    log.info("saga %r seq %d rejected by %r", saga_id, seq, who.name)
    return {
        "sagaId": decision.saga_id,
        "journalSeq": decision.journal_seq,
        "approved": False,
        "approverIdentity": decision.approver,
        "decidedAt": _iso(decision.decided_at),
        "reason": decision.reason,
        "status": str(decision.result.status) if decision.result is not None else None,
    }


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
        409: {"description": "Refused (not approved, expired, payload mismatch) or the tool failed"},
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
            raise _about(saga_id, seq, exc) from exc
        status = await run_in_threadpool(sg.status, saga_id)
        body = {"sagaId": saga_id, "journalSeq": seq, "status": str(status), "reason": str(exc)}
        raise ApiError(409, {**body, **_error_body(exc)}) from exc
    except SagacityError as exc:
        raise _about(saga_id, seq, exc) from exc
    log.info("saga %r seq %d resumed by %r: %s", saga_id, seq, who.name, result.status)
    if result.error is None:
        return JSONResponse(
            {"sagaId": saga_id, "status": str(result.status), "result": encode_result(result.value)}
        )
    # Refused on the payload (journaled REJECTED) or the tool failed: either way the saga compensated.
    reason = f"{type(result.error).__name__}: {result.error}"
    body = {"sagaId": saga_id, "journalSeq": seq, "status": str(result.status), "reason": reason}
    return JSONResponse({**body, **_error_body(result.error)}, 409)


# -- audit (role: auditor) ----------------------------------------------------------------------
@router.get("/audit/{sagaId:path}/verify", tags=["audit"], summary="Recompute the saga's hash chain")
def verify(sagaId: SagaIdParam, who: Auditor, sg: SagacityDep) -> dict[str, Any]:
    return _verification_json(sg.verify(_saga_id(sagaId)))


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
) -> dict[str, Any]:
    page = sg.sagas(status=status, limit=limit, after=after)
    return {
        "sagas": [_summary_json(s) for s in page],
        "limit": limit,
        "next": page[-1].cursor if len(page) == limit else None,
    }


@router.get("/overview", tags=["audit"], summary="How many sagas have each status")
def overview(who: Auditor, sg: SagacityDep) -> dict[str, Any]:
    counts = sg.saga_counts()
    return {"counts": {str(k): v for k, v in sorted(counts.items())}, "total": sum(counts.values())}


@router.get("/sagas/{sagaId:path}", tags=["audit"], summary="A saga: status, journal, verification")
def saga(sagaId: SagaIdParam, who: Auditor, sg: SagacityDep) -> dict[str, Any]:
    saga_id = _saga_id(sagaId)
    entries = _entries_or_404(sg, saga_id)
    return {
        "sagaId": saga_id,
        "status": str(sg.status(saga_id)),
        "entryCount": len(entries),
        "verification": _verification_json(sg.verify(saga_id)),
        "entries": [e.to_json() for e in entries],
        "decisions": _decisions_json(entries),
        "pendingApprovals": _approvals_json(sg, sg.pending_approvals(saga_id)),
        "inDoubt": [_in_doubt_json(c) for c in sg.in_doubt(saga_id)],
    }


# -- errors: every one is JSON with an "error" that says what is wrong --------------------------
async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return JSONResponse(exc.body, exc.status, headers=exc.headers)


async def _too_large(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": str(exc)}, 413)


async def _invalid(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error.get("loc", ()) if part not in {"path", "query"})
        message = str(error.get("msg", "invalid"))
        problems.append(f"{where}: {message}" if where else message)
    return JSONResponse({"error": "; ".join(problems) or "invalid request"}, 400)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    return JSONResponse({"error": str(exc.detail)}, exc.status_code, headers=exc.headers)


def _log_unavailable(exc: Exception) -> None:
    """One line per request while the database is down, not a traceback per health check."""
    if isinstance(exc, StoreUnavailableError):
        log.warning("answering 503: %s", exc)
    else:
        log.error("store error", exc_info=exc)


async def _library_error(request: Request, exc: Exception) -> Response:
    status = _status_of(exc)
    if status == 503:
        _log_unavailable(exc)
    elif status >= 500:
        log.error("library error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse(_error_body(exc), status, headers=_headers_for(status))


def _resolve_auth(auth: Authenticator | None, insecure: bool) -> Authenticator:
    if insecure:
        if auth is not None:
            raise ConfigurationError("pass auth or insecure_no_auth_i_know_what_i_am_doing, not both")
        log.warning("SAGACITY HTTP API WITHOUT AUTHENTICATION: anyone who can reach it can approve")
        return InsecureNoAuth()
    if auth is None:
        auth = auth_from_environment()
    if auth is None:
        raise ConfigurationError(
            "the Sagacity HTTP API needs credentials: pass auth=TokenAuth(...), or set "
            "SAGACITY_TOKENS_FILE or SAGACITY_TOKENS (see docs/http.md); refusing to serve "
            "unauthenticated without insecure_no_auth_i_know_what_i_am_doing=True"
        )
    if not isinstance(auth, Authenticator):
        raise ConfigurationError(f"auth must have an authenticate(request) method, got {auth!r}")
    return auth


def create_app(
    sagacity: Sagacity,
    *,
    auth: Authenticator | None = None,
    insecure_no_auth_i_know_what_i_am_doing: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    prefix: str = "/sagacity",
    dashboard: bool = True,
    store_timeout: float | None = DEFAULT_STORE_TIMEOUT,
) -> FastAPI:
    """The HTTP API and dashboard over ``sagacity``, as an ASGI app you can serve or mount.

    ``auth`` decides who is calling (a :class:`~sagacity.server.TokenAuth`, a
    :class:`~sagacity.server.ProxyHeaderAuth`, both in a :class:`~sagacity.server.FirstOf`, or
    your own). Without it the tokens come from ``$SAGACITY_TOKENS_FILE`` or
    ``$SAGACITY_TOKENS``; with none of these, this refuses (``ConfigurationError``) unless
    ``insecure_no_auth_i_know_what_i_am_doing`` makes everyone an admin named ``anonymous``.
    Routes live under ``prefix``; the dashboard at ``{prefix}/ui/``.

    ``store_timeout``: seconds a request waits for an unreachable database (each read, retries
    included) before it answers 503; ``None`` waits as long as the library does for its agents.
    Once a request has journaled something it is no longer cut short (see docs/http.md).
    """
    authenticator = _resolve_auth(auth, insecure_no_auth_i_know_what_i_am_doing)
    if max_body_bytes < 1:
        raise ConfigurationError(f"max_body_bytes must be positive, got {max_body_bytes}")
    if store_timeout is not None and not store_timeout > 0:
        raise ConfigurationError(f"store_timeout must be positive seconds or None, got {store_timeout}")
    prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
    app = FastAPI(
        title="Sagacity",
        version=__version__,
        description="Approvals and audit of Sagacity sagas (SPEC §7, compatible with the Java starter).",
        openapi_url=None,  # served below, with the query check every route has
        docs_url=None,  # Swagger UI and ReDoc load scripts from a CDN, which the CSP refuses
        redoc_url=None,
    )
    app.state.sagacity = sagacity
    app.state.authenticator = authenticator
    app.include_router(router, prefix=prefix)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(BodyTooLargeError, _too_large)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(SagacityError, _library_error)
    plain = [Depends(_declared_query)]

    @app.get(f"{prefix}/openapi.json", include_in_schema=False, dependencies=plain)
    def openapi(request: Request) -> JSONResponse:
        # What FastAPI's own route does: tell clients of a mounted app where its routes are.
        schema = app.openapi()
        root_path = str(request.scope.get("root_path", "")).rstrip("/")
        if root_path and root_path not in {s.get("url") for s in schema.get("servers", [])}:
            schema = {**schema, "servers": [{"url": root_path}, *schema.get("servers", [])]}
        return JSONResponse(schema)

    if dashboard:
        # Its static files ignore query strings: links and browsers add cache-busting and
        # tracking parameters, and a file has nothing to filter.
        app.mount(f"{prefix}/ui", StaticFiles(directory=STATIC_DIR, html=True), name="dashboard")

        @app.get(prefix or "/", include_in_schema=False, dependencies=plain)
        def home(request: Request) -> RedirectResponse:
            return RedirectResponse(str(request.url_for("dashboard", path="/")))

    app.add_middleware(_Guard, max_body_bytes=max_body_bytes, store_timeout=store_timeout)
    return app
