"""Who is calling: bearer tokens mapped to principals with roles, or a trusted proxy's header.

The approver journaled for a decision is the principal authenticated here, never a name taken
from a request body. Tokens are held only as SHA-256 digests and compared in constant time, so
neither the tokens file nor the timing of a failed comparison gives a token away.

Roles: ``approver`` (list, approve, reject, resume), ``auditor`` (sagas, journals, export,
verification) and ``admin`` (everything).

The tokens file (JSON, or TOML when it ends in ``.toml``) and ``$SAGACITY_TOKENS`` (JSON) hold::

    {"tokens": {
        "sha256:<64 hex of the token>": {"name": "alice@example.com", "roles": ["approver"]},
        "<a plain token, 16 characters or more>": {"name": "audit-bot", "roles": ["auditor"]}
    }}
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from starlette.requests import Request

from sagacity.errors import ConfigurationError, SagacityError

__all__ = [
    "ADMIN",
    "APPROVER",
    "AUDITOR",
    "ROLES",
    "TOKENS_ENV",
    "TOKENS_FILE_ENV",
    "AuthenticationError",
    "Authenticator",
    "FirstOf",
    "InsecureNoAuth",
    "Principal",
    "ProxyHeaderAuth",
    "TokenAuth",
    "auth_from_environment",
    "hash_token",
]

APPROVER = "approver"
AUDITOR = "auditor"
ADMIN = "admin"
#: Every role a principal can hold; ``admin`` implies the others.
ROLES = frozenset({APPROVER, AUDITOR, ADMIN})
#: Environment variable holding the tokens document itself (JSON).
TOKENS_ENV = "SAGACITY_TOKENS"
#: Environment variable naming a tokens file (JSON or TOML).
TOKENS_FILE_ENV = "SAGACITY_TOKENS_FILE"

#: A plain token shorter than this is refused: it could be guessed.
MIN_TOKEN_LENGTH = 16
_HASHED = re.compile(r"^sha256:([0-9a-f]{64})$")
#: A principal's name is journaled as ``approver=<name>``: one line, as ``require_identity`` wants.
_NAME = re.compile(r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]{1,256}\Z")


class AuthenticationError(SagacityError):
    """Credentials were presented but are not valid (answered with 401)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: the name journaled for its decisions and the roles it holds."""

    name: str
    roles: frozenset[str]

    def has(self, role: str) -> bool:
        """True when the principal holds ``role`` or ``admin`` (which implies every role)."""
        return role in self.roles or ADMIN in self.roles


@runtime_checkable
class Authenticator(Protocol):
    """Turns a request into a principal; implement it to plug in your own scheme.

    Return ``None`` when the request carries no credentials of this kind (answered with 401),
    raise :class:`AuthenticationError` when it carries credentials that are wrong.
    """

    def authenticate(self, request: Request) -> Principal | None: ...


def hash_token(token: str) -> str:
    """The ``sha256:<hex>`` form of a token, to put in a tokens file instead of the token."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()


def _principal(name: Any, roles: Any, where: str) -> Principal:
    if not isinstance(name, str) or not _NAME.match(name) or not name.strip():
        raise ConfigurationError(
            f"{where}: name must be a non-empty string of at most 256 characters without control "
            f"characters or line separators (it is journaled as the approver), got {name!r}"
        )
    if isinstance(roles, str) or not isinstance(roles, list | tuple | frozenset | set):
        raise ConfigurationError(f"{where}: roles must be a list of {sorted(ROLES)}, got {roles!r}")
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise ConfigurationError(f"{where}: unknown role(s) {unknown!r}; roles are {sorted(ROLES)}")
    return Principal(name.strip(), frozenset(roles))


