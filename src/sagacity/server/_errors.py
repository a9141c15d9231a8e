"""How the HTTP API fails: every error is JSON with an ``error`` saying what is wrong.

Library exceptions map to statuses here (SPEC §7: 404 no pending request or unknown tool, 409
refused, 400 bad input; 403 an approver the policy does not name for the gate; a database outage
is the server's 503, not the caller's fault).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from sagacity._wire import error_json
from sagacity.errors import (
    ApprovalError,
    ApprovalNotFoundError,
    ApproverScopeError,
    InvalidValueError,
    SagacityError,
    SagaNotFoundError,
    SagaStateError,
    StoreError,
    StoreUnavailableError,
    UnknownToolError,
)

#: What a 503 tells clients (a dashboard, a load balancer) about when to try again, in seconds.
RETRY_AFTER = "5"

log = logging.getLogger("sagacity.server")

# Library errors by HTTP status, most specific first.
_STATUS_OF: list[tuple[type[Exception], int]] = [
    (SagaNotFoundError, 404),
    (ApprovalNotFoundError, 404),
    (UnknownToolError, 404),
    (ApproverScopeError, 403),  # not this approver's to decide, whatever the gate's state
    (ApprovalError, 409),
    (SagaStateError, 409),
    (InvalidValueError, 400),
    (StoreError, 503),
]


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


def status_of(exc: Exception) -> int:
    return next((status for cls, status in _STATUS_OF if isinstance(exc, cls)), 500)


def _headers_for(status: int) -> dict[str, str] | None:
    return {"Retry-After": RETRY_AFTER} if status == 503 else None


def _log_unavailable(exc: Exception) -> None:
    """One line per request while the database is down, not a traceback per health check."""
    if isinstance(exc, StoreUnavailableError):
        log.warning("answering 503: %s", exc)
    else:
        log.error("store error", exc_info=exc)


def about(saga_id: str, seq: int, exc: Exception) -> ApiError:
    """A failed decision or resume: 404/409/400 (503 for the database) naming the saga and seq."""
    named = refused(exc)
    return ApiError(named.status, {"sagaId": saga_id, "journalSeq": seq, **named.body}, named.headers)


def refused(exc: Exception) -> ApiError:
    """A library error answered: its status (503 for the database) and what is wrong."""
    status = status_of(exc)
    if status == 503:
        _log_unavailable(exc)
    return ApiError(status, error_json(exc), _headers_for(status))


P = ParamSpec("P")
T = TypeVar("T")


async def answering(
    refusal: Callable[[SagacityError], ApiError], call: Callable[P, T], *args: P.args, **kwargs: P.kwargs
) -> T:
    """``call(*args, **kwargs)`` in the threadpool (journal I/O must not block the event loop),
    a library error it raises answered as ``refusal`` says (naming the saga and seq, or the run
    and stage): the one shape of every decision a route journals."""
    try:
        return await run_in_threadpool(call, *args, **kwargs)
    except SagacityError as exc:
        raise refusal(exc) from exc


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


async def _library_error(request: Request, exc: Exception) -> Response:
    status = status_of(exc)
    if status == 503:
        _log_unavailable(exc)
    elif status >= 500:
        log.error("library error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse(error_json(exc), status, headers=_headers_for(status))


def install_error_handlers(app: FastAPI) -> None:
    """Answer every failure with a JSON body and the status that names it."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(BodyTooLargeError, _too_large)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(SagacityError, _library_error)
