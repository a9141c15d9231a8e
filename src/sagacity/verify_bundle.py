"""Verify a Sagacity evidence bundle offline: ``python -m sagacity.verify_bundle BUNDLE --key PUB``.

With ``--witness-key W.pub`` (repeatable) and ``--quorum N`` the bundle's log checkpoint must
carry N valid witness cosignatures; with ``--since OLD.txt`` (a log checkpoint you kept) the
bundle must prove its log checkpoint extends that one; with ``--tsa-cert ROOT.pem`` its RFC 3161
timestamp token must verify up to that root (this one check also needs ``rfc3161-client``).

This file stands alone on purpose. It depends on the standard library and ``cryptography`` only,
and imports nothing else from Sagacity, so an auditor can read all of it, copy it out of the
package and run it (``python verify_bundle.py BUNDLE --key PUB``) without trusting the rest of
the library that wrote the evidence. That is why the chain rule (SPEC §3), the Merkle rules and
the signed-note, cosignature and consistency-proof rules are *duplicated* here from ``sagacity.chain`` and
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

BUNDLE_FORMATS = ("sagacity-bundle/v1", "sagacity-bundle/v2")
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
# The manifest's keys, each object's exactly: a key renamed, dropped or added is an error, so that
# no part of the evidence (the log checkpoint, a saga's log proof) can silently drop out of the report.
MANIFEST_KEYS = frozenset({"format", "checkpoint", "sagas"})
SAGA_KEYS = frozenset({"sagaId", "file", "leafIndex", "count", "head", "inclusionProof"})
LOG_KEYS = frozenset({"checkpoint", "since"})
SINCE_KEYS = frozenset({"size", "root", "consistencyProof"})
LOG_PROOF_KEYS = frozenset({"seq", "leafIndex", "inclusionProof"})
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


def verify_chain(
    path: Path, saga_id: str, count: int, head: str, gates: dict[int, dict[str, Any]] | None = None
) -> list[str]:
    """Check one saga's export; return its hashes in seq order. Entry ``count`` must hash to ``head``.

    ``gates`` collects, by seq, each approval gate's facts as the chain holds them (who asked,
    under which rule and tool definition, who approved or rejected): see :func:`gate_report`.
    """
    prev, seen, attested = GENESIS, 0, None
    hashes: list[str] = []
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
            if gates is not None:
                _note_gate(gates, entry)
            if number == count:
                attested = entry["hash"]
            prev, seen = entry["hash"], number
            hashes.append(prev)
    if seen < count:
        raise BundleError(f"saga {saga_id!r}: {seen} entries, the checkpoint attests {count}: truncated")
    if attested != head:
        raise BundleError(f"saga {saga_id!r}: entry #{count} is not the head the checkpoint attests")
    return hashes


def _lines(payload: str) -> dict[str, str]:
    """A payload's ``key=value`` lines (the first of each key)."""
    found: dict[str, str] = {}
    for line in payload.split("\n"):
        key, sep, value = line.partition("=")
        if sep and key not in found:
            found[key] = value
    return found


def _note_gate(gates: dict[int, dict[str, Any]], entry: dict[str, Any]) -> None:
    """Take a gate (AWAITING_APPROVAL) or a decision naming one into ``gates``, as docs/journal.md
    lays them out: ``requester=``, ``requester_may_not_approve=``, ``definition=`` on the gate; the
    decided seq in the decision's input, ``approver=`` on its payload's first line."""
    if entry["phase"] == "AWAITING_APPROVAL":
        lines = _lines(entry["payload"])
        gates[entry["seq"]] = {
            "tool": entry["toolName"],
            "requester": lines.get("requester"),
            "excluded": lines.get("requester_may_not_approve") == "true",
            "definition": lines.get("definition"),
            "approvers": [],
            "rejected": None,
        }
    elif entry["toolName"] == "approval-gate" and entry["phase"] in ("APPROVED", "REJECTED"):
        try:
            decided = json.loads(entry["input"])
        except ValueError:
            return
        target = decided.get("seq") if isinstance(decided, dict) else None
        gate = gates.get(target) if isinstance(target, int) else None
        if gate is None:
            return
        first = entry["payload"].partition("\n")[0]
        approver = first.removeprefix("approver=") if first.startswith("approver=") else ""
        if entry["phase"] == "APPROVED":
            gate["approvers"].append(approver)
        elif gate["rejected"] is None:
            gate["rejected"] = approver or "the library (expired, superseded or refused)"


