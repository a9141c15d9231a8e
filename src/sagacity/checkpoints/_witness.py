"""A C2SP tlog-witness: cosign a log's checkpoint only if it extends the last one cosigned.

The witness keeps, per log origin, the last checkpoint it cosigned (one file each, replaced
atomically and fsynced before it answers), and for a new one checks the log's signature and the
RFC 9162 consistency proof from that size. A log rewritten and re-signed, even with its own stolen
key, has no such proof, so the witness refuses it and says why; verifiers that demand a quorum of
cosignatures then never accept the rewrite. Protocol (``POST <prefix>/add-checkpoint``)::

    old <size the log believes the witness has>
    <consistency proof, one base64 hash a line>
    (blank)
    <the checkpoint note>

200: the cosignature line(s). 400 malformed, 403 not signed by the log's key, 404 unknown origin,
409 the old size is not the witness's (the body, ``text/x.tlog.size``, is its size), 422 the
proof does not verify / same size but another root / size 0 without the empty root.

The check and the update run under an exclusive ``flock`` on the origin's lock file, so two
witness processes sharing a state directory cannot both move one log forward from the same size.
"""

from __future__ import annotations

import binascii
import fcntl
import hashlib
import os
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import sagacity.checkpoints._merkle as _merkle
import sagacity.checkpoints._note as _note
from sagacity.checkpoints._keys import SigningKey, VerifierKey, b64decode_canonical
from sagacity.checkpoints._tlog import LogCheckpoint, check_witnesses, parse_log_text
from sagacity.errors import CheckpointError, SignatureError

SIZE_CONTENT_TYPE = "text/x.tlog.size"
MAX_BODY = 1 << 20


@dataclass(frozen=True, slots=True)
class Answer:
    """A witness's HTTP answer: status, content type and body text."""

    status: int
    body: str
    content_type: str = "text/plain; charset=utf-8"


