"""Certificates for servers that speak TLS: a CA, a server's and a client's
certificate, and a CA nobody trusts (issued by certificates.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Pki:
    folder: Path

    def path(self, name: str) -> str:
        return str(self.folder / name)


def make_pki(folder: Path) -> Pki:
    """A CA, a server certificate, a client certificate, and a stranger CA in ``folder``."""
    from certificates import issue
    from cryptography.x509.oid import ExtendedKeyUsageOID

    ca = issue(folder, "ca", "skf test CA", None, ca=True)
    # etcd's gateway dials its own gRPC port with the server certificate as a client's.
    both = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    issue(folder, "server", "127.0.0.1", ca, usage=both)
    issue(folder, "client", "skf-agent", ca, usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    issue(folder, "stranger-ca", "another CA", None, ca=True)
    return Pki(folder)
