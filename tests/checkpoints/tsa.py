"""A tiny RFC 3161 time-stamping authority for the tests: a real CA, a real TSA certificate, DER by hand.

It answers ``application/timestamp-query`` POSTs on loopback with a granted ``TimeStampResp``
whose token is a CMS SignedData over a TSTInfo (RFC 3161 §2.4.2, RFC 5652), signed with ECDSA
P-256 by a certificate with the critical id-kp-timeStamping EKU, issued by a root the test hands
to the verifier. Only what the tests need is encoded; the DER is written out below so the test
depends on no ASN.1 library beside the one under test.
"""

from __future__ import annotations

import datetime
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


# -- DER -------------------------------------------------------------------------------------------
def _tlv(tag: int, body: bytes) -> bytes:
    n = len(body)
    if n < 0x80:
        return bytes([tag, n]) + body
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + body


def seq(*parts: bytes) -> bytes:
    return _tlv(0x30, b"".join(parts))


def set_of(*parts: bytes) -> bytes:
    return _tlv(0x31, b"".join(sorted(parts)))


def integer(value: int) -> bytes:
    return _tlv(0x02, value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True))


def octets(data: bytes) -> bytes:
    return _tlv(0x04, data)


def oid(dotted: str) -> bytes:
    first, second, *rest = (int(p) for p in dotted.split("."))
    body = bytearray([first * 40 + second])
    for arc in rest:
        chunk, left = [arc & 0x7F], arc >> 7
        while left:
            chunk.append(0x80 | (left & 0x7F))
            left >>= 7
        body += bytes(reversed(chunk))
    return _tlv(0x06, bytes(body))


def explicit(number: int, body: bytes) -> bytes:
    return _tlv(0xA0 | number, body)


def read_tlv(data: bytes, at: int) -> tuple[int, bytes, int]:
    """(tag, body, offset after) of the element at ``at``."""
    tag, length = data[at], data[at + 1]
    at += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[at : at + count], "big")
        at += count
    return tag, data[at : at + length], at + length


def children(body: bytes) -> Iterator[tuple[int, bytes, bytes]]:
    """(tag, body, whole encoding) of each element in a constructed body."""
    at = 0
    while at < len(body):
        start = at
        tag, inner, at = read_tlv(body, at)
        yield tag, inner, body[start:at]


SHA256 = "2.16.840.1.101.3.4.2.1"
ECDSA_SHA256 = "1.2.840.10045.4.3.2"
SIGNED_DATA = "1.2.840.113549.1.7.2"
TST_INFO = "1.2.840.113549.1.9.16.1.4"
CONTENT_TYPE = "1.2.840.113549.1.9.3"
MESSAGE_DIGEST = "1.2.840.113549.1.9.4"
POLICY = "1.3.6.1.4.1.99999.1"


# -- the authority ---------------------------------------------------------------------------------
class LocalTSA:
    """A root CA and a TSA certificate it issued; :meth:`respond` answers one request."""

    def __init__(self) -> None:
        now = datetime.datetime.now(datetime.UTC)
        self.root_key = ec.generate_private_key(ec.SECP256R1())
        root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test root")])
        self.root = (
            x509.CertificateBuilder()
            .subject_name(root_name)
            .issuer_name(root_name)
            .public_key(self.root_key.public_key())
            .serial_number(1)
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(self.root_key, hashes.SHA256())
        )
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test tsa")]))
            .issuer_name(root_name)
            .public_key(self.key.public_key())
            .serial_number(2)
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True
            )
            .sign(self.root_key, hashes.SHA256())
        )
        self.serial = 0

    @property
    def root_pem(self) -> bytes:
        return self.root.public_bytes(serialization.Encoding.PEM)

    def respond(self, request: bytes) -> bytes:
        """A granted TimeStampResp for a DER TimeStampReq."""
        _, body, _ = read_tlv(request, 0)
        parts = list(children(body))
        imprint = parts[1][2]  # echoed as sent: algorithm and hash
        nonce = next((whole for tag, _, whole in parts[2:] if tag == 0x02), b"")
        self.serial += 1
        moment = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d%H%M%SZ").encode()
        tst_info = seq(integer(1), oid(POLICY), imprint, integer(self.serial), _tlv(0x18, moment), nonce)
        digest_alg = seq(oid(SHA256))
        attributes = [
            seq(oid(CONTENT_TYPE), set_of(oid(TST_INFO))),
            seq(oid(MESSAGE_DIGEST), set_of(octets(hashlib.sha256(tst_info).digest()))),
        ]
        signature = self.key.sign(set_of(*attributes), ec.ECDSA(hashes.SHA256()))
        issuer = self.cert.issuer.public_bytes()
        signer_info = seq(
            integer(1),
            seq(issuer, integer(self.cert.serial_number)),
            digest_alg,
            _tlv(0xA0, b"".join(sorted(attributes))),
            seq(oid(ECDSA_SHA256)),
            octets(signature),
        )
        signed_data = seq(
            integer(3),
            set_of(digest_alg),
            seq(oid(TST_INFO), explicit(0, octets(tst_info))),
            _tlv(0xA0, self.cert.public_bytes(serialization.Encoding.DER)),
            set_of(signer_info),
        )
        token = seq(oid(SIGNED_DATA), explicit(0, signed_data))
        return seq(seq(integer(0)), token)


@contextmanager
def serve(tsa: LocalTSA) -> Iterator[str]:
    """Run ``tsa`` over HTTP on loopback for the block; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = self.rfile.read(int(self.headers["Content-Length"]))
            answer = tsa.respond(request)
            self.send_response(200)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
