"""The MCP server the agent talks to: the SDK's low-level ``Server`` over the gateway.

Served over stdio (one agent, one session, the way desktop and IDE clients start servers) or
streamable HTTP (many sessions). The SDK serves both protocol eras on both transports: the
2025-11-25 handshake and the 2026-07-28 per-request envelope.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp

import sagacity.mcp._answers as answers
from sagacity import __version__
from sagacity.mcp._auth import AgentAuth, Caller
from sagacity.mcp._gateway import Gateway
from sagacity.mcp._sagas import SAGA_META_KEY, SessionlessError

__all__ = ["INSTRUCTIONS", "STDIO_SESSION", "build_server", "http_app", "serve_stdio"]

#: The session key of the (one) stdio connection.
STDIO_SESSION = "stdio"

INSTRUCTIONS = (
    "Every tool call through this server is journaled by Sagacity in a tamper-evident audit log, as "
    "part of a saga (one task). Some tools wait for a person to approve the exact arguments before "
    "they run: their answer says so; call sagacity_status later to have an approved call run and see "
    "its result. If a call fails, the work of the saga is undone. Call sagacity_commit when the "
    "task is done, or sagacity_rollback to undo it. To name the saga yourself (one id per task), "
    f'send params._meta {{"{SAGA_META_KEY}": "<id>"}} with each call.'
)


def _http_session(ctx: ServerRequestContext[Any, Any], gateway: Gateway, watched: set[str]) -> str | None:
    """The streamable-HTTP session of a request (protocol 2025-11-25), or None (2026-07-28 has none).

    The first time a session is seen, its end (client DELETE, idle timeout) is hooked to
    ``Gateway.session_closed`` through the connection's exit stack.
    """
    request = ctx.request
    headers = getattr(request, "headers", None)
    session_id = headers.get("mcp-session-id") if headers is not None else None
    if not session_id:
        return None
    key = f"http:{session_id}"
    if key not in watched:
        watched.add(key)
        # The SDK gives handlers no public handle on the connection yet (its Context.connection
        # is not what the runner builds), so reach for the session's; without it the session's
        # end simply goes unnoticed, which is the "keep" behaviour.
        stack = getattr(getattr(ctx.session, "_connection", None), "exit_stack", None)
        if stack is not None:

            async def closed() -> None:
                watched.discard(key)
                gateway.spawn(partial(gateway.session_closed, key))

            stack.push_async_callback(closed)
    return key


def _caller(ctx: ServerRequestContext[Any, Any], fixed: Caller | None) -> Caller | None:
    """Who sent the request: ``fixed`` (stdio, or the unauthenticated mode), else the principal of
    the bearer token the SDK's middleware verified; None when an HTTP request has none (which the
    middleware already answered 401, so only a misconfigured app gets here). A server connected
    in-process (no HTTP request) acts for nobody in particular."""
    if fixed is not None:
        return fixed
    scope = getattr(ctx.request, "scope", None)
    if not isinstance(scope, dict):
        return Caller(None)
    user = scope.get("user")
    token = getattr(user, "access_token", None)
    return Caller.of(token) if isinstance(token, AccessToken) else None


def build_server(
    gateway: Gateway, *, stdio_session: str | None = None, caller: Caller | None = None
) -> Server[Any]:
    """The MCP server over ``gateway``: every call of a stdio server goes to ``stdio_session``.

    ``caller``: who every request comes from (stdio, unauthenticated HTTP); without it each
    request's verified bearer token says.
    """
    watched: set[str] = set()

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await gateway.list_tools())

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        who = _caller(ctx, caller)
        if who is None:
            return answers.refused("this request carries no verified token; nothing was done")
        named = (params.meta or {}).get(SAGA_META_KEY)
        session = stdio_session if stdio_session is not None else _http_session(ctx, gateway, watched)
        try:
            book = gateway.router.resolve(named=named, session_key=session)
        except (ValueError, SessionlessError) as exc:
            return answers.refused(str(exc))
        return await gateway.dispatch(book, params.name, params.arguments or {}, who)

    return Server(
        "sagacity-mcp-proxy",
        version=__version__,
        title="Sagacity MCP proxy",
        instructions=INSTRUCTIONS,
        # The 2026-07-28 HTTP path checks Mcp-Param-* headers against the called tool's schema;
        # without this it would list the upstream's tools again on every call.
        get_tool_input_schema=gateway.input_schema,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


async def serve_stdio(
    gateway: Gateway, *, on_started: Callable[[], None] | None = None, principal: str | None = None
) -> None:
    """Serve one agent over this process's stdin and stdout until it closes them; its sagas
    belong to ``principal`` (the one who started the process), if named."""
    server = build_server(gateway, stdio_session=STDIO_SESSION, caller=Caller(principal))
    try:
        async with stdio_server() as (read, write):
            if on_started is not None:
                on_started()
            await server.run(read, write, server.create_initialization_options())
    finally:
        with anyio.CancelScope(shield=True):  # also when serving was cancelled (a signal)
            await gateway.session_closed(STDIO_SESSION)


def http_app(
    gateway: Gateway,
    *,
    auth: AgentAuth | None,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    api: ASGIApp | None = None,
) -> Starlette:
    """The streamable-HTTP app serving agents at ``path``; ``api`` (the Sagacity HTTP API and
    dashboard, routed under ``/sagacity``) answers every other path.

    ``auth``: agents must send a bearer token its verifier accepts (else 401 with
    ``WWW-Authenticate``); with an authorization server, the protected resource metadata is
    served at ``/.well-known/oauth-protected-resource<path>``. ``None`` serves agents WITHOUT
    authentication: every call then acts for nobody, on any saga it names.
    """
    if auth is None:
        server = build_server(gateway, caller=Caller(None))
        app = server.streamable_http_app(streamable_http_path=path, host=host)
    else:
        settings = AuthSettings(
            issuer_url=AnyHttpUrl(auth.authorization_server or auth.resource_url),
            resource_server_url=AnyHttpUrl(auth.resource_url) if auth.authorization_server else None,
            # Each verifier checks the audience itself (the JWT's aud, or the token's own list).
            validate_token_resource=False if auth.authorization_server else None,
            required_scopes=None,
        )
        app = build_server(gateway).streamable_http_app(
            streamable_http_path=path, host=host, auth=settings, token_verifier=auth.verifier
        )
    if api is not None:
        app.router.routes.append(Mount("/", app=api))
    return app