class WitnessState:
    """The witness: its key, the logs it trusts, and the directory of last-cosigned checkpoints."""

    def __init__(
        self,
        key: SigningKey,
        logs: Mapping[str, Sequence[VerifierKey]],
        directory: str | os.PathLike[str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not key.verifier.is_witness:
            raise CheckpointError(f"{key.name} is not a witness key (sagacity keys generate --witness)")
        self.key = key
        self.logs = {origin: list(keys) for origin, keys in logs.items()}
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._clock = clock

    def _file(self, origin: str) -> Path:
        return self.directory / (hashlib.sha256(origin.encode("utf-8")).hexdigest()[:32] + ".checkpoint")

    @contextmanager
    def _locked(self, origin: str) -> Iterator[None]:
        with self._file(origin).with_suffix(".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def latest(self, origin: str) -> LogCheckpoint | None:
        """The last checkpoint cosigned for ``origin``, as the witness keeps it."""
        path = self._file(origin)
        if not path.exists():
            return None
        note = path.read_text(encoding="utf-8")
        return parse_log_text(_note.split_note(note)[0], note)

    def _keep(self, checkpoint: LogCheckpoint) -> None:
        path = self._file(checkpoint.origin)
        fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(checkpoint.note)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def add_checkpoint(self, body: bytes) -> Answer:
        """Handle one ``add-checkpoint`` request body."""
        try:
            old, proof, checkpoint = _parse_request(body)
        except (CheckpointError, UnicodeDecodeError, ValueError, binascii.Error) as exc:
            return Answer(HTTPStatus.BAD_REQUEST, f"malformed add-checkpoint request: {exc}\n")
        keys = self.logs.get(checkpoint.origin)
        if keys is None:
            return Answer(HTTPStatus.NOT_FOUND, f"unknown log origin {checkpoint.origin!r}\n")
        text, signatures = _note.split_note(checkpoint.note)
        if not any(_signed_by(text, signatures, key) for key in keys):
            return Answer(
                HTTPStatus.FORBIDDEN, f"the checkpoint is not signed by a key of {checkpoint.origin}\n"
            )
        if old > checkpoint.size:
            return Answer(
                HTTPStatus.BAD_REQUEST, f"old size {old} is larger than the checkpoint's {checkpoint.size}\n"
            )
        if checkpoint.size == 0 and checkpoint.root != _merkle.root([]):
            return Answer(
                HTTPStatus.UNPROCESSABLE_ENTITY, "a checkpoint of size 0 must have the empty tree's root\n"
            )
        with self._locked(checkpoint.origin):
            previous = self.latest(checkpoint.origin)
            have = previous.size if previous is not None else 0
            if old != have:
                return Answer(HTTPStatus.CONFLICT, f"{have}\n", SIZE_CONTENT_TYPE)
            refusal = _refusal(previous, old, proof, checkpoint)
            if refusal:
                return Answer(HTTPStatus.UNPROCESSABLE_ENTITY, refusal + "\n")
            self._keep(checkpoint)
            line = _note.cosign(checkpoint.text, self.key, int(self._clock()))
        return Answer(HTTPStatus.OK, line.line)


def _signed_by(text: str, signatures: Sequence[_note.SignatureLine], key: VerifierKey) -> bool:
    try:
        _note.verify_text(text, signatures, key)
    except SignatureError:
        return False
    return True


def _refusal(previous: LogCheckpoint | None, old: int, proof: Sequence[bytes], new: LogCheckpoint) -> str:
    """Why ``new`` does not extend ``previous`` (the witness's last cosigned), or "" when it does."""
    if old == 0:
        return "" if not proof else "old size 0 needs an empty consistency proof"
    assert previous is not None  # old == the kept size, which is 0 without a kept checkpoint
    if old == new.size:
        if new.root != previous.root:
            return (
                f"a different tree of the same size {old}: the root {new.root_base64} is not the "
                f"{previous.root_base64} cosigned before (a fork)"
            )
        return "" if not proof else "equal sizes need an empty consistency proof"
    if not _merkle.verify_consistency(old, new.size, previous.root, new.root, proof):
        return (
            f"the consistency proof from size {old} to {new.size} does not verify: this checkpoint "
            f"does not extend the one cosigned at size {old} (root {previous.root_base64})"
        )
    return ""


def _parse_request(body: bytes) -> tuple[int, list[bytes], LogCheckpoint]:
    text = body.decode("utf-8")
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise ValueError("no blank line after the old size and proof")
    lines = head.split("\n")
    first = lines[0]
    if not first.startswith("old ") or not _is_decimal(first[4:]):
        raise ValueError("the first line must be 'old <size>'")
    if len(lines) - 1 > _merkle.MAX_PROOF_HASHES:
        raise ValueError(f"more than {_merkle.MAX_PROOF_HASHES} proof lines")
    proof = [b64decode_canonical(line) for line in lines[1:]]
    if any(len(node) != 32 for node in proof):
        raise ValueError("a proof line is not a 32-byte hash")
    checkpoint_text, _ = _note.split_note(note)
    return int(first[4:]), proof, parse_log_text(checkpoint_text, note)


def _is_decimal(text: str) -> bool:
    return text == "0" or (text.isascii() and text.isdigit() and not text.startswith("0"))


# -- HTTP ------------------------------------------------------------------------------------------
def make_server(state: WitnessState, host: str, port: int) -> ThreadingHTTPServer:
    """An HTTP server speaking tlog-witness at ``/add-checkpoint``; ``serve_forever()`` runs it."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "sagacity-witness"

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/add-checkpoint":
                self._answer(Answer(HTTPStatus.NOT_FOUND, "POST /add-checkpoint\n"))
                return
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                self._answer(Answer(HTTPStatus.BAD_REQUEST, f"a body of 1 to {MAX_BODY} bytes is needed\n"))
                return
            self._answer(state.add_checkpoint(self.rfile.read(length)))

        def do_GET(self) -> None:
            self._answer(Answer(HTTPStatus.METHOD_NOT_ALLOWED, "POST /add-checkpoint\n"))

        def _answer(self, answer: Answer) -> None:
            data = answer.body.encode("utf-8")
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            os.write(2, ("witness: " + format % args + "\n").encode("utf-8", "replace"))

    return ThreadingHTTPServer((host, port), Handler)


# -- the log's side: asking witnesses ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Witness:
    """A witness the log asks: where it listens and its cosigning key."""

    url: str
    key: VerifierKey


class WitnessRefused(CheckpointError):
    """A witness would not cosign; the message says which and why."""


def request_cosignature(
    witness: Witness, checkpoint: LogCheckpoint, old: int, proof: Callable[[int], list[bytes]]
) -> _note.SignatureLine:
    """Submit ``checkpoint`` claiming the witness last saw ``old``; on 409, once more from its size."""
    for _ in range(2):
        status, text = _post(
            witness.url.rstrip("/") + "/add-checkpoint", _request_body(old, proof(old), checkpoint)
        )
        if status == HTTPStatus.CONFLICT:
            try:
                have = int(text.strip())
            except ValueError as exc:
                raise WitnessRefused(f"witness {witness.key.name}: 409 without a size") from exc
            if have > checkpoint.size:
                raise WitnessRefused(
                    f"witness {witness.key.name} has cosigned {have} entries, more than this checkpoint's "
                    f"{checkpoint.size}: the log was rolled back"
                )
            old = have
            continue
        if status != HTTPStatus.OK:
            raise WitnessRefused(f"witness {witness.key.name} refused ({status}): {text.strip()}")
        for line in text.splitlines():
            try:
                sig = _note.parse_signature_line(line)
            except CheckpointError:
                continue
            if _note.cosignature_time(checkpoint.text, sig, witness.key) is not None:
                return sig
        raise WitnessRefused(f"witness {witness.key.name} answered without a valid cosignature by its key")
    raise WitnessRefused(f"witness {witness.key.name} changed its size twice while we asked")


def _request_body(old: int, proof: Sequence[bytes], checkpoint: LogCheckpoint) -> bytes:
    lines = "".join(_note.b64(node) + "\n" for node in proof)
    return f"old {old}\n{lines}\n{checkpoint.note}".encode()


def _post(url: str, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "text/plain"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status), response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as exc:
        raise WitnessRefused(f"witness at {url} unreachable: {exc}") from exc


def cosign_with_quorum(
    checkpoint: LogCheckpoint,
    witnesses: Sequence[Witness],
    quorum: int,
    old: int,
    proof: Callable[[int], list[bytes]],
) -> tuple[LogCheckpoint, list[str]]:
    """Ask every witness; the checkpoint with the cosignatures gathered, and the refusals.

    Raises ``WitnessRefused`` (naming each refusal) when fewer than ``quorum`` cosigned: such a
    checkpoint does not count, and is not published. A witness named twice is refused up front
    (``CheckpointError``): its one cosignature cannot count twice towards the quorum.
    """
    check_witnesses([witness.key for witness in witnesses], quorum)
    lines: list[_note.SignatureLine] = []
    refusals: list[str] = []
    for witness in witnesses:
        try:
            lines.append(request_cosignature(witness, checkpoint, old, proof))
        except WitnessRefused as exc:
            refusals.append(str(exc))
    if len(lines) < quorum:
        raise WitnessRefused(
            f"{len(lines)} of {len(witnesses)} witnesses cosigned, the quorum is {quorum}: "
            + ("; ".join(refusals) or "no witness asked")
        )
    return checkpoint.with_signatures(lines), refusals
