"""A cluster's certificates: one CA and one certificate per identity.

``cluster up`` issues a fresh set into every run directory (the CA key is
thrown away once they are made: nothing can join a finished run);
``semiactive certs init DIR --config CONFIG`` issues a set for a deployment
(the CA key kept in DIR, so ``certs issue`` can add identities such as an
``ingest-*`` producer). ECDSA P-256, names as common name and DNS name
(semiactive/runtime/tls.py explains how they are checked).
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from semiactive.config import NAME
from semiactive.runtime.tls import ADMIN, CA_FILE, COORDINATOR, TlsError, cert_path, key_path
from semiactive.topology import Topology

CA_KEY_FILE = "ca.key"
NAME_PATTERN_HINT = "letters, digits, '_', '.', '-'"


def identities(topology: Topology) -> list[str]:
    """Everyone who talks in a cluster: its nodes, the coordinator, admin."""
    return [*topology.nodes, COORDINATOR, ADMIN]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _validity(days: float) -> tuple[datetime.datetime, datetime.datetime]:
    now = datetime.datetime.now(datetime.UTC)
    # A little backdating tolerates clocks a few minutes apart.
    return now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)


class CertificateAuthority:
    def __init__(self, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
        self.key = key
        self.cert = cert

    @classmethod
    def create(cls, cluster: str, days: float) -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        start, end = _validity(days)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(f"semiactive CA {cluster}"))
            .issuer_name(_name(f"semiactive CA {cluster}"))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    @classmethod
    def load(cls, directory: Path) -> CertificateAuthority:
        try:
            key = serialization.load_pem_private_key((directory / CA_KEY_FILE).read_bytes(), None)
            cert = x509.load_pem_x509_certificate((directory / CA_FILE).read_bytes())
        except (OSError, ValueError) as exc:
            raise TlsError(f"{directory}: no usable CA ({CA_FILE}, {CA_KEY_FILE}): {exc}") from None
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise TlsError(f"{directory / CA_KEY_FILE}: not an EC key")
        return cls(key, cert)

    def save(self, directory: Path, keep_key: bool) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / CA_FILE).write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        if keep_key:
            _write_key(directory / CA_KEY_FILE, self.key)

    def issue(self, directory: Path, name: str, days: float) -> None:
        """``name``'s key and certificate, for client and server use."""
        key = ec.generate_private_key(ec.SECP256R1())
        start, end = _validity(days)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .sign(self.key, hashes.SHA256())
        )
        _write_key(key_path(directory, name), key)
        cert_path(directory, name).write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def issue_certs(
    action: str, directory: Path, *, days: float, config: str | None = None, name: str = ""
) -> int:
    """``semiactive certs init|issue``: ``init`` needs ``config``, ``issue`` a ``name``."""
    from semiactive import config as config_mod
    from semiactive import topology as topology_mod

    if action == "init":
        assert config is not None
        topology = topology_mod.resolve(config_mod.load(config))
        if (directory / CA_FILE).exists():
            raise TlsError(f"{directory}: already holds a CA ({CA_FILE}); use `certs issue` or another DIR")
        names = identities(topology)
        issue_cluster(directory, topology.config.name, names, days, keep_ca_key=True)
        print(f"{directory}: CA and {len(names)} certificates ({', '.join(names)}), valid {days:g} days")
        print(f"keep {directory / CA_KEY_FILE} secret; a process needs {CA_FILE}, NAME.pem and NAME.key")
        return 0
    if not re.match(NAME, name):
        raise TlsError(f"bad identity name {name!r} ({NAME_PATTERN_HINT})")
    CertificateAuthority.load(directory).issue(directory, name, days)
    print(f"{directory}: issued {name}.pem and {name}.key")
    return 0


def issue_cluster(
    directory: Path, cluster: str, names: Iterable[str], days: float = 2.0, keep_ca_key: bool = False
) -> None:
    """A new CA and a certificate for each name, in ``directory``."""
    ca = CertificateAuthority.create(cluster, days)
    ca.save(directory, keep_ca_key)
    for name in names:
        ca.issue(directory, name, days)
