"""C2SP signed notes and tlog-cosignature/v1: sign, split, verify, cosign.

A note is its text (non-empty lines, each ending in a newline), a blank line, then one or more
signature lines ``— <key name> <base64(4-byte key id || signature)>``. Verifiers ignore lines
from keys they do not know, which is what lets witnesses add their cosignatures to a checkpoint
the log signed. A cosignature/v1 signature is ``8-byte big-endian POSIX time || Ed25519`` over::

    cosignature/v1
    time <that time>
    <the note text>
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sagacity.checkpoints._keys import SigningKey, VerifierKey, b64decode_canonical
from sagacity.errors import CheckpointError, SignatureError

#: The signature line's prefix: an em dash and a space.
SIGNATURE_PREFIX = "\N{EM DASH} "
COSIGNATURE_HEADER = "cosignature/v1\n"


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


@dataclass(frozen=True, slots=True)
class SignatureLine:
    """One signature line of a note, decoded: the key name, key id and the signature bytes."""

    name: str
    key_id: bytes
    signature: bytes

    @property
    def line(self) -> str:
        return f"{SIGNATURE_PREFIX}{self.name} {b64(self.key_id + self.signature)}\n"

    def by(self, key: VerifierKey) -> bool:
        """Does this line claim to be ``key``'s (name and key id both match)?"""
        return self.name == key.name and self.key_id == key.key_id


def split_note(note: str) -> tuple[str, list[SignatureLine]]:
    """The note's text (ending in its newline) and its signature lines; malformed notes refused."""
    split = note.rfind("\n\n")
    if split < 0 or not note.endswith("\n"):
        raise CheckpointError("not a signed note: no blank line before the signatures")
    text, lines = note[: split + 1], note[split + 2 :]
    # "\n" alone ends a line: str.splitlines() would also split on other control characters
    return text, [parse_signature_line(line) for line in lines.removesuffix("\n").split("\n")]


def parse_signature_line(line: str) -> SignatureLine:
    if not line.startswith(SIGNATURE_PREFIX):
        raise CheckpointError(f"malformed signature line {line!r}")
    name, _, token = line[len(SIGNATURE_PREFIX) :].rstrip("\n").partition(" ")
    try:
        raw = b64decode_canonical(token)
    except (binascii.Error, ValueError) as exc:
        raise CheckpointError(f"signature by {name!r} is not base64") from exc
    if not name or len(raw) < 5:
        raise CheckpointError(f"malformed signature line {line!r}")
    return SignatureLine(name, raw[:4], raw[4:])


def sign_text(text: str, key: SigningKey) -> SignatureLine:
    """The log's own Ed25519 signature line over ``text``."""
    if key.verifier.is_witness:
        raise CheckpointError(f"{key.name} is a witness key: it cosigns, it does not sign checkpoints")
    return SignatureLine(key.name, key.verifier.key_id, key.sign(text.encode("utf-8")))


def join_note(text: str, signatures: Iterable[SignatureLine]) -> str:
    return text + "\n" + "".join(sig.line for sig in signatures)


def verify_text(text: str, signatures: Sequence[SignatureLine], key: VerifierKey) -> None:
    """Raise ``SignatureError`` unless one line is ``key``'s and verifies; a bad matching line fails."""
    for sig in signatures:
        if sig.by(key):
            if not key.verify(text.encode("utf-8"), sig.signature):
                raise SignatureError(
                    f"the signature by {key.name} ({key.key_id.hex()}) does not verify: "
                    "the checkpoint was altered after signing, or forged"
                )
            return
    others = ", ".join(f"{sig.name} ({sig.key_id.hex()})" for sig in signatures) or "none"
    raise SignatureError(
        f"the checkpoint is not signed by {key.name} ({key.key_id.hex()}); signatures by: {others}"
    )


def cosigned_message(text: str, timestamp: int) -> bytes:
    return f"{COSIGNATURE_HEADER}time {timestamp}\n{text}".encode()


def cosign(text: str, key: SigningKey, timestamp: int) -> SignatureLine:
    """A witness's cosignature/v1 line over a checkpoint's text, at ``timestamp`` (POSIX seconds)."""
    if not key.verifier.is_witness:
        raise CheckpointError(f"{key.name} is not a witness key (generate one with --witness)")
    if not 0 < timestamp < 2**63:
        raise CheckpointError("a cosignature's timestamp must be a positive POSIX time")
    signature = key.sign(cosigned_message(text, timestamp))
    return SignatureLine(key.name, key.verifier.key_id, struct.pack(">Q", timestamp) + signature)


def cosignature_time(text: str, sig: SignatureLine, key: VerifierKey) -> int | None:
    """The POSIX time of ``key``'s valid cosignature ``sig`` over ``text``; None if it is not one."""
    if not key.is_witness or not sig.by(key) or len(sig.signature) != 72:
        return None
    (timestamp,) = struct.unpack(">Q", sig.signature[:8])
    if timestamp == 0 or timestamp >= 2**63:
        return None
    return timestamp if key.verify(cosigned_message(text, timestamp), sig.signature[8:]) else None
