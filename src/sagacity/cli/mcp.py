"""``sagacity mcp``: put Sagacity in front of any MCP server, with no code (docs/mcp.md).

Needs the ``mcp`` extra; without it the commands say which ``pip install`` fixes it. The proxy
speaks MCP to the agent (stdio, or streamable HTTP with ``--listen``) and to the upstream server
(the command after ``--``, or ``--upstream-url``), and journals every ``tools/call`` in the hash
chain on the way.
"""

from __future__ import annotations

import contextlib
import errno
import json
import re
import signal
import socket
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from sagacity.cli._common import CommandError, console, db_option
from sagacity.cli._options import echo_json, json_option
from sagacity.cli.serve import INSECURE_FLAG
from sagacity.errors import ConfigurationError, SagacityError

if TYPE_CHECKING:
    from sagacity.mcp import GatewayPolicy, UpstreamTarget

EXTRA_HINT = "pip install 'sagacity[mcp]'"
#: The flag that serves agents on --listen without authentication (named to be noticed).
AGENTS_INSECURE_FLAG = "--insecure-unauthenticated-agents-i-know-what-i-am-doing"
#: What tells the two tokens files apart, for the errors of a command line that mixed them up.
_WHICH_TOKENS = (
    "agents' bearer tokens (with scopes) go in --agent-tokens-file; --tokens-file holds the tokens "
    "of the approval API and dashboard that --api serves"
)
_ADDRESS = re.compile(r"^(?:(?P<host>\[[0-9a-fA-F:.]+\]|[^:\[\]]+):)?(?P<port>\d{1,5})$")


def _require_extra() -> None:
    try:
        import sagacity.mcp  # noqa: F401 - probes for the SDK
    except (ImportError, ConfigurationError) as exc:
        raise CommandError(f"the MCP gateway needs the MCP Python SDK: {EXTRA_HINT} ({exc})") from exc


def _address(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, int] | None:
    """``[HOST:]PORT`` (an IPv6 host in brackets) as (host, port); the host defaults to loopback."""
    if value is None:
        return None
    match = _ADDRESS.match(value.strip())
    if match is None or not 0 < int(match.group("port")) < 65536:
        raise click.BadParameter(f"{value!r} is not [HOST:]PORT, e.g. 127.0.0.1:8765 or 8765")
    host = (match.group("host") or "127.0.0.1").strip("[]")
    return host, int(match.group("port"))


def _load(
    policy_path: Path, command: tuple[str, ...], upstream_url: str | None
) -> tuple[GatewayPolicy, UpstreamTarget]:
    """The policy, and the upstream: the command line's wins over the policy's [upstream]."""
    _require_extra()
    from sagacity.mcp import PolicyError, UpstreamTarget, load_gateway_policy

    try:
        policy = load_gateway_policy(policy_path)
    except PolicyError as exc:
        raise CommandError(str(exc)) from exc
    up = policy.upstream
    if command and upstream_url:
        raise CommandError("give the upstream as a command after -- or as --upstream-url, not both")
    if command:
        argv, url = tuple(command), None
    elif upstream_url:
        argv, url = (), upstream_url
    else:
        argv, url = up.command, up.url
    if not argv and url is None:
        raise CommandError(
            "no upstream server: put its command after -- (sagacity mcp proxy --policy P -- npx server), "
            "or pass --upstream-url URL, or set [upstream] command / url in the policy"
        )
    if url is not None and not url.startswith(("http://", "https://")):
        raise CommandError(f"--upstream-url must be an http:// or https:// URL, not {url!r}")
    target = UpstreamTarget(
        command=argv, url=url, cwd=up.cwd, env=dict(up.env), headers=dict(up.headers), protocol=up.protocol
    )
    return policy, target


UPSTREAM_ARGS = click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND [ARGS]...]")
POLICY = click.option(
    "--policy",
    "policy_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The policy file (TOML): what each upstream tool is, how to undo it. See docs/mcp.md.",
)
UPSTREAM_URL = click.option(
    "--upstream-url",
    metavar="URL",
    help="Reach the upstream over streamable HTTP at URL instead of a command.",
)


