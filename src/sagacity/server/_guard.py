"""What every request goes through before a route runs: who is calling, from where, how much.

The body size limit, security headers and the store's wait limit (pure ASGI middleware), the
authentication and role dependencies, the cross-site check on writes, and the strict query check
(an unknown or repeated query parameter is a 400, never silently ignored).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sagacity import Sagacity
from sagacity.server._errors import ApiError, BodyTooLargeError
from sagacity.server.auth import ADMIN, APPROVER, AUDITOR, AuthenticationError, Authenticator, Principal
from sagacity.stores import limited_wait

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


class RequestGuard:
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


def cross_origin(request: Request) -> bool:
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
    if request.method not in {"GET", "HEAD", "OPTIONS"} and cross_origin(request):
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


# -- the strict query check ------------------------------------------------------------------
def _query_names(dependant: Dependant) -> set[str]:
    """The query parameters a route declares, its dependencies' included."""
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def declared_query(request: Request) -> None:
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


async def authenticated_query(request: Request, who: Annotated[Principal, Depends(_principal)]) -> None:
    """The query check of an authenticated route: after authentication, so a stranger gets 401."""
    declared_query(request)


Anyone = Annotated[Principal, Depends(_principal)]
Approver = Annotated[Principal, Depends(_role(APPROVER))]
Auditor = Annotated[Principal, Depends(_role(AUDITOR))]
Admin = Annotated[Principal, Depends(_role(ADMIN))]
SagacityDep = Annotated[Sagacity, Depends(_sagacity)]