def gate_report(gates: dict[int, dict[str, Any]]) -> list[str]:
    """One line per gate: who asked, who decided, the rule and the definition it was approved under.
    A requester among the approvers of a gate journaled with ``requester_may_not_approve`` is flagged."""
    lines = []
    for seq, gate in sorted(gates.items()):
        asked = gate["requester"] or "no principal"
        decided = (
            f"rejected by {gate['rejected']}"
            if gate["rejected"]
            else f"approved by {', '.join(gate['approvers'])}"
            if gate["approvers"]
            else "not decided"
        )
        rule = "; requester may not approve" if gate["excluded"] else ""
        if gate["excluded"] and gate["requester"] and gate["requester"] in gate["approvers"]:
            rule += " (VIOLATED: the requester approved)"
        lines.append(
            f"  gate seq {seq} {gate['tool']}: requested by {asked}, {decided}{rule}; "
            f"definition {gate['definition'] or 'not journaled'}"
        )
    return lines


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


def verify_consistency(old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]) -> bool:
    """RFC 9162 §2.1.4.2: the tree ``new_root`` of ``new`` leaves extends ``old_root`` of ``old``."""
    if not 0 <= old <= new or len(proof) > 63:
        return False
    if old == new:
        return not proof and old_root == new_root
    if old == 0:
        return not proof
    if not proof:
        return False
    path = [old_root, *proof] if old & (old - 1) == 0 else list(proof)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    first = second = path[0]
    for sibling in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            first, second = node_hash(sibling, first), node_hash(sibling, second)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            second = node_hash(second, sibling)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and first == old_root and second == new_root


# -- keys and the signed note (C2SP signed-note, tlog-checkpoint) ----------------------------------
def read_verifier_key(text: str, kind: int = 1) -> tuple[str, bytes, bytes]:
    """``<name>+<hex key id>+<base64(type || key)>`` -> (name, key id, public key).

    ``kind`` 1: a log's Ed25519 note key; 4: a witness's cosignature/v1 key.
    """
    parts = text.strip().split("+", 2)
    if len(parts) != 3 or parts[0] == "PRIVATE":
        raise BundleError("the key must be a verifier key line <name>+<key id>+<base64> (the .pub file)")
    name, id_hex, encoded = parts
    try:
        raw = b64decode_canonical(encoded)
    except (binascii.Error, ValueError) as exc:
        raise BundleError("the verifier key is not base64") from exc
    if len(raw) != 33 or raw[0] != kind:
        what = "an Ed25519 note key (type 0x01)" if kind == 1 else "a witness cosignature/v1 key (type 0x04)"
        raise BundleError(f"the key {name!r} is not {what}")
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


def open_log_note(note: str, name: str, key_id: bytes, public_key: bytes) -> tuple[str, str, int, bytes]:
    """A C2SP tlog-checkpoint signed by the key: (signed text, origin, size, root). Strict: every
    signature line must be well formed, so no byte of the note goes unchecked."""
    split = note.rfind("\n\n")
    if split < 0 or not note.endswith("\n"):
        raise BundleError("the log checkpoint is not a signed note")
    text, signed = note[: split + 1], False
    for signer, raw in signature_lines(note[split + 2 :]):
        if signer == name and raw[:4] == key_id:
            try:
                Ed25519PublicKey.from_public_bytes(public_key).verify(raw[4:], text.encode("utf-8"))
            except InvalidSignature as exc:
                raise BundleError(f"the log checkpoint's signature by {name} does not verify") from exc
            signed = True
    if not signed:
        raise BundleError(f"the log checkpoint is not signed by {name} ({key_id.hex()})")
    lines = text.removesuffix("\n").split("\n")
    if len(lines) < 3 or not (lines[1].isascii() and lines[1].isdigit()) or str(int(lines[1])) != lines[1]:
        raise BundleError("the log checkpoint lacks origin, size and root")
    try:
        root = b64decode_canonical(lines[2])
    except (binascii.Error, ValueError) as exc:
        raise BundleError("the log checkpoint's root is not base64") from exc
    if len(root) != 32:
        raise BundleError("the log checkpoint's root is not 32 bytes")
    return text, lines[0], int(lines[1]), root