@click.group()
def mcp() -> None:
    """The MCP gateway: journal, gate and compensate the tools of any MCP server.

    Needs the mcp extra (pip install 'sagacity[mcp]').
    """


@mcp.command(context_settings={"allow_interspersed_args": False})
@POLICY
@UPSTREAM_URL
@db_option
@click.option(
    "--listen",
    metavar="[HOST:]PORT",
    callback=_address,
    help="Serve agents over streamable HTTP at http://HOST:PORT/mcp instead of stdio (HOST defaults to "
    "127.0.0.1).",
)
@click.option(
    "--path", "mcp_path", default="/mcp", show_default=True, help="The MCP endpoint's path with --listen."
)
@click.option(
    "--api",
    is_flag=True,
    help="Also serve the Sagacity HTTP API and dashboard (/sagacity/...) in this process, so approvals, "
    "rejections and resumes run through this proxy's upstream: on the --listen port, else on --api-listen.",
)
@click.option(
    "--api-listen",
    metavar="[HOST:]PORT",
    default="127.0.0.1:8000",
    show_default=True,
    callback=_address,
    help="Where --api serves when the agent side is stdio.",
)
@click.option(
    "--tokens-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar="SAGACITY_TOKENS_FILE",
    help="Bearer tokens of the people using --api, as for `sagacity serve` (env SAGACITY_TOKENS_FILE or "
    "SAGACITY_TOKENS); agents' tokens go in --agent-tokens-file.",
)
@click.option(INSECURE_FLAG, "insecure", is_flag=True, help="Serve --api WITHOUT authentication.")
@click.option(
    "--settle-interval",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="Seconds between sweeps that run approved calls of this proxy's sagas (0: only when the agent "
    "asks, with sagacity_status or by sending the call again).",
)
@click.option(
    "--jwks-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="With --listen: agents send bearer JWTs signed by a key of this JSON Web Key Set (public keys).",
)
@click.option("--jwks-url", metavar="URL", help="With --listen: the JWKS at this URL (fetched and cached).")
@click.option(
    "--issuer", metavar="URL", help="The issuer (iss) every JWT must name; with --jwks-file/--jwks-url."
)
@click.option(
    "--audience",
    metavar="TEXT",
    help="The audience (aud) every JWT must hold; default: the resource URL.",
)
@click.option(
    "--resource-url",
    metavar="URL",
    help="This endpoint's public URL, published in the protected resource metadata; default "
    "http://HOST:PORT/PATH of --listen.",
)
@click.option(
    "--authorization-server",
    metavar="URL",
    help="The authorization server named in the protected resource metadata; default: --issuer.",
)
@click.option(
    "--agent-tokens-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="With --listen: static bearer tokens for agents, each with its principal and scopes (JSON; not "
    "--tokens-file, which is --api's).",
)
@click.option(
    AGENTS_INSECURE_FLAG,
    "agents_insecure",
    is_flag=True,
    help="Serve agents on --listen WITHOUT authentication: anyone who reaches it calls every upstream tool.",
)
@click.option(
    "--pin-tools",
    is_flag=True,
    help="Pin the upstream's tool list at first sight: a tool whose name, description or input schema "
    "changes later (a rug pull), or that appears later, is refused.",
)
@click.option(
    "--principal",
    metavar="NAME",
    help="On stdio: the principal the agent's sagas belong to (the person who started it).",
)
@click.option(
    "--policy-poll",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="Seconds between checks of the policy file for a change; its guardrails rules are then "
    "reloaded (SIGHUP reloads at once; 0: only on SIGHUP).",
)
@click.option("--log-level", default="warning", show_default=True, help="Log level (stderr).")
@UPSTREAM_ARGS
def proxy(
    policy_path: Path,
    upstream_url: str | None,
    db_url: str,
    listen: tuple[str, int] | None,
    mcp_path: str,
    api: bool,
    api_listen: tuple[str, int],
    tokens_file: Path | None,
    insecure: bool,
    settle_interval: float,
    jwks_file: Path | None,
    jwks_url: str | None,
    issuer: str | None,
    audience: str | None,
    resource_url: str | None,
    authorization_server: str | None,
    agent_tokens_file: Path | None,
    agents_insecure: bool,
    pin_tools: bool,
    principal: str | None,
    policy_poll: float,
    log_level: str,
    command: tuple[str, ...],
) -> None:
    """Serve the upstream MCP server's tools to agents, journaled, gated and compensated.

    The upstream is the command after -- (run over stdio, e.g. `-- npx -y payments-mcp`) or
    --upstream-url. Agents connect over stdio (put this command in a desktop client's MCP
    config) or, with --listen, over streamable HTTP. Both protocol versions in use (2025-11-25
    and 2026-07-28) are served. Nothing is written to stdout but MCP messages.

    Over HTTP the agent endpoint is an OAuth 2.1 resource server: give --jwks-file or --jwks-url
    with --issuer (bearer JWTs), or --agent-tokens-file (static tokens); the token's principal
    owns the sagas its calls start.

    The policy's guardrails ([guardrails], [[rules]]) are reloaded while it runs: on SIGHUP, and
    when the file changes (--policy-poll). The new text is checked whole and journaled on the
    sagacity:policy chain; a text that does not parse or changes the gateway's own tables is
    refused, journaled, and every call is denied until the file is fixed.
    """
    from sagacity.cli.serve import authenticator, warn_insecure

    policy, target = _load(policy_path, command, upstream_url)
    given = click.get_current_context().get_parameter_source("tokens_file")
    if tokens_file is not None and not api and given is click.core.ParameterSource.COMMANDLINE:
        raise CommandError(f"--tokens-file is for --api (approvers' tokens, with roles); {_WHICH_TOKENS}")
    agent_auth = None
    if listen is not None:
        agent_auth = _agent_auth(
            listen,
            mcp_path,
            jwks_file=jwks_file,
            jwks_url=jwks_url,
            issuer=issuer,
            audience=audience,
            resource_url=resource_url,
            authorization_server=authorization_server,
            tokens_file=agent_tokens_file,
            insecure=agents_insecure,
            api_tokens_file=tokens_file if api else None,
        )
    elif jwks_file or jwks_url or agent_tokens_file or agents_insecure:
        raise CommandError(
            "agent authentication options apply to --listen (stdio has no tokens: use --principal)"
        )
    auth = authenticator(tokens_file, insecure) if api else None
    if api and insecure:
        warn_insecure("the --api address")
    _configure_logging(log_level)
    # The ports first, before the upstream starts or the agent is served: a port another process
    # holds (a second proxy with --api on the same one) is one clear error now, not a traceback
    # later while the agent only sees its connection close.
    if listen is not None:
        sockets = [_bind(listen, "--listen")]
    else:
        sockets = [_bind(api_listen, "--api-listen")] if api else []
    import anyio

    try:
        anyio.run(
            _serve,
            policy,
            target,
            db_url,
            listen,
            mcp_path,
            sockets,
            api_listen if api else None,
            auth,
            insecure,
            settle_interval,
            log_level,
            agent_auth,
            principal,
            pin_tools,
            policy_path,
            policy_poll,
        )
    except* SagacityError as group:
        raise CommandError("; ".join(f"{type(e).__name__}: {e}" for e in group.exceptions)) from group
    except* (ConnectionError, OSError) as group:
        first = group.exceptions[0]
        raise CommandError(f"cannot reach the upstream {target.describe()}: {first}") from group


def _configure_logging(level: str) -> None:
    import logging

    logging.basicConfig(
        stream=sys.stderr, level=level.upper(), format="sagacity-mcp %(levelname)s %(message)s"
    )


async def _serve(
    policy: GatewayPolicy,
    target: UpstreamTarget,
    db_url: str,
    listen: tuple[str, int] | None,
    mcp_path: str,
    sockets: list[socket.socket],
    api_at: tuple[str, int] | None,
    auth: Any,
    insecure: bool,
    settle_interval: float,
    log_level: str,
    agent_auth: Any,
    principal: str | None,
    pin_tools: bool,
    policy_path: Path,
    policy_poll: float,
) -> None:
    import anyio

    from sagacity.mcp import Gateway, http_app, serve_stdio
    from sagacity.stores import safe_url

    async with Gateway.open(
        policy,
        target,
        db_url=db_url,
        settle_interval=settle_interval or None,
        pin_tools=pin_tools,
        policy_path=policy_path,
        policy_poll=policy_poll or None,
    ) as gw:
        api_app = None
        if api_at is not None:
            from sagacity.server import create_app

            api_app = create_app(gw.sagacity, auth=auth, insecure_no_auth_i_know_what_i_am_doing=insecure)
        journal = safe_url(gw.sagacity.url)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_reload_on_sighup, gw)
            if listen is not None:
                host, port = listen
                app = http_app(gw, auth=agent_auth, path=mcp_path, host=host, api=api_app)
                server = _uvicorn(app, host, port, log_level, lifespan="on")
                tg.start_soon(_stop_on_signals, tg.cancel_scope, server)
                click.echo(
                    f"Sagacity MCP proxy: http://{_shown(host)}:{port}{mcp_path}  (journal {journal})",
                    err=True,
                )
                if api_app is not None:
                    click.echo(f"Sagacity dashboard: http://{_shown(host)}:{port}/sagacity/ui/", err=True)
                await server.serve(sockets=sockets)
            else:
                tg.start_soon(_stop_on_signals, tg.cancel_scope, None)
                if api_app is not None and api_at is not None:
                    api_server = _uvicorn(api_app, api_at[0], api_at[1], log_level, lifespan="off")
                    tg.start_soon(partial(api_server.serve, sockets=sockets))
                    click.echo(
                        f"Sagacity dashboard: http://{_shown(api_at[0])}:{api_at[1]}/sagacity/ui/", err=True
                    )
                click.echo(
                    f"Sagacity MCP proxy on stdio for {target.describe()} (journal {journal})", err=True
                )
                await serve_stdio(gw, principal=principal)
            tg.cancel_scope.cancel()


