"""``sagacity serve``: the HTTP API and approvals dashboard on uvicorn.

Refuses to start without credentials (``--tokens-file``, ``$SAGACITY_TOKENS_FILE`` or
``$SAGACITY_TOKENS``) unless given the loudly named insecure flag: the people who approve wire
transfers must be who the journal says they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from sagacity.cli._common import CommandError, db_url_option, open_sagacity, store_timeout_callback
from sagacity.cli._options import Digits, import_option, policy_option
from sagacity.errors import ConfigurationError
from sagacity.stores import safe_url

if TYPE_CHECKING:
    from sagacity.server.auth import Authenticator

INSECURE_FLAG = "--insecure-no-auth-i-know-what-i-am-doing"


@click.command()
@db_url_option
@import_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=Digits(0, 65535), help="Port.")
@click.option(
    "--tokens-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar="SAGACITY_TOKENS_FILE",
    help="Bearer tokens and their principals, JSON or TOML (env SAGACITY_TOKENS_FILE; or put the "
    "JSON itself in SAGACITY_TOKENS). See docs/http.md.",
)
@click.option(
    "--proxy-user-header",
    metavar="HEADER",
    help="Also trust a reverse proxy's authenticated-user header (e.g. X-Forwarded-User), from "
    "--proxy-address only.",
)
@click.option(
    "--proxy-roles-header",
    metavar="HEADER",
    default="X-Forwarded-Roles",
    show_default=True,
    help="The proxy's header listing the user's roles, comma-separated.",
)
@click.option(
    "--proxy-address",
    "proxy_addresses",
    metavar="IP",
    multiple=True,
    help="The proxy's address, whose user header is trusted (repeatable; default loopback).",
)
@click.option(
    "--max-body-bytes",
    type=Digits(min=1),
    default=1 << 20,
    show_default=True,
    help="Refuse request bodies larger than this (413).",
)
@click.option(
    "--store-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    callback=store_timeout_callback,
    help="Answer 503 when the database has not answered a request within this many seconds "
    "(retries included), instead of waiting as long as the library does.",
)
@click.option(
    INSECURE_FLAG,
    "insecure",
    is_flag=True,
    help="Serve WITHOUT authentication: anyone who reaches the port approves as 'anonymous'.",
)
@policy_option
@click.option("--log-level", default="info", show_default=True, help="uvicorn's log level.")
def serve(
    db_url: str,
    host: str,
    port: int,
    tokens_file: Path | None,
    proxy_user_header: str | None,
    proxy_roles_header: str,
    proxy_addresses: tuple[str, ...],
    max_body_bytes: int,
    store_timeout: float,
    insecure: bool,
    policy: str | None,
    log_level: str,
) -> None:
    """Serve the HTTP API (/sagacity/...) and the approvals dashboard (/sagacity/ui/).

    Import the modules defining your tools with --import so approved calls can be resumed and
    rejected sagas compensated.
    """
    try:
        import uvicorn
    except ImportError as exc:
        raise CommandError(f"{exc} (pip install 'sagacity[server]')") from exc
    auth = authenticator(tokens_file, insecure, proxy_user_header, proxy_roles_header, proxy_addresses)
    if insecure:
        warn_insecure(f"{host}:{port}")
    from sagacity.server import create_app

    with open_sagacity(db_url, init_schema=True, policy=policy) as sg:
        try:
            app = create_app(
                sg,
                auth=auth,
                insecure_no_auth_i_know_what_i_am_doing=insecure,
                max_body_bytes=max_body_bytes,
                store_timeout=store_timeout,
            )
        except ConfigurationError as exc:
            raise CommandError(str(exc)) from exc
        shown = f"[{host}]" if ":" in host else host
        click.echo(
            f"Sagacity dashboard: http://{shown}:{port}/sagacity/ui/  (journal {safe_url(sg.url)})", err=True
        )
        uvicorn.run(app, host=host, port=port, log_level=log_level, lifespan="off", ws="none")


def authenticator(
    tokens_file: Path | None,
    insecure: bool,
    proxy_user_header: str | None = None,
    proxy_roles_header: str | None = None,
    proxy_addresses: tuple[str, ...] = (),
) -> Authenticator | None:
    """Who may call the HTTP API, from the command's options (None: the insecure flag was given).

    Refuses (``CommandError``) without credentials unless the insecure flag is set, and with both.
    """
    try:
        from sagacity.server import FirstOf, ProxyHeaderAuth, TokenAuth, auth_from_environment
    except (ImportError, ConfigurationError) as exc:
        raise CommandError(f"{exc} (pip install 'sagacity[server]')") from exc
    try:
        authenticators: list[Authenticator] = []
        tokens = TokenAuth.from_file(tokens_file) if tokens_file is not None else auth_from_environment()
        if tokens is not None:
            authenticators.append(tokens)
        if proxy_user_header:
            trusted = proxy_addresses or ("127.0.0.1", "::1")
            authenticators.append(
                ProxyHeaderAuth(proxy_user_header, proxy_roles_header or None, trusted_clients=trusted)
            )
    except ConfigurationError as exc:
        raise CommandError(str(exc)) from exc
    if insecure and authenticators:
        raise CommandError(f"{INSECURE_FLAG} contradicts the credentials given; drop one")
    if not insecure and not authenticators:
        raise CommandError(
            "refusing to serve without credentials: pass --tokens-file FILE (or set "
            f"SAGACITY_TOKENS_FILE / SAGACITY_TOKENS), see docs/http.md; {INSECURE_FLAG} serves "
            "without authentication"
        )
    return None if insecure else authenticators[0] if len(authenticators) == 1 else FirstOf(*authenticators)


def warn_insecure(where: str) -> None:
    """The loud warning printed when the HTTP API serves without authentication."""
    click.secho(
        f"WARNING: serving WITHOUT AUTHENTICATION. Anyone who can reach {where} can approve, "
        "reject and resume as 'anonymous'.",
        fg="red",
        bold=True,
        err=True,
    )
