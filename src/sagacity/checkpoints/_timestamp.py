"""RFC 3161 trusted timestamps on log checkpoints: proof from a TSA that a tree head existed by then.

A cosignature's time is the witness's word; a timestamp token is a time-stamping authority's,
verifiable offline against that authority's root certificate years later (``verify_bundle
--tsa-cert``). The token covers the log checkpoint's signed text (origin, size, root): the tree
head, not the signature lines, which witnesses may add afterwards. Requests use ``rfc3161-client``
(the ``timestamps`` extra), imported only when a timestamp is asked for.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from types import ModuleType

from sagacity.checkpoints._keys import optional_module
from sagacity.errors import CheckpointError


def _client() -> ModuleType:
    return optional_module("rfc3161_client", "trusted timestamps", "timestamps")


def request_timestamp(url: str, data: bytes, *, timeout: float = 30) -> bytes:
    """Ask the TSA at ``url`` to timestamp ``data``; the DER ``TimeStampResp`` it granted.

    Refuses an answer that is not granted, whose nonce is not this request's, or whose message
    imprint is not of ``data``: a token that would not verify is never kept.
    """
    import urllib.error  # here, not at the top: verifying (and importing _tlog) needs no HTTP
    import urllib.request

    client = _client()
    request = client.TimestampRequestBuilder().data(data).nonce(nonce=True).build()
    http = urllib.request.Request(
        url,
        data=request.as_bytes(),
        method="POST",
        headers={"Content-Type": "application/timestamp-query"},
    )
    try:
        with urllib.request.urlopen(http, timeout=timeout) as answer:
            body: bytes = answer.read()
    except (urllib.error.URLError, OSError) as exc:
        raise CheckpointError(f"the time-stamping authority at {url} did not answer: {exc}") from exc
    try:
        response = client.decode_timestamp_response(body)
    except ValueError as exc:
        raise CheckpointError(f"the TSA at {url} answered something that is not a TimeStampResp") from exc
    if response.status not in (0, 1):  # granted, granted with modifications
        raise CheckpointError(f"the TSA at {url} refused: status {response.status} {response.status_string}")
    if response.tst_info.nonce != request.nonce:
        raise CheckpointError(f"the TSA at {url} answered another request (nonce mismatch)")
    if response.tst_info.message_imprint.message != request.message_imprint.message:
        raise CheckpointError(f"the TSA at {url} timestamped other data")
    return body


#: The message imprints a token may carry, by algorithm OID (rfc3161-client checks these three).
_IMPRINTS = {
    "2.16.840.1.101.3.4.2.1": hashlib.sha256,
    "2.16.840.1.101.3.4.2.2": hashlib.sha384,
    "2.16.840.1.101.3.4.2.3": hashlib.sha512,
}
_OPENSSL_WHY = re.compile(r'Verify error: ([^"]+)"|reason: "([^"]+)"')


def _why(error: Exception) -> str:
    """The gist of a verification error (OpenSSL's error stack, cut to its last reason)."""
    text = str(error)
    reasons = [a or b for a, b in _OPENSSL_WHY.findall(text)]
    return reasons[-1] if reasons else text


def load_trust(pem: bytes, where: str = "the TSA trust file") -> list[object]:
    """The certificates of a PEM trust file (the TSA's root CA, perhaps with intermediates)."""
    x509 = optional_module("cryptography.x509", "checking timestamps", "timestamps")
    try:
        certificates: list[object] = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise CheckpointError(f"{where} holds no PEM certificate: {exc}") from exc
    return certificates


def verify_timestamp(token: bytes, data: bytes, trust: list[object]) -> datetime:
    """The time at which the TSA's ``token`` (a DER ``TimeStampResp``) says ``data`` existed.

    Checked offline: the response is granted, its message imprint is the hash of ``data``, its
    CMS signature verifies with the TSA certificate it carries, that certificate chains to one
    of ``trust`` (valid at the token's time) and has the critical id-kp-timeStamping EKU.
    ``CheckpointError`` says which of these failed.
    """
    client = _client()
    try:
        response = client.decode_timestamp_response(token)
    except ValueError as exc:
        raise CheckpointError(f"the timestamp token is not a DER TimeStampResp ({exc})") from exc
    imprint = response.tst_info.message_imprint
    digest = _IMPRINTS.get(imprint.hash_algorithm.dotted_string)
    if digest is None:
        raise CheckpointError(
            f"the timestamp token's imprint uses {imprint.hash_algorithm.dotted_string}, not SHA-256/384/512"
        )
    if imprint.message != digest(data).digest():
        raise CheckpointError(
            "the timestamp token covers other data: its message imprint is not this checkpoint's hash"
        )
    builder = client.VerifierBuilder()
    for certificate in trust:
        builder = builder.add_root_certificate(certificate)
    try:
        builder.build().verify_message(response, data)
    except (ValueError, client.VerificationError) as exc:
        raise CheckpointError(
            f"the timestamp token's signature or certificate chain does not verify against the TSA "
            f"trust file ({_why(exc)})"
        ) from exc
    moment: datetime = response.tst_info.gen_time
    return moment
