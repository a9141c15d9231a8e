"""``create_app``: the SPEC §7 routes and the dashboard behind the request guard.

Paths and JSON field names are the Java starter's, so its clients work unchanged; what differs is
on purpose: every route needs a principal, and a decision is journaled under the principal that
made it (an ``approver`` sent in the body is accepted and ignored). The routes are in
``_routes``, what every request goes through in ``_guard``, the errors in ``_errors`` and the JSON
in :mod:`sagacity._wire`, which the CLI's ``--json`` shares.
"""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.staticfiles import StaticFiles

from sagacity import Sagacity, __version__
from sagacity.errors import ConfigurationError
from sagacity.server._errors import install_error_handlers
from sagacity.server._guard import RequestGuard, declared_query
from sagacity.server._message_routes import message_router
from sagacity.server._routes import router
from sagacity.server._workflow_routes import router as workflow_router
from sagacity.server.auth import Authenticator, InsecureNoAuth, auth_from_environment
from sagacity.server.messages import Messages, messages_from_environment

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_STORE_TIMEOUT", "create_app"]

#: Request bodies larger than this are refused with 413 while being read.
DEFAULT_MAX_BODY_BYTES = 1 << 20
#: Seconds a request waits for an unreachable database before answering 503.
DEFAULT_STORE_TIMEOUT = 5.0
STATIC_DIR = Path(__file__).parent / "static"

log = logging.getLogger("sagacity.server")


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
    messages: Messages | None = None,
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

    ``messages`` turns on deciding from approval messages: Slack's callback and the email link
    pages (docs/approvals-from-messages.md); without it they come from the environment
    (``$SAGACITY_LINK_SECRET``, ``$SAGACITY_SLACK_SIGNING_SECRET``, ...), else they are off.
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
    app.include_router(workflow_router, prefix=prefix)
    app.state.messages = messages if messages is not None else messages_from_environment()
    if app.state.messages is not None:
        app.include_router(message_router, prefix=prefix)
    install_error_handlers(app)
    plain = [Depends(declared_query)]

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

    app.add_middleware(RequestGuard, max_body_bytes=max_body_bytes, store_timeout=store_timeout)
    return app
