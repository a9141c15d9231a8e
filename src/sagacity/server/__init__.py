"""The HTTP API (SPEC §7, the Java starter's paths and JSON) and the approvals dashboard.

Needs the ``server`` extra (``pip install 'sagacity[server]'``)::

    from sagacity import Sagacity
    from sagacity.server import TokenAuth, create_app

    app = create_app(Sagacity("sqlite:///sagacity.db"), auth=TokenAuth.from_file("tokens.toml"))

Authenticated by default: without an authenticator (or ``$SAGACITY_TOKENS`` /
``$SAGACITY_TOKENS_FILE``) ``create_app`` refuses, unless told
``insecure_no_auth_i_know_what_i_am_doing=True``.
"""

from __future__ import annotations

from sagacity.errors import ConfigurationError

try:
    import fastapi  # noqa: F401 - probe for the extra before anything imports it
except ImportError as exc:
    raise ConfigurationError(
        "sagacity.server needs FastAPI and uvicorn: pip install 'sagacity[server]'"
    ) from exc

from sagacity.server.app import DEFAULT_MAX_BODY_BYTES, create_app
from sagacity.server.auth import (
    AuthenticationError,
    Authenticator,
    FirstOf,
    InsecureNoAuth,
    Principal,
    ProxyHeaderAuth,
    TokenAuth,
    auth_from_environment,
    hash_token,
)

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "AuthenticationError",
    "Authenticator",
    "FirstOf",
    "InsecureNoAuth",
    "Principal",
    "ProxyHeaderAuth",
    "TokenAuth",
    "auth_from_environment",
    "create_app",
    "hash_token",
]