def _agent_auth(
    listen: tuple[str, int],
    path: str,
    *,
    jwks_file: Path | None,
    jwks_url: str | None,
    issuer: str | None,
    audience: str | None,
    resource_url: str | None,
    authorization_server: str | None,
    tokens_file: Path | None,
    insecure: bool,
    api_tokens_file: Path | None = None,
) -> Any:
    """How --listen authenticates agents (None: the loud insecure flag), or a CommandError."""
    from sagacity.mcp import AgentAuth, JwtVerifier, StaticTokens

    chosen = [bool(jwks_file or jwks_url), tokens_file is not None, insecure]
    if sum(chosen) != 1:
        mixed = f" ({_WHICH_TOKENS})" if api_tokens_file is not None and not any(chosen) else ""
        raise CommandError(
            "--listen needs agent authentication: --jwks-file or --jwks-url with --issuer (bearer JWTs), "
            "or --agent-tokens-file (static tokens); or, to serve agents unauthenticated, "
            f"{AGENTS_INSECURE_FLAG} (exactly one of these){mixed}"
        )
    if insecure:
        click.secho(
            "WARNING: serving agents WITHOUT AUTHENTICATION. Anyone who can reach the --listen address "
            "can call every upstream tool through this proxy and act on any saga it names.",
            fg="red",
            bold=True,
            err=True,
        )
        return None
    host, port = listen
    resource = resource_url or f"http://{_shown(host)}:{port}{path}"
    try:
        if tokens_file is not None:
            return AgentAuth(StaticTokens.from_file(tokens_file), resource)
        if not issuer:
            raise CommandError("--jwks-file / --jwks-url need --issuer: the iss every token must name")
        verifier = JwtVerifier(
            issuer=issuer, audience=audience or resource, jwks_file=jwks_file, jwks_url=jwks_url
        )
    except ConfigurationError as exc:
        raise CommandError(str(exc)) from exc
    return AgentAuth(verifier, resource, authorization_server or issuer)


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _bind(address: tuple[str, int], option: str) -> socket.socket:
    """A listening socket on ``address``, or a one-line error saying who holds it and what to do."""
    host, port = address
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, where = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(where)
            sock.listen(128)
        except OSError:
            sock.close()
            raise
    except OSError as exc:
        held = (
            " (another process, perhaps another proxy, is listening there)"
            if exc.errno == errno.EADDRINUSE
            else ""
        )
        raise CommandError(
            f"cannot listen on {_shown(host)}:{port} ({option}): {exc.strerror or exc}{held}; "
            f"choose another port with {option} HOST:PORT"
        ) from exc
    sock.set_inheritable(True)
    return sock


