"""What an upstream call can fail with; the names are what FAILED payloads in the journal say.

::

    SagacityError
    └── UpstreamError                 the upstream MCP server did not do what was asked
        ├── UpstreamToolError         it answered the call with isError (its own text follows)
        ├── UpstreamUnavailableError  it could not be reached: nothing was sent (also ConnectionError)
        ├── UpstreamRejectedError     it refused the request with a protocol error: the tool did not run
        └── UndoFailedError           a compensation's undo call failed, or its outcome is unknown

A call that was sent and never answered raises nothing: it is *in doubt* and its INTENT stays in
the journal without an outcome, for a human to resolve.
"""

from __future__ import annotations

from sagacity.errors import SagacityError

__all__ = [
    "UndoFailedError",
    "UpstreamError",
    "UpstreamRejectedError",
    "UpstreamToolError",
    "UpstreamUnavailableError",
]


class UpstreamError(SagacityError):
    """The upstream MCP server did not do what was asked."""


class UpstreamToolError(UpstreamError):
    """The upstream answered with ``isError``; the message is its text."""


class UpstreamUnavailableError(UpstreamError, ConnectionError):
    """The upstream could not be reached, so the call was never sent."""


class UpstreamRejectedError(UpstreamError):
    """The upstream refused the request (a JSON-RPC error): the tool did not run."""


class UndoFailedError(UpstreamError):
    """An undo call failed or its outcome is unknown: the original effect may still be live."""
