"""Issuing certificates with ``cryptography`` (pki.py calls it; its win-amd64 wheel
does not load under Wine, so the Windows lane issues them on its Linux side)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


Issued = tuple[x509.Certificate, ec.EllipticCurvePrivateKey]


def issue(
    folder: Path,
    stem: str,
    subject: str,
    issuer: Issued | None,
    *,
    ca: bool = False,
    usage: list[x509.ObjectIdentifier] | None = None,
) -> Issued:
    """Write ``stem.pem`` and ``stem.key``: a certificate for ``subject`` signed by
    ``issuer`` (itself when None), valid for 127.0.0.1.

    With the extensions cfssl writes (etcd's guide makes its certificates with it):
    key usage, and subject and authority key identifiers. Python 3.13's default
    context verifies in OpenSSL's strict mode, which refuses a certificate issued
    by a CA without an authority key identifier.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    signer_key = issuer[1] if issuer else key
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer[0].subject if issuer else _name(subject))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=not ca,
                key_encipherment=not ca,
                key_cert_sign=ca,
                crl_sign=ca,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer_key.public_key()),
            critical=False,
        )
    )
    if not ca:
        san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage or []), critical=False)
    cert = builder.sign(signer_key, hashes.SHA256())
    (folder / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / f"{stem}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert, key