def _uvicorn(app: Any, host: str, port: int, log_level: str, *, lifespan: Literal["on", "off"]) -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # The proxy handles signals itself (and shuts the gateway down cleanly); uvicorn's
            # handler would re-raise the signal after serving and kill the process mid-cleanup.
            yield

    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan=lifespan, ws="none")
    return Server(config)


async def _reload_on_sighup(gw: Any) -> None:
    """SIGHUP: re-read the policy file now (its guardrails rules), saying what came of it on stderr."""
    import anyio

    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        async for _ in signals:
            click.echo(f"Sagacity MCP proxy: policy reload: {await gw.reload_policy()}", err=True)


async def _stop_on_signals(scope: Any, server: Any) -> None:
    """SIGINT / SIGTERM: let the HTTP server finish its requests (a second signal cuts it short), or
    stop serving stdio; either way the gateway then closes cleanly (sessions, upstream, journal)."""
    import anyio

    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            if server is not None and not server.should_exit:
                server.should_exit = True
            else:
                scope.cancel()


@mcp.command(context_settings={"allow_interspersed_args": False})
@POLICY
@UPSTREAM_URL
@json_option
@UPSTREAM_ARGS
def check(policy_path: Path, upstream_url: str | None, as_json: bool, command: tuple[str, ...]) -> None:
    """Check a policy against the upstream's tools and show what the proxy will do with each.

    Connects to the upstream (the command after --, or --upstream-url), lists its tools and
    prints each one's kind (read-only, compensatable, irreversible, hidden), its undo, the read
    tool that looks its calls up after a crash (reconcile), and why.
    Exit status 2 when the policy is malformed or names undo tools the upstream lacks.
    """
    policy, target = _load(policy_path, command, upstream_url)
    import anyio

    try:
        rows, problems = anyio.run(_check, policy, target)
    except (ConnectionError, OSError) as exc:
        raise CommandError(f"cannot reach the upstream {target.describe()}: {exc}") from exc
    if as_json:
        echo_json({"tools": rows, "problems": problems})
    else:
        from rich.table import Table

        table = Table("tool", "kind", "undo", "reconcile", "approvals", "why")
        for row in rows:
            table.add_row(
                row["tool"],
                row["kind"],
                row["undo"] or "-",
                row["reconcile"] or "-",
                str(row["approvals"] or "-"),
                row["why"],
            )
        console().print(table)
        for problem in problems:
            click.echo(f"problem: {problem}", err=True)
    if problems:
        sys.exit(2)


