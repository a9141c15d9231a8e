"""Who the agent is: the gateway's streamable-HTTP endpoint as an OAuth 2.1 resource server.

The MCP authorization specification makes an HTTP MCP server a *resource server*: it publishes
protected resource metadata (RFC 9728) naming the authorization server that issues its tokens,
accepts ``Authorization: Bearer <token>`` on every request, and answers 401 with a
``WWW-Authenticate`` header pointing at that metadata when the token is missing or not valid. The
MCP SDK does the HTTP part (``mcp.server.auth``: the bearer middleware, the 401, the metadata
route); this module supplies the SDK's ``TokenVerifier``:

* :class:`JwtVerifier`: a JWT signed by a key of a JWKS (a file, or a URL fetched and cached),
  with its issuer, audience and expiry checked, by PyJWT — never parsed by hand. PyJWT is what the
  MCP SDK itself depends on (``pyjwt[crypto]``), so the gateway adds no library to verify tokens;
  only asymmetric algorithms are accepted (a JWKS holds public keys: an ``HS256`` token "signed"
  with a public key as HMAC secret is the classic confusion attack).
* :class:`StaticTokens`: bearer tokens listed in a file, held as SHA-256 digests and compared in
  constant time (the approvals API's tokens, with scopes instead of roles), for small setups.

Either gives an ``AccessToken`` whose ``subject`` is the **principal**: the saga a call starts
belongs to it, its gates name it as requester. Scopes say what a client may do:
:data:`SCOPE_CALL` (call tools and read its saga's status), :data:`SCOPE_COMMIT`,
:data:`SCOPE_ROLLBACK`, and :data:`SCOPE_ADMIN` (act on any principal's saga).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from mcp.server.auth.provider import AccessToken

from sagacity.errors import ConfigurationError

__all__ = [
    "ALL_SCOPES",
    "OWN_SCOPES",
    "SCOPE_ADMIN",
    "SCOPE_CALL",
    "SCOPE_COMMIT",
    "SCOPE_ROLLBACK",
    "AgentAuth",
    "Caller",
    "JwtVerifier",
    "StaticTokens",
    "principal_of",
]

SCOPE_CALL = "sagacity:call"
SCOPE_COMMIT = "sagacity:commit"
SCOPE_ROLLBACK = "sagacity:rollback"
SCOPE_ADMIN = "sagacity:admin"
ALL_SCOPES = (SCOPE_CALL, SCOPE_COMMIT, SCOPE_ROLLBACK, SCOPE_ADMIN)
#: What a caller without a token may do (stdio): everything on its own sagas, nothing on others'.
OWN_SCOPES = (SCOPE_CALL, SCOPE_COMMIT, SCOPE_ROLLBACK)

#: Signature algorithms a JWKS (public keys) can verify. No ``HS*``, no ``none``.
ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
#: A principal is journaled as a line (``requester=``, the saga's start facts).
_NAME = re.compile(r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]{1,256}\Z")
_HASHED = re.compile(r"^sha256:([0-9a-f]{64})$")
MIN_TOKEN_LENGTH = 16
#: Seconds between two fetches of a JWKS URL that tokens naming unknown keys may force: a key
#: rotated in is fetched for the first token that names it; a flood of made-up ``kid``s costs the
#: key server one request a second.
REFETCH_INTERVAL = 1.0


def principal_of(token: AccessToken) -> str:
    """The principal an access token stands for: its subject (both verifiers always set one)."""
    return token.subject or token.client_id


def _scopes(value: Any, where: str) -> list[str]:
    """Scopes from a JWT's ``scope`` (space-separated, RFC 8693) or ``scp`` (a list), or a file's list."""
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, list | tuple) or not all(isinstance(s, str) for s in value):
        raise ConfigurationError(f"{where}: scopes must be a list of strings (or one space-separated string)")
    return list(value)


class JwtVerifier:
    """Bearer JWTs signed by a key of a JWKS, for one issuer and audience (the SDK's ``TokenVerifier``).

    ``jwks_file`` (a JSON Web Key Set document) or ``jwks_url`` (cached ``cache_seconds``, and
    fetched again at once when a token names a key not seen yet, at most every
    :data:`REFETCH_INTERVAL`). ``issuer`` must equal the token's ``iss``, ``audience`` be in its
    ``aud`` (the resource URL clients ask tokens for, RFC 8707), and ``exp`` must be present and
    in the future (``leeway`` seconds of clock skew; the access token's ``expires_at`` includes
    them, as the SDK's middleware checks it again). The ``sub`` claim names the principal and
    must be one line of text.
    """

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_file: str | Path | None = None,
        jwks_url: str | None = None,
        algorithms: Iterable[str] = ASYMMETRIC,
        leeway: float = 30.0,
        cache_seconds: float = 300.0,
    ) -> None:
        if (jwks_file is None) == (jwks_url is None):
            raise ConfigurationError("give the JWKS as a file or as a URL (exactly one)")
        if not issuer or not audience:
            raise ConfigurationError("a JWT verifier needs the issuer and the audience it accepts")
        allowed = tuple(algorithms)
        unsafe = [a for a in allowed if a not in ASYMMETRIC]
        if unsafe or not allowed:
            raise ConfigurationError(
                f"only asymmetric signature algorithms can be verified with a JWKS: {unsafe}"
            )
        self.issuer = issuer
        self.audience = audience
        self.algorithms = allowed
        self.leeway = leeway
        self._keys: jwt.PyJWKSet | None = None
        self._client: jwt.PyJWKClient | None = None
        self._refetch_lock = threading.Lock()
        self._refetched = float("-inf")  # when a token naming an unknown key last forced a fetch
        if jwks_file is not None:
            self._keys = _read_jwks(Path(jwks_file))
        else:
            assert jwks_url is not None
            if not jwks_url.startswith(("https://", "http://")):
                raise ConfigurationError(f"the JWKS URL must be http(s)://, not {jwks_url!r}")
            # No cooldown of PyJWT's own: it starts at every fetch, the first included, so a key
            # rotated in would be refused for its length; ``_signing_key`` limits forced fetches.
            self._client = jwt.PyJWKClient(
                jwks_url, cache_jwk_set=True, lifespan=cache_seconds, timeout=10, cooldown_duration=0
            )

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's access, or None (answered 401) when it is not a valid token for us."""
        try:
            if self._client is not None:  # may fetch the key set: off the event loop
                return await asyncio.to_thread(self._verify, token)
            return self._verify(token)
        except (jwt.PyJWTError, ConfigurationError, ValueError):
            return None

    def _signing_key(self, token: str) -> Any:
        kid = jwt.get_unverified_header(token).get("kid")
        if self._client is None:
            assert self._keys is not None
            return _one_key(self._keys.keys, kid)
        try:
            return _one_key(self._client.get_jwk_set().keys, kid)
        except jwt.InvalidKeyError:
            with self._refetch_lock:  # one forced fetch at a time, at most every REFETCH_INTERVAL
                now = time.monotonic()
                if now - self._refetched < REFETCH_INTERVAL:
                    raise
                self._refetched = now
                return _one_key(self._client.get_jwk_set(refresh=True).keys, kid)

    def _verify(self, token: str) -> AccessToken:
        claims: dict[str, Any] = jwt.decode(
            token,
            self._signing_key(token),
            algorithms=list(self.algorithms),
            audience=self.audience,
            issuer=self.issuer,
            leeway=self.leeway,
            options={"require": ["exp", "iss", "aud", "sub"]},
        )
        subject = claims["sub"]
        if not isinstance(subject, str) or not _NAME.match(subject) or not subject.strip():
            raise ValueError("the token's sub is not a one-line principal name")
        scopes = _scopes(claims.get("scope", claims.get("scp", [])), "the token")
        client = claims.get("client_id", claims.get("azp", subject))
        return AccessToken(
            token=token,
            client_id=str(client),
            scopes=scopes,
            expires_at=int(claims["exp"]) + int(self.leeway),  # accepted until then
            resource=self.audience,
            subject=subject.strip(),
            claims=claims,
        )


def _one_key(keys: Iterable[jwt.PyJWK], kid: Any) -> Any:
    """The signing key a token's ``kid`` names (with no ``kid``: the set's only one)."""
    found = [k for k in keys if k.public_key_use in ("sig", None) and (kid is None or k.key_id == kid)]
    if len(found) != 1:
        raise jwt.InvalidKeyError(f"no single key in the JWKS for kid {kid!r}")
    return found[0].key


def _read_jwks(path: Path) -> jwt.PyJWKSet:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the JWKS file {str(path)!r}: {exc}") from exc
    try:
        keys = jwt.PyJWKSet.from_dict(document)
    except (jwt.PyJWTError, TypeError, KeyError) as exc:
        raise ConfigurationError(f"{str(path)!r} is not a usable JSON Web Key Set: {exc}") from exc
    private = [k.key_id for k in keys.keys if hasattr(k.key, "private_bytes")]
    if private:
        raise ConfigurationError(
            f"{str(path)!r} holds private keys ({private}): give the gateway the public JWKS only"
        )
    return keys


#: Said when an agent tokens file looks like the approval API's (``--tokens-file``): easy to mix up.
_NOT_API_TOKENS = (
    "an agents' tokens file (--agent-tokens-file) is JSON naming scopes; the approval API's "
    "tokens with roles (TOML or JSON) go in --tokens-file, with --api"
)


class StaticTokens:
    """Bearer tokens from a file, each with its principal and scopes (the SDK's ``TokenVerifier``).

    The file (JSON)::

        {"tokens": {
            "sha256:<64 hex of the token>": {"name": "agent-a", "scopes": ["sagacity:call"]},
            "<a plain token, 16 characters or more>": {"name": "ops", "scopes": ["sagacity:admin"]}
        }}
    """

    def __init__(self, tokens: Mapping[str, Any], *, source: str = "agent tokens") -> None:
        if not isinstance(tokens, Mapping) or not tokens:
            raise ConfigurationError(f"{source}: no tokens configured; every agent would be refused")
        self._entries: list[tuple[bytes, str, list[str]]] = []
        for number, (key, value) in enumerate(tokens.items(), start=1):
            where = f"{source}: token #{number}"  # never the token itself: messages reach logs
            match = _HASHED.match(key) if isinstance(key, str) else None
            if match is not None:
                digest = bytes.fromhex(match.group(1))
            elif not isinstance(key, str) or len(key) < MIN_TOKEN_LENGTH or key != key.strip():
                raise ConfigurationError(
                    f"{where}: a token is 'sha256:<64 hex>' or a plain token of at least "
                    f"{MIN_TOKEN_LENGTH} characters without surrounding spaces"
                )
            else:
                digest = hashlib.sha256(key.encode("utf-8")).digest()
            if not isinstance(value, Mapping):
                raise ConfigurationError(f"{where}: expected {{name, scopes}}")
            if "roles" in value and "scopes" not in value:
                raise ConfigurationError(f"{where}: has roles, not scopes: {_NOT_API_TOKENS}")
            name = value.get("name")
            if not isinstance(name, str) or not _NAME.match(name) or not name.strip():
                raise ConfigurationError(f"{where}: name must be a one-line principal name, got {name!r}")
            scopes = _scopes(value.get("scopes", []), where)
            unknown = [s for s in scopes if s not in ALL_SCOPES]
            if unknown:
                raise ConfigurationError(
                    f"{where}: unknown scope(s) {unknown}; scopes are {list(ALL_SCOPES)}"
                )
            self._entries.append((digest, name.strip(), scopes))

    @classmethod
    def from_file(cls, path: str | Path) -> StaticTokens:
        path = Path(path)
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigurationError(
                f"cannot read the agent tokens file {str(path)!r} (JSON): {exc}; {_NOT_API_TOKENS}"
            ) from exc
        if not isinstance(document, Mapping) or not isinstance(document.get("tokens"), Mapping):
            raise ConfigurationError(
                f'{str(path)!r}: expected {{"tokens": {{"<token>": {{"name", "scopes"}}}}}}'
            )
        return cls(document["tokens"], source=str(path))

    async def verify_token(self, token: str) -> AccessToken | None:
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found: tuple[str, list[str]] | None = None
        for candidate, name, scopes in self._entries:  # every entry: timing says nothing
            if hmac.compare_digest(candidate, digest) and found is None:
                found = (name, scopes)
        if found is None:
            return None
        return AccessToken(token=token, client_id=found[0], scopes=list(found[1]), subject=found[0])


class Caller:
    """Who sent a ``tools/call`` and what its token lets it do.

    ``principal`` None: nobody is known (stdio without ``--principal``, or the unauthenticated
    mode), and the saga has no principal, as a library saga without one. Without ``scopes`` (stdio
    with ``--principal``) the caller is not an admin: another proxy's principal's sagas stay theirs.
    """

    __slots__ = ("principal", "scopes")

    def __init__(self, principal: str | None, scopes: Iterable[str] = OWN_SCOPES) -> None:
        self.principal = principal
        self.scopes = frozenset(scopes)

    @property
    def admin(self) -> bool:
        return SCOPE_ADMIN in self.scopes

    def missing(self, scope: str) -> str | None:
        """A refusal naming ``scope`` when the caller does not hold it (admin holds every scope)."""
        if scope in self.scopes or self.admin:
            return None
        return f"this client's token does not grant {scope!r}; nothing was done"

    @classmethod
    def of(cls, token: AccessToken) -> Caller:
        return cls(principal_of(token), token.scopes)


@dataclass(frozen=True, slots=True)
class AgentAuth:
    """How the HTTP endpoint authenticates agents: a verifier, and what its metadata publishes.

    ``resource_url`` is this endpoint's public URL (the resource clients ask tokens for);
    ``authorization_server`` the issuer that hands tokens out, named in the protected resource
    metadata (None for static tokens: no metadata is published, a 401 still says ``Bearer``).
    """

    verifier: JwtVerifier | StaticTokens
    resource_url: str
    authorization_server: str | None = None