def signature_lines(block: str) -> Iterator[tuple[str, bytes]]:
    # split on "\n" alone: str.splitlines() also splits on other control characters
    for line in block.removesuffix("\n").split("\n"):
        signer, _, token = line.removeprefix("\N{EM DASH} ").partition(" ")
        try:
            raw = b64decode_canonical(token)
        except (binascii.Error, ValueError) as exc:
            raise BundleError(f"malformed signature line {line!r}") from exc
        if not line.startswith("\N{EM DASH} ") or not signer or len(raw) < 5:
            raise BundleError(f"malformed signature line {line!r}")
        yield signer, raw


def cosigners(note: str, text: str, witnesses: Sequence[tuple[str, bytes, bytes]]) -> list[str]:
    """Names of ``witnesses`` with a valid cosignature/v1 (timestamped Ed25519) on the note's text."""
    found = []
    lines = list(signature_lines(note[note.rfind("\n\n") + 2 :]))
    for name, key_id, public_key in witnesses:
        for signer, raw in lines:
            if signer != name or raw[:4] != key_id or len(raw) != 76:
                continue
            timestamp = int.from_bytes(raw[4:12], "big")
            message = f"cosignature/v1\ntime {timestamp}\n{text}".encode()
            try:
                Ed25519PublicKey.from_public_bytes(public_key).verify(raw[12:], message)
            except InvalidSignature:
                continue
            if 0 < timestamp < 2**63:
                found.append(name)
                break
    return found


def proof_list(value: object, what: str) -> list[bytes]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise BundleError(f"{what} is not a list of base64 hashes")
    try:
        hashes = [b64decode_canonical(item) for item in value]
    except (binascii.Error, ValueError) as exc:
        raise BundleError(f"{what} is not canonical base64") from exc
    if any(len(h) != 32 for h in hashes):
        raise BundleError(f"{what} holds a hash that is not 32 bytes")
    return hashes


