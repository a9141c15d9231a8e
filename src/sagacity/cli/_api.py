"""``--api URL``: a command that sends its decision to a Sagacity HTTP API instead of journaling it
here, so it runs in the serving process with that process's tools (an MCP proxy's upstream ones).

The API authenticates the caller: the bearer token comes from ``$SAGACITY_API_TOKEN`` (never from
the command line, which other users can read in ``ps``), and the decision is journaled under the
principal the token names. Standard library only: the core install has no HTTP client.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sagacity.cli._common import CommandError, console

if TYPE_CHECKING:
    import urllib.error

F = TypeVar("F", bound=Callable[..., Any])

#: The environment variable holding the bearer token ``--api`` sends.
TOKEN_ENV = "SAGACITY_API_TOKEN"
#: Seconds to wait for the answer: the decision may run compensations through slow tools.
TIMEOUT = 300.0


def api_option(fn: F) -> F:
    """``--api URL``: where to send the decision (env ``SAGACITY_API_URL``)."""
    return click.option(
        "--api",
        "api_url",
        metavar="URL",
        envvar="SAGACITY_API_URL",
        help="Send it to the Sagacity HTTP API at URL (an MCP proxy's --api, or `sagacity serve`; "
        "e.g. http://127.0.0.1:8000) instead of journaling it here: it runs in that process, with "
        f"its tools, under the principal of the bearer token in ${TOKEN_ENV} (env SAGACITY_API_URL).",
    )(fn)


def refuse_with_api(ctx: click.Context, **flags: str) -> None:
    """A usage error for each option given on the command line that ``--api`` makes meaningless
    (``flags``: parameter name -> why)."""
    for name, why in flags.items():
        if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
            option = next(p for p in ctx.command.params if p.name == name)
            raise click.UsageError(f"{option.opts[0]} does not go with --api: {why}")


def base_url(api_url: str) -> str:
    """The API's ``/sagacity`` root for ``api_url`` (given with or without it)."""
    parts = urllib.parse.urlsplit(api_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CommandError(f"--api must be an http(s) URL such as http://127.0.0.1:8000, got {api_url!r}")
    path = parts.path.rstrip("/")
    if not path.endswith("/sagacity"):
        path += "/sagacity"
    if parts.scheme == "http" and not _loopback(parts.hostname or "") and os.environ.get(TOKEN_ENV):
        console(stderr=True).print(
            f"warning: sending ${TOKEN_ENV} over plain HTTP to {parts.hostname}: "
            "use https beyond this machine"
        )
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def post(api_url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST ``body`` as JSON to ``path`` under the API's root; the JSON answer, or exit 2 with the
    API's own ``error``."""
    import urllib.error  # here, not at the top: http.client, email and ssl cost every --help
    import urllib.request

    root = base_url(api_url)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    token = os.environ.get(TOKEN_ENV)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        root + path, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer
    except urllib.error.HTTPError as exc:
        raise CommandError(_refusal(root, exc)) from exc
    except TimeoutError as exc:
        raise CommandError(
            f"the API at {root} did not answer within {TIMEOUT:g} s; it may still have acted: "
            "look at the saga (`sagacity sagas show`) before trying again"
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise CommandError(f"cannot reach the API at {root}: {reason}; nothing was sent") from exc


def _refusal(root: str, exc: urllib.error.HTTPError) -> str:
    try:
        error = json.loads(exc.read()).get("error")
    except (ValueError, AttributeError, OSError):
        error = None
    message = f"the API at {root} answered {exc.code}: {error or exc.reason}"
    if exc.code == 401:
        message += f" (set ${TOKEN_ENV} to a token of an approver)"
    elif exc.code == 403:
        message += " (the token's principal needs the approver role)"
    return message