class TokenAuth:
    """``Authorization: Bearer <token>`` checked against SHA-256 digests in constant time."""

    def __init__(
        self, tokens: Mapping[str, Mapping[str, Any] | Principal], *, source: str = "tokens"
    ) -> None:
        """``tokens`` maps a plain token or ``sha256:<hex>`` to a Principal or ``{name, roles}``."""
        if not isinstance(tokens, Mapping) or not tokens:
            raise ConfigurationError(f"{source}: no tokens configured; every request would be refused")
        self._entries: list[tuple[bytes, Principal]] = []
        seen: set[bytes] = set()
        for number, (key, value) in enumerate(tokens.items(), start=1):
            where = f"{source}: token #{number}"  # never the token itself: messages reach logs
            if not isinstance(key, str):
                raise ConfigurationError(f"{where} must be a string")
            match = _HASHED.match(key)
            if match is not None:
                digest = bytes.fromhex(match.group(1))
            elif key.startswith("sha256:"):
                raise ConfigurationError(f"{where}: a hashed token is 'sha256:' and 64 lowercase hex digits")
            elif len(key) < MIN_TOKEN_LENGTH or key != key.strip():
                raise ConfigurationError(
                    f"{where}: a plain token must be at least {MIN_TOKEN_LENGTH} characters without "
                    "surrounding spaces (make one with `python -c 'import secrets; "
                    "print(secrets.token_urlsafe(32))'`)"
                )
            else:
                digest = hashlib.sha256(key.encode("utf-8")).digest()
            if digest in seen:
                raise ConfigurationError(f"{where}: the same token is listed twice")
            seen.add(digest)
            if isinstance(value, Principal):
                principal = _principal(value.name, value.roles, where)
            elif isinstance(value, Mapping):
                principal = _principal(value.get("name"), value.get("roles", []), where)
            else:
                raise ConfigurationError(f"{where}: expected {{name, roles}}, got {value!r}")
            self._entries.append((digest, principal))

    @classmethod
    def from_document(cls, document: Any, *, source: str) -> TokenAuth:
        """From a parsed ``{"tokens": {...}}`` document."""
        if not isinstance(document, Mapping) or not isinstance(document.get("tokens"), Mapping):
            raise ConfigurationError(f'{source}: expected {{"tokens": {{"<token>": {{"name", "roles"}}}}}}')
        return cls(document["tokens"], source=source)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> TokenAuth:
        """Read a tokens file: TOML when it ends in ``.toml``, JSON otherwise."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"cannot read tokens file {str(path)!r}: {exc}") from exc
        try:
            document = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except (ValueError, RecursionError) as exc:
            kind = "TOML" if path.suffix == ".toml" else "JSON"
            raise ConfigurationError(f"tokens file {str(path)!r} is not valid {kind}: {exc}") from exc
        return cls.from_document(document, source=str(path))

    @classmethod
    def from_json(cls, text: str, *, source: str = TOKENS_ENV) -> TokenAuth:
        """Parse a JSON tokens document (the form ``$SAGACITY_TOKENS`` holds)."""
        try:
            document = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ConfigurationError(f"{source} is not valid JSON: {exc}") from exc
        return cls.from_document(document, source=source)

    @property
    def principals(self) -> list[Principal]:
        """The configured principals (never their tokens)."""
        return [p for _, p in self._entries]

    def lookup(self, token: str) -> Principal | None:
        """The principal for ``token``; every entry is compared, so timing says nothing."""
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found: Principal | None = None
        for candidate, principal in self._entries:
            if hmac.compare_digest(candidate, digest) and found is None:
                found = principal
        return found

    def authenticate(self, request: Request) -> Principal | None:
        header = request.headers.get("authorization")
        if header is None:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationError("the Authorization header must be 'Bearer <token>'")
        principal = self.lookup(token.strip())
        if principal is None:
            raise AuthenticationError("the bearer token is not valid")
        return principal

    def __repr__(self) -> str:
        return f"TokenAuth({len(self._entries)} tokens)"


class ProxyHeaderAuth:
    """Trust a reverse proxy that authenticated the user and names them in a header.

    Off unless the operator opts in. Only requests from ``trusted_clients`` (the proxy's
    address; loopback by default) may use the header: anyone else sending it gets a 401. Roles
    come from ``roles_header`` (comma-separated) or, without it, ``default_roles``.
    """

    def __init__(
        self,
        user_header: str = "X-Forwarded-User",
        roles_header: str | None = "X-Forwarded-Roles",
        *,
        default_roles: Iterable[str] = (),
        trusted_clients: Iterable[str] = ("127.0.0.1", "::1"),
    ) -> None:
        self.user_header = user_header.lower()
        self.roles_header = roles_header.lower() if roles_header else None
        self.default_roles = _principal("proxy", list(default_roles), "default_roles").roles
        self.trusted_clients = frozenset(trusted_clients)

    def authenticate(self, request: Request) -> Principal | None:
        user = request.headers.get(self.user_header)
        if user is None:
            return None
        try:
            # HTTP hands header bytes over as Latin-1; proxies send names in UTF-8.
            user = user.encode("latin-1").decode("utf-8")
        except UnicodeError as exc:
            raise AuthenticationError(f"the {self.user_header} header is not UTF-8") from exc
        client = request.client.host if request.client is not None else None
        if client not in self.trusted_clients:
            raise AuthenticationError(
                f"the {self.user_header} header is only trusted from the configured proxy, not {client}"
            )
        raw = request.headers.get(self.roles_header) if self.roles_header else None
        roles = [r.strip() for r in raw.split(",") if r.strip()] if raw is not None else self.default_roles
        try:
            return _principal(user, [r for r in roles if r in ROLES], f"{self.user_header} header")
        except ConfigurationError as exc:
            raise AuthenticationError(str(exc)) from exc

    def __repr__(self) -> str:
        return f"ProxyHeaderAuth({self.user_header!r}, trusted_clients={sorted(self.trusted_clients)})"


class FirstOf:
    """Try several authenticators in order; the first that recognises the request decides."""

    def __init__(self, *authenticators: Authenticator) -> None:
        self.authenticators = authenticators

    def authenticate(self, request: Request) -> Principal | None:
        for authenticator in self.authenticators:
            principal = authenticator.authenticate(request)
            if principal is not None:
                return principal
        return None


class InsecureNoAuth:
    """Every caller is ``anonymous`` with every role: for a laptop demo, never for production."""

    principal = Principal("anonymous", frozenset({ADMIN}))

    def authenticate(self, request: Request) -> Principal | None:
        return self.principal


def auth_from_environment(environ: Mapping[str, str] | None = None) -> TokenAuth | None:
    """Tokens from ``$SAGACITY_TOKENS_FILE`` (a file) or ``$SAGACITY_TOKENS`` (JSON); else None."""
    environ = os.environ if environ is None else environ
    path = environ.get(TOKENS_FILE_ENV)
    text = environ.get(TOKENS_ENV)
    if path and text:
        raise ConfigurationError(f"set {TOKENS_FILE_ENV} or {TOKENS_ENV}, not both")
    if path:
        return TokenAuth.from_file(path)
    if text:
        return TokenAuth.from_json(text)
    return None
