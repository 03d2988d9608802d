"""``semiactive certs``: a CA and one certificate per identity, whose name
is what a server sees as the caller (semiactive/admin/certificates.py)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from tests.processes import semiactive

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "paper-chain-ha.yaml"


def _names(path: Path) -> tuple[str, list[str]]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    common = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return str(common), sans.get_values_for_type(x509.DNSName)


def test_init_issues_every_identity_and_issue_adds_one(tmp_path: Path) -> None:
    directory = tmp_path / "tls"
    made = semiactive("certs", "init", str(directory), "--config", str(CONFIG), timeout=60)
    assert made.returncode == 0, made.stderr
    for name in ("node-0", "node-1", "node-2", "node-3", "node-4", "sink", "coordinator", "admin"):
        assert _names(directory / f"{name}.pem") == (name, [name])
        assert stat.S_IMODE((directory / f"{name}.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((directory / "ca.key").stat().st_mode) == 0o600
    again = semiactive("certs", "init", str(directory), "--config", str(CONFIG), timeout=60)
    assert again.returncode == 2 and "already holds a CA" in again.stderr
    added = semiactive("certs", "issue", str(directory), "ingest-orders", timeout=60)
    assert added.returncode == 0, added.stderr
    assert _names(directory / "ingest-orders.pem") == ("ingest-orders", ["ingest-orders"])
    bad = semiactive("certs", "issue", str(directory), "../evil", timeout=60)
    assert bad.returncode == 2 and "bad identity name" in bad.stderr


def test_a_node_without_credentials_says_how_to_get_them(tmp_path: Path) -> None:
    endpoints = tmp_path / "endpoints.json"
    names = ("node-0", "node-1", "node-2", "node-3", "node-4", "sink")
    endpoints.write_text(json.dumps({n: {"port": 1 + i} for i, n in enumerate(names)}))
    common = ("node", "--config", str(CONFIG), "--name", "node-1", "--endpoints", str(endpoints))
    result = semiactive(*common, timeout=60)
    assert result.returncode == 2
    assert "give --tls-dir" in result.stderr and "certs init" in result.stderr
    missing = semiactive(*common, "--tls-dir", str(tmp_path), timeout=60)
    assert missing.returncode == 2 and "ca.pem: cannot read TLS credentials" in missing.stderr
