"""The connection to the upstream MCP server: stdio (a child process) or streamable HTTP.

Every call ends in one of four outcomes, and the difference matters for the journal:

* ``result`` — the upstream answered (possibly with ``isError``);
* ``unavailable`` — nothing was sent: no connection could be made (safe to retry, FAILED);
* ``rejected`` — the upstream refused the request with a protocol error (unknown tool, invalid
  params): it did not run the tool (FAILED);
* ``unknown`` — the request was sent and no answer came: the connection was lost, or the call
  timed out. The upstream may or may not have acted, so the call is *in doubt* and is never retried.

Over streamable HTTP a request whose connection could not even be opened (nothing listens: the
upstream died while the proxy sat idle) was not sent: the HTTP transport answers it at once with
an error the call reads as ``unavailable``, rather than letting the SDK report a lost connection
(which would put a call that never left in doubt). And when the upstream answers that the
session is gone (at 2025-11-25 a restarted server knows no session: "Session not found"), the
request was not processed either: as the MCP specification tells a client to, a new session is
initialized, the log says so, and the request is sent once more on it.

Each call runs under its own deadline, so a hung upstream (the SDK's HTTP client can wait forever
on a server killed mid-call) never hangs the agent. A lost connection is replaced on the next call:
one attempt at a time owns the SDK ``Client``, in its own task, so its context managers enter and
exit in the same task as anyio requires.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.stdio import stdio_client
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from mcp import Client, MCPError, StdioServerParameters

__all__ = ["CallOutcome", "Upstream", "UpstreamTarget"]

log = logging.getLogger("sagacity.mcp")

#: The JSON-RPC error the proxy's own HTTP transport answers a request with when its connection
#: could not be opened (implementation-defined range), and how its message starts.
NOT_SENT = -32050
_NOT_SENT_PREFIX = "sagacity: not sent: "
#: How the SDK and servers word "this session is gone" (HTTP 404 on a request with a session id).
_SESSION_GONE = ("session not found", "session terminated")

OutcomeKind = Literal["result", "unavailable", "rejected", "unknown", "session-gone"]


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """How one upstream call ended (see the module docstring)."""

    kind: OutcomeKind
    result: dict[str, Any] | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class UpstreamTarget:
    """Where the upstream is: a command (stdio) or a URL (streamable HTTP)."""

    command: tuple[str, ...] = ()
    url: str | None = None
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    protocol: str = "auto"

    def describe(self) -> str:
        return self.url if self.url is not None else " ".join(self.command)


def wire_result(result: types.CallToolResult) -> dict[str, Any]:
    """A tool result as the journal keeps it: content, structured content, isError (no envelope)."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    kept = {"content": dumped.get("content", []), "isError": bool(dumped.get("isError", False))}
    if "structuredContent" in dumped:
        kept["structuredContent"] = dumped["structuredContent"]
    return kept


