"""Ed25519 keys in the C2SP signed-note text encodings, and the files that hold them.

A verifier key is one line, ``<name>+<key id hex>+<base64(0x01 || public key)>``; a signing key is
``PRIVATE+KEY+<name>+<key id hex>+<base64(0x01 || 32-byte seed)>``. The key id is the first four
bytes of SHA-256(name || "\\n" || 0x01 || public key), so it binds the name: a key cannot be passed
off under another name. Using the signed-note encodings (rather than PEM) means the keys and the
checkpoints also work with existing note tooling (e.g. Go's ``golang.org/x/mod/sumdb/note``).

``cryptography`` is imported only when a key is used, so the core library keeps its two
dependencies; a missing extra names the install command that fixes it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from sagacity.errors import CheckpointError, ConfigurationError, SignatureError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

#: Signature types (C2SP signed-note): plain Ed25519 notes, and Ed25519 cosignature/v1.
ED25519 = b"\x01"
COSIGNATURE_V1 = b"\x04"
_TYPES = {ED25519: "Ed25519", COSIGNATURE_V1: "cosignature/v1"}
_PRIVATE_PREFIX = "PRIVATE+KEY+"


def optional_module(name: str, needed_for: str, extra: str) -> ModuleType:
    """Import ``name`` from an optional extra, or raise a ConfigurationError naming the extra."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # pragma: no cover - the dev environment has every extra
        raise ConfigurationError(
            f"{needed_for} needs the '{name.split('.', maxsplit=1)[0].replace('_', '-')}' package: "
            f"pip install 'sagacity[{extra}]'"
        ) from exc


def _ed25519() -> ModuleType:
    """The ``cryptography`` Ed25519 module, or a ConfigurationError naming the extra."""
    return optional_module(
        "cryptography.hazmat.primitives.asymmetric.ed25519", "signing checkpoints", "signing"
    )


def b64decode_canonical(text: str) -> bytes:
    """Standard base64, refused unless it is the one canonical encoding of its bytes.

    Python's decoder ignores the unused low bits of the last character, so several texts decode
    alike; requiring the canonical one makes every byte of a signed or proven value significant.
    """
    raw = base64.b64decode(text, validate=True)
    if base64.b64encode(raw).decode("ascii") != text:
        raise ValueError("not canonical base64")
    return raw


def check_key_name(name: str) -> str:
    """A key name is non-empty printable text without spaces or ``+`` (the encodings split on ``+``)."""
    if not name or "+" in name or any(c.isspace() or not c.isprintable() for c in name):
        raise CheckpointError(
            f"key name {name!r} must be non-empty, without '+', spaces or control characters"
        )
    return name


def key_id(name: str, public_key: bytes, kind: bytes = ED25519) -> bytes:
    """The signed-note key id: 4 bytes binding the name, the signature type and the public key."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + kind + public_key).digest()[:4]


@dataclass(frozen=True)
class VerifierKey:
    """A shareable public key: checks checkpoint signatures (or, ``kind`` 0x04, cosignatures)."""

    name: str
    public_key: bytes
    kind: bytes = ED25519

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.public_key, self.kind)

    @property
    def is_witness(self) -> bool:
        return self.kind == COSIGNATURE_V1

    def to_text(self) -> str:
        """The one-line encoding, as written to ``NAME.pub``."""
        encoded = base64.b64encode(self.kind + self.public_key).decode("ascii")
        return f"{self.name}+{self.key_id.hex()}+{encoded}"

    @classmethod
    def from_text(cls, text: str) -> VerifierKey:
        """Parse ``<name>+<hex id>+<base64>``; the id must match the name and key."""
        parts = text.strip().split("+", 2)
        if len(parts) != 3:
            raise CheckpointError("a verifier key is <name>+<key id hex>+<base64 key>")
        name, id_hex, encoded = parts
        kind, key = _decode_key(encoded, "verifier")
        verifier = cls(check_key_name(name), key, kind)
        if verifier.key_id.hex() != id_hex.lower():
            raise CheckpointError(f"verifier key {name!r}: key id {id_hex} does not match the key")
        return verifier

    def verify(self, message: bytes, signature: bytes) -> bool:
        """True if ``signature`` is this key's Ed25519 signature of ``message``."""
        ed25519 = _ed25519()  # first: a missing extra is named, not an ImportError
        from cryptography.exceptions import InvalidSignature

        try:
            ed25519.Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True)
