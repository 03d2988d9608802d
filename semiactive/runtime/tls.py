"""Mutual TLS on every gRPC channel of a cluster, and who a caller is.

A cluster has one CA (``semiactive certs init``, or per run by ``cluster
up``). Every identity has a certificate whose common name and DNS name are
its name: each node by its config name, ``coordinator``, and ``admin`` for
the launcher and operators' tools. Servers require a client certificate
signed by the CA; clients verify the server's certificate against the name
of the peer they meant to reach, so neither side can be impersonated
without its key. A caller's identity is the name in its verified
certificate, never a field of a message (docs/security.md).

``insecure: true`` in the config turns all of it off, for debugging; the
processes then say so on stderr, and no authorization check can hold.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from semiactive.config import ConfigError

log = logging.getLogger(__name__)

COORDINATOR = "coordinator"
ADMIN = "admin"
CA_FILE = "ca.pem"

ChannelOptions = Sequence[tuple[str, Any]]


class TlsError(ConfigError):
    """Credentials missing or unreadable; the message names the file."""


def cert_path(directory: Path, name: str) -> Path:
    return directory / f"{name}.pem"


def key_path(directory: Path, name: str) -> Path:
    return directory / f"{name}.key"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TlsError(f"{path}: cannot read TLS credentials: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class Security:
    """How one process talks: as ``name`` with mutual TLS, or insecure."""

    name: str
    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None

    @classmethod
    def load(cls, directory: Path, name: str) -> Security:
        """The CA and ``name``'s certificate and key from ``directory``."""
        return cls(
            name,
            _read(directory / CA_FILE),
            _read(cert_path(directory, name)),
            _read(key_path(directory, name)),
        )

    @classmethod
    def insecure(cls, name: str) -> Security:
        return cls(name)

    @property
    def tls(self) -> bool:
        return self.ca is not None

    def add_port(self, server: grpc.aio.Server, address: str) -> int:
        """Listen on ``address``; 0 when it cannot be bound."""
        if not self.tls:
            port: int = server.add_insecure_port(address)
            return port
        assert self.cert is not None and self.key is not None
        credentials = grpc.ssl_server_credentials(
            [(self.key, self.cert)], root_certificates=self.ca, require_client_auth=True
        )
        bound: int = server.add_secure_port(address, credentials)
        return bound

    def channel(self, address: str, peer: str, options: ChannelOptions = ()) -> grpc.aio.Channel:
        """A channel to the process named ``peer`` at ``address``: its
        certificate must carry that name."""
        if not self.tls:
            return grpc.aio.insecure_channel(address, options=list(options))
        return grpc.aio.secure_channel(
            address, self._client_credentials, options=[*options, ("grpc.ssl_target_name_override", peer)]
        )

    @functools.cached_property
    def _client_credentials(self) -> grpc.ChannelCredentials:
        # One object for every channel: gRPC shares a connection (its
        # subchannel) between channels of equal arguments, credentials
        # included, so a channel to a peer already connected (a standby's
        # warmed-up ones) costs no new TCP and TLS handshake.
        return grpc.ssl_channel_credentials(self.ca, self.key, self.cert)


def process_security(name: str, tls_dir: Path | None, insecure: bool) -> Security:
    """A process's security from its ``--tls-dir`` and the config's ``insecure``."""
    if insecure:
        log.warning(
            "insecure: true: no TLS, no authentication; anyone who reaches a port controls the cluster"
        )
        return Security.insecure(name)
    if tls_dir is None:
        raise TlsError(
            "this cluster runs mutual TLS: give --tls-dir (made by `semiactive certs init DIR --config "
            "CONFIG`), or set `insecure: true` in the config to debug without it"
        )
    return Security.load(tls_dir, name)


def caller(context: grpc.aio.ServicerContext[Any, Any]) -> str | None:
    """The verified name of the caller (its certificate's common name), or
    None on an insecure server, where nobody is authenticated."""
    auth = context.auth_context()
    names = auth.get("x509_common_name") or []
    if not names:
        return None
    return bytes(names[0]).decode("utf-8", "replace")