def check_keys(
    value: object, required: frozenset[str], what: str, optional: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """``value``, an object holding every ``required`` key and nothing but those and ``optional``."""
    if not isinstance(value, dict):
        raise BundleError(f"{what} is not a JSON object")
    missing, unknown = required - value.keys(), value.keys() - required - optional
    if missing or unknown:
        raise BundleError(
            f"{what} is malformed: "
            + "; ".join(
                f"{label} key(s) {', '.join(map(repr, sorted(keys)))}"
                for label, keys in (("missing", missing), ("unknown", unknown))
                if keys
            )
        )
    return value


def number(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BundleError(f"{what} is not a whole number")
    return value


def verify_timestamp(token: bytes, message: bytes, root_pem: bytes) -> str:
    """The RFC 3161 token's time, if it covers ``message`` and chains to ``root_pem``."""
    try:
        import rfc3161_client
        from cryptography import x509
    except ImportError as exc:
        raise BundleError("checking a timestamp needs rfc3161-client: pip install rfc3161-client") from exc
    try:
        response = rfc3161_client.decode_timestamp_response(token)
        builder = rfc3161_client.VerifierBuilder()
        for root in x509.load_pem_x509_certificates(root_pem):
            builder = builder.add_root_certificate(root)
        builder.build().verify_message(response, message)
    except (ValueError, rfc3161_client.VerificationError) as exc:
        raise BundleError(f"the log checkpoint's timestamp token does not verify: {exc}") from exc
    return f"{response.tst_info.gen_time:%Y-%m-%dT%H:%M:%SZ}"


class LogView:
    """The bundle's log checkpoint, verified: what each saga's log proof is checked against."""

    def __init__(
        self,
        bundle: Path,
        section: object,
        key: tuple[str, bytes, bytes],
        witnesses: Sequence[tuple[str, bytes, bytes]],
        quorum: int,
        since: Sequence[str],
        tsa_root: bytes | None,
    ) -> None:
        section = check_keys(section, LOG_KEYS, "the manifest's log section", frozenset({"timestamp"}))
        try:
            note = inside(bundle, section.get("checkpoint")).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BundleError(f"cannot read the log checkpoint: {exc}") from exc
        text, self.origin, self.size, self.root = open_log_note(note, *key)
        self.timestamped = ""
        if tsa_root is not None:
            if "timestamp" not in section:
                raise BundleError("the bundle has no timestamp token on its log checkpoint")
            try:
                token = inside(bundle, section["timestamp"]).read_bytes()
            except OSError as exc:
                raise BundleError(f"cannot read the timestamp token: {exc}") from exc
            self.timestamped = verify_timestamp(token, text.encode("utf-8"), tsa_root)
        self.cosigned = cosigners(note, text, witnesses)
        if len(self.cosigned) < quorum:
            raise BundleError(
                f"the log checkpoint has {len(self.cosigned)} valid cosignature(s) by the witness keys "
                f"given, the quorum is {quorum}"
            )
        proofs = section.get("since")
        if not isinstance(proofs, list):
            raise BundleError("the manifest's log section has no 'since' list")
        offered: dict[int, tuple[bytes, list[bytes]]] = {}
        for item in proofs:
            check_keys(item, SINCE_KEYS, "a consistency proof in the manifest")
            if not isinstance(item.get("root"), str):
                raise BundleError("a consistency proof in the manifest is malformed")
            size = number(item.get("size"), "a consistency proof's size")
            try:
                old_root = b64decode_canonical(item["root"])
            except (binascii.Error, ValueError) as exc:
                raise BundleError("a consistency proof's root is not canonical base64") from exc
            old_proof = proof_list(item.get("consistencyProof"), f"the consistency proof from {size}")
            if not verify_consistency(size, self.size, old_root, self.root, old_proof):
                raise BundleError(f"the consistency proof from size {size} to {self.size} does not verify")
            offered[size] = (old_root, old_proof)
        self.extends: list[int] = []
        for old_note in since:
            _, origin, size, old_root = open_log_note(old_note, *key)
            if origin != self.origin:
                raise BundleError(f"--since checkpoint is of log {origin!r}, the bundle's is {self.origin!r}")
            if size not in offered or offered[size][0] != old_root:
                raise BundleError(
                    f"the bundle proves no consistency from your log checkpoint of size {size} "
                    "(a different root at that size is a fork)"
                )
            self.extends.append(size)

    def check_saga(self, saga_id: str, proof: object, hashes: list[str]) -> str:
        if proof is None:
            raise BundleError(f"saga {saga_id!r}: no log proof in a bundle with a log checkpoint")
        proof = check_keys(proof, LOG_PROOF_KEYS, f"saga {saga_id!r}: its log proof")
        seq = number(proof.get("seq"), "a log proof's seq")
        index = number(proof.get("leafIndex"), "a log proof's leafIndex")
        path = proof_list(proof.get("inclusionProof"), "a log inclusion proof")
        if not 1 <= seq <= len(hashes):
            raise BundleError(f"saga {saga_id!r}: the log proves entry #{seq}, the export has {len(hashes)}")
        if not verify_inclusion(leaf_hash(saga_id, seq, hashes[seq - 1]), index, self.size, path, self.root):
            raise BundleError(
                f"saga {saga_id!r}: entry #{seq} is not at log index {index} under the log root"
            )
        return f"; entry #{seq} is log entry {index} of {self.size}"


# -- the bundle -----------------------------------------------------------------------------------
def inside(bundle: Path, relative: object) -> Path:
    """A path named by the manifest, refused if it leaves the bundle directory."""
    if not isinstance(relative, str):
        raise BundleError("the manifest names a file with a non-string path")
    path = (bundle / relative).resolve()
    if not path.is_relative_to(bundle.resolve()):
        raise BundleError(f"the manifest path {relative!r} leaves the bundle")
    return path


def read_witnesses(texts: Sequence[str], quorum: int | None) -> tuple[list[tuple[str, bytes, bytes]], int]:
    """The witness keys and the quorum (default: all of them). A quorum counts distinct witnesses,
    so a witness given twice is refused: it must not turn k-of-n into 1-of-n."""
    witnesses = [read_verifier_key(text, kind=4) for text in texts]
    names = [witness[0] for witness in witnesses]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise BundleError(
            f"witness {', '.join(twice)} is named more than once: a quorum counts distinct witnesses"
        )
    needed = len(witnesses) if quorum is None else quorum
    if needed > len(witnesses):
        raise BundleError(f"a quorum of {needed} needs {needed} witness keys")
    return witnesses, needed


def verify_bundle(
    bundle: Path,
    key_text: str,
    witness_texts: Sequence[str] = (),
    quorum: int | None = None,
    since: Sequence[str] = (),
    tsa_root: bytes | None = None,
) -> list[str]:
    """Verify everything; the report lines. Raises ``BundleError`` on the first failure."""
    name, key_id, public_key = read_verifier_key(key_text)
    witnesses, needed = read_witnesses(witness_texts, quorum)
    try:
        manifest = json.loads((bundle / "bundle.json").read_text(encoding="utf-8"))
        if not isinstance(manifest, dict) or manifest.get("format") not in BUNDLE_FORMATS:
            raise BundleError(f"bundle.json is not a {' or '.join(BUNDLE_FORMATS)} manifest")
        with_log = frozenset({"log"}) if manifest["format"] != BUNDLE_FORMATS[0] else frozenset()
        check_keys(manifest, MANIFEST_KEYS, "bundle.json", with_log)
        note = inside(bundle, manifest.get("checkpoint")).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"cannot read the bundle: {exc}") from exc
    origin, size, root, time = open_note(note, name, key_id, public_key)
    report = [f"checkpoint {origin} at {time}: {size} sagas, signed by {name} ({key_id.hex()})"]
    log = None
    if "log" in manifest:
        log = LogView(bundle, manifest["log"], (name, key_id, public_key), witnesses, needed, since, tsa_root)
        report.append(
            f"log checkpoint {log.origin}: {log.size} entries, cosigned by "
            f"{', '.join(log.cosigned) or 'no witness key given'}"
            + (
                f"; extends your log checkpoint(s) of size {', '.join(map(str, log.extends))}"
                if log.extends
                else ""
            )
            + (f"; timestamped {log.timestamped} by the TSA" if log.timestamped else "")
        )
    elif witnesses or since or tsa_root is not None:
        raise BundleError(
            "the bundle has no log checkpoint to check cosignatures, consistency or a timestamp on"
        )
    sagas = manifest.get("sagas")
    if not isinstance(sagas, list) or not sagas:
        raise BundleError("the manifest lists no sagas")
    for saga in sagas:
        with_proof = frozenset({"log"}) if log is not None else frozenset()
        check_keys(saga, SAGA_KEYS | with_proof, "a saga entry in the manifest")
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
        gates: dict[int, dict[str, Any]] = {}
        try:
            hashes = verify_chain(inside(bundle, saga.get("file")), saga_id, count, head, gates)
        except (OSError, UnicodeDecodeError) as exc:
            raise BundleError(f"saga {saga_id!r}: cannot read its file ({exc})") from exc
        entries = len(hashes)
        logged = log.check_saga(saga_id, saga.get("log"), hashes) if log is not None else ""
        later = (
            f"; {entries - count} later entries chain correctly but are not attested"
            if entries > count
            else ""
        )
        report.append(
            f"OK {saga_id}: {count} entries attested by the checkpoint, chain intact{later}{logged}"
        )
        report.extend(gate_report(gates))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sagacity.verify_bundle",
        description="Verify a Sagacity evidence bundle offline against a public key.",
    )
    parser.add_argument("bundle", type=Path, help="the bundle directory (holds bundle.json)")
    parser.add_argument("--key", required=True, type=Path, help="the signer's public key file (NAME.pub)")
    parser.add_argument(
        "--witness-key", action="append", default=[], type=Path, help="a witness's public key (repeatable)"
    )
    parser.add_argument("--quorum", type=int, help="cosignatures needed (default: every --witness-key)")
    parser.add_argument(
        "--since",
        action="append",
        default=[],
        type=Path,
        help="an older log checkpoint you kept (repeatable)",
    )
    parser.add_argument("--tsa-cert", type=Path, help="the time-stamping authority's root certificate (PEM)")
    args = parser.parse_args(argv)
    try:
        key_text = args.key.read_text(encoding="ascii")
        witness_texts = [path.read_text(encoding="ascii") for path in args.witness_key]
        since = [path.read_text(encoding="utf-8") for path in args.since]
        tsa_root = args.tsa_cert.read_bytes() if args.tsa_cert is not None else None
        lines = verify_bundle(args.bundle, key_text, witness_texts, args.quorum, since, tsa_root)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"FAILED: cannot read a key or checkpoint file: {exc}", file=sys.stderr)
        return 1
    except BundleError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    print("bundle verified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