def _leaf(exc: BaseException) -> BaseException:
    """The first error an exception group holds (task groups wrap what failed in them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    exc = _leaf(exc)
    if isinstance(exc, MCPError) and _not_sent(exc.error):  # the initialize could not be sent
        return exc.error.message.removeprefix(_NOT_SENT_PREFIX)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _not_sent(error: types.ErrorData) -> bool:
    return error.code == NOT_SENT and error.message.startswith(_NOT_SENT_PREFIX)


def _session_gone(error: types.ErrorData) -> bool:
    return error.code == types.INVALID_REQUEST and error.message.lower().startswith(_SESSION_GONE)


def _not_sent_transport() -> Any:
    """An HTTP transport that answers a JSON-RPC request whose connection could not be opened with
    a :data:`NOT_SENT` error instead of raising (which the SDK turns into a lost connection)."""
    import httpx2

    class NotSentTransport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            try:
                return await self._inner.handle_async_request(request)
            except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
                request_id = _request_id(request) if request.method == "POST" else None
                if request_id is None:
                    raise
                error = {"code": NOT_SENT, "message": f"{_NOT_SENT_PREFIX}{_describe(exc)}"}
                body = {"jsonrpc": "2.0", "id": request_id, "error": error}
                return httpx2.Response(503, json=body, request=request)

        async def aclose(self) -> None:
            await self._inner.aclose()

    return NotSentTransport()


def _request_id(request: Any) -> Any:
    """The JSON-RPC id of the request an HTTP request carries, or None (a notification)."""
    try:
        message = json.loads(request.content)
    except ValueError:
        return None
    return message.get("id") if isinstance(message, dict) else None


class _WatchedReadStream:
    """The transport's read stream, noting when it ends (the upstream went away)."""

    def __init__(self, inner: Any, ended: anyio.Event) -> None:
        self._inner = inner
        self._ended = ended

    def __getattr__(self, name: str) -> Any:  # last_context and whatever else the SDK probes for
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _Attempt:
    """One connection (or one try at making one)."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.ready = anyio.Event()  # connected, or failed to
        self.ended = anyio.Event()  # the transport's read side ended: the upstream is gone
        self.broken = anyio.Event()  # give the connection up
        self.scope = anyio.CancelScope()
        self.client: Client | None = None
        self.error = ""

    @property
    def usable(self) -> bool:
        return self.client is not None and not self.broken.is_set() and not self.ended.is_set()


class Upstream:
    """One upstream MCP server, connected on demand and reconnected after it is lost.

    ``async with Upstream(target) as upstream:`` then :meth:`list_tools` and :meth:`call`.
    """

    def __init__(self, target: UpstreamTarget, *, connect_timeout: float = 15.0) -> None:
        if bool(target.command) == (target.url is not None):
            raise ValueError("an upstream is either a command or a URL")
        self.target = target
        self.connect_timeout = connect_timeout
        self.connections = 0  # how many connections were made (1 + reconnects)
        self.sessions_renewed = 0  # how many times a gone session was replaced to send a call again
        self._attempt: _Attempt | None = None
        self._lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> Upstream:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._tg is not None
        if self._attempt is not None:
            self._attempt.broken.set()
        self._tg.cancel_scope.cancel()
        # The connection task reports its own errors; whatever the body raised goes on as it is
        # (a task group would wrap it in an ExceptionGroup).
        await self._tg.__aexit__(None, None, None)
        self._tg = None

    # -- connecting --------------------------------------------------------------------------------
    def _transport(self, ended: anyio.Event) -> AbstractAsyncContextManager[Any]:
        target = self.target

        @asynccontextmanager
        async def transport() -> AsyncIterator[tuple[Any, Any]]:
            if target.url is not None:
                import httpx2
                from mcp.client.streamable_http import streamable_http_client

                http = httpx2.AsyncClient(
                    headers=dict(target.headers),
                    timeout=httpx2.Timeout(30, read=300),
                    transport=_not_sent_transport(),
                )
                async with http, streamable_http_client(target.url, http_client=http) as (read, write):
                    yield _WatchedReadStream(read, ended), write
            else:
                params = StdioServerParameters(
                    command=target.command[0],
                    args=list(target.command[1:]),
                    env=dict(target.env),
                    cwd=target.cwd,
                )
                errlog = sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
                async with stdio_client(params, errlog=errlog) as (read, write):
                    yield _WatchedReadStream(read, ended), write

        return transport()

    async def _connect(self, attempt: _Attempt) -> None:
        with attempt.scope:
            try:
                client = Client(self._transport(attempt.ended), mode=self.target.protocol, cache=None)
                async with client:
                    attempt.client = client
                    self.connections += 1
                    attempt.ready.set()
                    with anyio.CancelScope() as watch:

                        async def stop_when_ended() -> None:
                            await attempt.ended.wait()
                            watch.cancel()

                        async with anyio.create_task_group() as tg:
                            tg.start_soon(stop_when_ended)
                            await attempt.broken.wait()
                            tg.cancel_scope.cancel()
            except Exception as exc:  # noqa: BLE001 - any failure to connect goes to the callers waiting
                attempt.error = _describe(exc)
                log.warning("upstream %s: %s", self.target.describe(), attempt.error)
            finally:
                attempt.client = None
                attempt.broken.set()
                attempt.ready.set()

    async def _connected(self) -> tuple[_Attempt, Client]:
        """A live connection, making one if needed; ``ConnectionError`` if none can be made."""
        assert self._tg is not None, "use `async with Upstream(...)`"
        async with self._lock:
            attempt = self._attempt
            if attempt is None or attempt.broken.is_set() or attempt.ended.is_set():
                if attempt is not None:
                    attempt.broken.set()
                attempt = self._attempt = _Attempt(attempt.number + 1 if attempt is not None else 1)
                self._tg.start_soon(self._connect, attempt)
        with anyio.move_on_after(self.connect_timeout):
            await attempt.ready.wait()
        client = attempt.client
        if client is None or not attempt.usable:
            if not attempt.ready.is_set():
                attempt.scope.cancel()
                raise ConnectionError(f"no connection to the upstream within {self.connect_timeout:g}s")
            raise ConnectionError(attempt.error or "the upstream connection closed")
        return attempt, client

    async def start(self) -> None:
        """Connect now (at start-up), so a wrong command or URL is reported before serving."""
        await self._connected()

    # -- using it ------------------------------------------------------------------------------------
    async def list_tools(self) -> list[types.Tool]:
        """Every tool the upstream lists (all pages)."""
        _, client = await self._connected()
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(1000):
            with anyio.fail_after(self.connect_timeout):
                page = await client.session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def call(self, name: str, arguments: dict[str, Any], *, timeout: float) -> CallOutcome:
        """Call tool ``name`` once, within ``timeout`` seconds. Never raises for the upstream's sake.

        Sent a second time only when the upstream answered that the session is gone: it did not
        process the request, and a new session is started for it (see the module docstring).
        """
        outcome = await self._call_once(name, arguments, timeout)
        if outcome.kind != "session-gone":
            return outcome
        log.warning(
            "upstream %s: its session is gone (%s), so the upstream restarted or ended it; the call "
            "to %s was not processed: starting a new upstream session and sending it again",
            self.target.describe(),
            outcome.reason,
            name,
        )
        self.sessions_renewed += 1
        outcome = await self._call_once(name, arguments, timeout)
        if outcome.kind == "session-gone":  # a new session refused at once: give up, nothing ran
            return CallOutcome("rejected", reason=f"the upstream refused the call: {outcome.reason}")
        return outcome

    async def _call_once(self, name: str, arguments: dict[str, Any], timeout: float) -> CallOutcome:
        try:
            attempt, client = await self._connected()
        except ConnectionError as exc:
            return CallOutcome("unavailable", reason=str(exc))
        request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
        try:
            with anyio.fail_after(timeout):
                # The session's own send, not Client.call_tool: the proxy passes the upstream's
                # result on as it is, and leaves checking it against the output schema to the
                # agent's client (the SDK client would raise after the upstream had acted).
                result = await client.session.send_request(request, types.CallToolResult)
        except TimeoutError:
            if self.target.url is not None:
                attempt.broken.set()  # the SDK's HTTP client may be wedged: use a fresh one next time
            return CallOutcome("unknown", reason=f"the upstream did not answer within {timeout:g}s")
        except MCPError as exc:
            error = exc.error
            if _not_sent(error):
                attempt.broken.set()  # whatever listens next is a new server: a new session
                return CallOutcome("unavailable", reason=error.message.removeprefix(_NOT_SENT_PREFIX))
            if self.target.url is not None and _session_gone(error):
                attempt.broken.set()
                return CallOutcome("session-gone", reason=f"{error.message} ({error.code})")
            if error.code == CONNECTION_CLOSED:
                attempt.broken.set()
                return CallOutcome(
                    "unknown", reason="the connection to the upstream was lost during the call"
                )
            if error.code == REQUEST_TIMEOUT:
                return CallOutcome("unknown", reason=f"the upstream did not answer in time ({error.message})")
            return CallOutcome(
                "rejected", reason=f"the upstream refused the call: {error.message} ({error.code})"
            )
        except Exception as exc:  # noqa: BLE001 - an unreadable answer after the request went out
            return CallOutcome("unknown", reason=f"the upstream's answer could not be read: {_describe(exc)}")
        return CallOutcome("result", wire_result(result))
