"""RFC 3161 trusted timestamps on log checkpoints: proof from a TSA that a tree head existed by then.

A cosignature's time is the witness's word; a timestamp token is a time-stamping authority's,
verifiable offline against that authority's root certificate years later (``verify_bundle
--tsa-cert``). The token covers the log checkpoint's signed text (origin, size, root): the tree
head, not the signature lines, which witnesses may add afterwards. Requests use ``rfc3161-client``
(the ``timestamps`` extra), imported only when a timestamp is asked for.
"""

from __future__ import annotations

import urllib.error
import urllib.request
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