class SigningKey:
    """A private key: signs checkpoints. Keep its file outside the database and readable by few.

    ``kind`` 0x04 makes it a witness key, which signs C2SP cosignature/v1 messages only.
    """

    name: str
    seed: bytes
    kind: bytes = ED25519

    @classmethod
    def generate(cls, name: str, *, witness: bool = False) -> SigningKey:
        """A fresh random Ed25519 key named ``name`` (a cosigning witness's, with ``witness``)."""
        private = _ed25519().Ed25519PrivateKey.generate()
        return cls(check_key_name(name), private.private_bytes_raw(), COSIGNATURE_V1 if witness else ED25519)

    @property
    def verifier(self) -> VerifierKey:
        """The matching public key."""
        return VerifierKey(self.name, self._private().public_key().public_bytes_raw(), self.kind)

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message``."""
        signature: bytes = self._private().sign(message)
        return signature

    def _private(self) -> Ed25519PrivateKey:
        private: Ed25519PrivateKey = _ed25519().Ed25519PrivateKey.from_private_bytes(self.seed)
        return private

    def to_text(self) -> str:
        """The one-line encoding, as written to ``NAME.key``."""
        encoded = base64.b64encode(self.kind + self.seed).decode("ascii")
        return f"{_PRIVATE_PREFIX}{self.name}+{self.verifier.key_id.hex()}+{encoded}"

    @classmethod
    def from_text(cls, text: str) -> SigningKey:
        """Parse ``PRIVATE+KEY+<name>+<hex id>+<base64>``; the id must match the derived public key."""
        text = text.strip()
        if not text.startswith(_PRIVATE_PREFIX):
            raise CheckpointError("a signing key starts with PRIVATE+KEY+ (is this the .pub file?)")
        parts = text[len(_PRIVATE_PREFIX) :].split("+", 2)
        if len(parts) != 3:
            raise CheckpointError("a signing key is PRIVATE+KEY+<name>+<key id hex>+<base64 seed>")
        name, id_hex, encoded = parts
        kind, seed = _decode_key(encoded, "signing")
        key = cls(check_key_name(name), seed, kind)
        if key.verifier.key_id.hex() != id_hex.lower():
            raise CheckpointError(f"signing key {name!r}: key id {id_hex} does not match the key")
        return key

    def __repr__(self) -> str:
        # Never print the seed, not even in a traceback.
        return f"SigningKey(name={self.name!r}, key_id={self.verifier.key_id.hex()})"


def _decode_key(encoded: str, what: str) -> tuple[bytes, bytes]:
    """(signature type, 32 key bytes) from ``base64(type || key)``."""
    try:
        raw = b64decode_canonical(encoded)
    except (binascii.Error, ValueError) as exc:
        raise CheckpointError(f"{what} key: not base64 ({exc})") from exc
    if len(raw) != 33 or raw[:1] not in _TYPES:
        raise CheckpointError(
            f"{what} key: expected type 0x01 (Ed25519) or 0x04 (cosignature/v1) and 32 key bytes, "
            f"got {len(raw)} bytes"
        )
    return raw[:1], raw[1:]


# -- files ---------------------------------------------------------------------------------------
def write_key_pair(
    stem: str | os.PathLike[str], name: str | None = None, *, witness: bool = False
) -> tuple[Path, Path]:
    """Generate a key and write ``<stem>.key`` (mode 0600) and ``<stem>.pub``; never overwrites.

    The key name defaults to the file name (``keys/acme-journal`` -> ``acme-journal``);
    ``witness`` makes a cosigning witness's key (type 0x04).
    """
    stem = Path(stem)
    key = SigningKey.generate(name or stem.name, witness=witness)
    key_path, pub_path = stem.with_name(stem.name + ".key"), stem.with_name(stem.name + ".pub")
    for path in (key_path, pub_path):
        if path.exists():
            raise CheckpointError(f"{path} exists: refusing to overwrite a key")
    stem.parent.mkdir(parents=True, exist_ok=True)
    # O_EXCL: never clobber; 0600 from the first byte on (chmod afterwards would leave a window).
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        os.fchmod(out.fileno(), 0o600)  # the umask may only remove bits; make the mode exact
        out.write(key.to_text() + "\n")
    pub_path.write_text(key.verifier.to_text() + "\n", encoding="ascii")
    return key_path, pub_path


def load_signing_key(path: str | os.PathLike[str]) -> SigningKey:
    """Read a ``.key`` file written by :func:`write_key_pair`."""
    return SigningKey.from_text(_read(path, "signing key"))


def load_verifier_key(path: str | os.PathLike[str]) -> VerifierKey:
    """Read a ``.pub`` file (one verifier-key line)."""
    text = _read(path, "public key")
    if text.startswith(_PRIVATE_PREFIX):
        raise SignatureError(f"{path} is a private key: give the .pub file to verify")
    return VerifierKey.from_text(text)


def load_witness_key(path: str | os.PathLike[str]) -> VerifierKey:
    """Read a witness's ``.pub`` file; a log's own (type 0x01) key is refused, it cosigns nothing."""
    key = load_verifier_key(path)
    if not key.is_witness:
        raise CheckpointError(f"{path} is not a witness key (type 0x04, `sagacity keys generate --witness`)")
    return key


def _read(path: str | os.PathLike[str], what: str) -> str:
    try:
        return Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"cannot read {what} {path}: {exc}") from exc
