"""Verify a Sagacity evidence bundle offline: ``python -m sagacity.verify_bundle BUNDLE --key PUB``.

This file stands alone on purpose. It depends on the standard library and ``cryptography`` only,
and imports nothing else from Sagacity, so an auditor can read all of it, copy it out of the
package and run it (``python verify_bundle.py BUNDLE --key PUB``) without trusting the rest of
the library that wrote the evidence. That is why the chain rule (SPEC §3), the Merkle rules and
the signed-note parsing are *duplicated* here from ``sagacity.chain`` and
``sagacity.checkpoints``: the one deliberate duplication in the code base. The test suite checks
both copies against the same bundles. Format: ``docs/checkpoints.md``.

Exit status: 0 when the signature, every proof and every chain verify; 1 with a message naming
what failed otherwise; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import sys
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

BUNDLE_FORMAT = "sagacity-bundle/v1"
GENESIS = "0" * 64
PHASES = frozenset(
    {
        "INTENT",
        "EXECUTED",
        "FAILED",
        "COMPENSATED",
        "COMPENSATION_FAILED",
        "AWAITING_APPROVAL",
        "APPROVED",
        "REJECTED",
    }
)
FIELDS = ("sagaId", "seq", "toolName", "phase", "input", "payload", "timestamp", "hash")
EPOCH = datetime(1970, 1, 1)
MICROSECOND = timedelta(microseconds=1)


class BundleError(Exception):
    """The bundle does not verify; the message says where."""


def b64decode_canonical(text: str) -> bytes:
    """Standard base64, refused unless it is the one canonical encoding of its bytes.

    Python's decoder ignores the unused low bits of the last character, so several texts decode
    alike; requiring the canonical one makes every byte of a signed or proven value significant.
    """
    raw = base64.b64decode(text, validate=True)
    if base64.b64encode(raw).decode("ascii") != text:
        raise ValueError("not canonical base64")
    return raw


# -- the chain rule (SPEC §3) ---------------------------------------------------------------------
def frame(value: str) -> bytes:
    data = value.encode("utf-8")
    return str(len(data)).encode("ascii") + b":" + data


def ts_field(export_timestamp: str) -> str:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ`` -> ``"<epoch seconds>.<6-digit microseconds>"``."""
    moment = datetime.strptime(export_timestamp, "%Y-%m-%dT%H:%M:%S.%fZ")
    seconds, micros = divmod((moment - EPOCH) // MICROSECOND, 1_000_000)
    return f"{seconds}.{micros:06d}"


def entry_hash(prev: str, entry: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    for field in (
        prev,
        entry["sagaId"],
        str(entry["seq"]),
        entry["toolName"],
        entry["phase"],
        entry["input"],
        entry["payload"],
        ts_field(entry["timestamp"]),
    ):
        digest.update(frame(field))
    return digest.hexdigest()


def parse_entry(line: str, where: str) -> dict[str, Any]:
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as exc:
        raise BundleError(f"{where}: not JSON ({exc})") from exc
    if not isinstance(entry, dict) or any(name not in entry for name in FIELDS):
        raise BundleError(f"{where}: not an export entry with fields {', '.join(FIELDS)}")
    for name in FIELDS:
        expected = int if name == "seq" else str
        if not isinstance(entry[name], expected) or isinstance(entry[name], bool):
            raise BundleError(f"{where}: field {name} must be {expected.__name__}")
    return entry


def verify_chain(path: Path, saga_id: str, count: int, head: str) -> int:
    """Check one saga's export; return its entry count. Entry ``count`` must hash to ``head``."""
    prev, seen, attested = GENESIS, 0, None
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(_nonblank(lines), start=1):
            where = f"{path.name} entry {number}"
            entry = parse_entry(line, where)
            if entry["sagaId"] != saga_id:
                raise BundleError(f"{where}: belongs to saga {entry['sagaId']!r}, not {saga_id!r}")
            if entry["seq"] != number:
                raise BundleError(f"{where}: seq {entry['seq']}, expected {number} (an entry is missing)")
            if entry["phase"] not in PHASES:
                raise BundleError(f"{where}: unknown phase {entry['phase']!r}")
            try:
                expected = entry_hash(prev, entry)
            except ValueError as exc:
                raise BundleError(f"{where}: bad timestamp {entry['timestamp']!r}") from exc
            if expected != entry["hash"]:
                raise BundleError(f"{where}: hash mismatch, stored {entry['hash']}, recomputed {expected}")
            if number == count:
                attested = entry["hash"]
            prev, seen = entry["hash"], number
    if seen < count:
        raise BundleError(f"saga {saga_id!r}: {seen} entries, the checkpoint attests {count}: truncated")
    if attested != head:
        raise BundleError(f"saga {saga_id!r}: entry #{count} is not the head the checkpoint attests")
    return seen


def _nonblank(lines: Iterator[str]) -> Iterator[str]:
    for line in lines:
        if line.strip():
            yield line.rstrip("\n")


# -- Merkle tree (RFC 6962 hashing, RFC 9162 §2.1.3.2 inclusion) -----------------------------------
def leaf_hash(saga_id: str, count: int, head: str) -> bytes:
    return hashlib.sha256(b"\x00" + frame(saga_id) + frame(str(count)) + frame(head)).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes) -> bool:
    if not 0 <= index < size:
        return False
    fn, sn, digest = index, size - 1, leaf
    for sibling in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            digest = node_hash(sibling, digest)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            digest = node_hash(digest, sibling)
        fn >>= 1
        sn >>= 1
    return sn == 0 and digest == root


# -- keys and the signed note (C2SP signed-note, tlog-checkpoint) ----------------------------------
def read_verifier_key(text: str) -> tuple[str, bytes, bytes]:
    """``<name>+<hex key id>+<base64(0x01 || key)>`` -> (name, key id, public key)."""
    parts = text.strip().split("+", 2)
    if len(parts) != 3 or parts[0] == "PRIVATE":
        raise BundleError("the key must be a verifier key line <name>+<key id>+<base64> (the .pub file)")
    name, id_hex, encoded = parts
    try:
        raw = b64decode_canonical(encoded)
    except (binascii.Error, ValueError) as exc:
        raise BundleError("the verifier key is not base64") from exc
    if len(raw) != 33 or raw[0] != 1:
        raise BundleError("the verifier key is not an Ed25519 key")
    key_id = hashlib.sha256(name.encode("utf-8") + b"\n" + raw).digest()[:4]
    if key_id.hex() != id_hex.lower():
        raise BundleError("the verifier key's id does not match its name and key")
    return name, key_id, raw[1:]


def open_note(note: str, name: str, key_id: bytes, public_key: bytes) -> tuple[str, int, bytes, str]:
    """Check the note is signed by the key; return (origin, size, root, time)."""
    split = note.rfind("\n\n")
    if split < 0 or not note.endswith("\n"):
        raise BundleError("the checkpoint is not a signed note")
    body = note[: split + 1]
    for line in note[split + 2 :].splitlines():
        signer, _, token = line.removeprefix("\N{EM DASH} ").partition(" ")
        try:
            raw = b64decode_canonical(token)
        except (binascii.Error, ValueError):
            continue
        if not line.startswith("\N{EM DASH} ") or signer != name or raw[:4] != key_id:
            continue
        try:
            Ed25519PublicKey.from_public_bytes(public_key).verify(raw[4:], body.encode("utf-8"))
        except InvalidSignature as exc:
            raise BundleError(
                f"the checkpoint's signature by {name} does not verify: altered or forged"
            ) from exc
        lines = body.splitlines()
        if len(lines) < 3 or not (lines[1].isascii() and lines[1].isdigit()):
            raise BundleError("the checkpoint text lacks origin, size and root")
        times = [line.removeprefix("time ") for line in lines[3:] if line.startswith("time ")]
        try:
            root = b64decode_canonical(lines[2])
        except (binascii.Error, ValueError) as exc:
            raise BundleError("the checkpoint's root is not base64") from exc
        return lines[0], int(lines[1]), root, (times or ["?"])[0]
    raise BundleError(f"the checkpoint is not signed by {name} ({key_id.hex()})")


# -- the bundle -----------------------------------------------------------------------------------
def inside(bundle: Path, relative: object) -> Path:
    """A path named by the manifest, refused if it leaves the bundle directory."""
    if not isinstance(relative, str):
        raise BundleError("the manifest names a file with a non-string path")
    path = (bundle / relative).resolve()
    if not path.is_relative_to(bundle.resolve()):
        raise BundleError(f"the manifest path {relative!r} leaves the bundle")
    return path


def verify_bundle(bundle: Path, key_text: str) -> list[str]:
    """Verify everything; the report lines. Raises ``BundleError`` on the first failure."""
    name, key_id, public_key = read_verifier_key(key_text)
    try:
        manifest = json.loads((bundle / "bundle.json").read_text(encoding="utf-8"))
        if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
            raise BundleError(f"bundle.json is not a {BUNDLE_FORMAT} manifest")
        note = inside(bundle, manifest.get("checkpoint")).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"cannot read the bundle: {exc}") from exc
    origin, size, root, time = open_note(note, name, key_id, public_key)
    report = [f"checkpoint {origin} at {time}: {size} sagas, signed by {name} ({key_id.hex()})"]
    sagas = manifest.get("sagas")
    if not isinstance(sagas, list) or not sagas:
        raise BundleError("the manifest lists no sagas")
    for saga in sagas:
        try:
            saga_id, count, head = saga["sagaId"], saga["count"], saga["head"]
            index, proof = (
                saga["leafIndex"],
                [b64decode_canonical(p) for p in saga["inclusionProof"]],
            )
            if not (isinstance(saga_id, str) and isinstance(count, int) and isinstance(head, str)):
                raise TypeError("sagaId, count, head")
            if not isinstance(index, int) or isinstance(count, bool) or count < 1:
                raise TypeError("leafIndex, count")
        except (KeyError, TypeError, binascii.Error, ValueError) as exc:
            raise BundleError(f"the manifest's saga entry is malformed ({exc})") from exc
        if not verify_inclusion(leaf_hash(saga_id, count, head), index, size, proof, root):
            raise BundleError(f"saga {saga_id!r}: its inclusion proof does not lead to the signed root")
        try:
            entries = verify_chain(inside(bundle, saga.get("file")), saga_id, count, head)
        except (OSError, UnicodeDecodeError) as exc:
            raise BundleError(f"saga {saga_id!r}: cannot read its file ({exc})") from exc
        later = (
            f"; {entries - count} later entries chain correctly but are not attested"
            if entries > count
            else ""
        )
        report.append(f"OK {saga_id}: {count} entries attested by the checkpoint, chain intact{later}")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sagacity.verify_bundle",
        description="Verify a Sagacity evidence bundle offline against a public key.",
    )
    parser.add_argument("bundle", type=Path, help="the bundle directory (holds bundle.json)")
    parser.add_argument("--key", required=True, type=Path, help="the signer's public key file (NAME.pub)")
    args = parser.parse_args(argv)
    try:
        key_text = args.key.read_text(encoding="ascii")
        lines = verify_bundle(args.bundle, key_text)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"FAILED: cannot read the key: {exc}", file=sys.stderr)
        return 1
    except BundleError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    print("bundle verified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