async def _check(policy: GatewayPolicy, target: UpstreamTarget) -> tuple[list[dict[str, Any]], list[str]]:
    from sagacity.mcp import PROXY_TOOLS, ToolKind, Upstream

    async with Upstream(target, connect_timeout=policy.upstream.connect_timeout) as upstream:
        await upstream.start()
        listing = await upstream.list_tools()
    rows = []
    for tool in listing:
        hint = tool.annotations.read_only_hint if tool.annotations else None
        d = policy.decide(tool.name, read_only_hint=hint)
        undo = lookup = None
        if d.undo is not None:
            undo = f"{d.undo.tool} {json.dumps(d.undo.arguments.placeholders())}"
        if d.reconcile is not None:
            lookup = f"{d.reconcile.tool} {json.dumps(d.reconcile.arguments.placeholders())}"
        rows.append(
            {
                "tool": tool.name,
                "kind": d.kind.value,
                "undo": undo,
                "reconcile": lookup,
                "approvals": d.approvals if d.kind is ToolKind.IRREVERSIBLE else None,
                "why": d.why,
            }
        )
    problems = policy.problems_with([t.name for t in listing])
    problems += [
        f"the upstream has a tool named {t.name!r}, the proxy's own" for t in listing if t.name in PROXY_TOOLS
    ]
    return rows, problems
