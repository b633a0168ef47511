"""TLS for ``gamma serve``: uvicorn's SSL options, and the client certificate in the ASGI scope.

uvicorn verifies a client certificate (``ssl_cert_reqs=CERT_REQUIRED`` against the client CA)
but does not hand it to the app. ``TLSProtocol``, uvicorn's h11 protocol with one addition,
puts each TLS connection's facts into every request's scope as the ASGI TLS extension
(``scope["extensions"]["tls"]``, asgiref's TLS spec 0.2), where ``client_certificate`` reads
them. With a client CA the protocol is pinned to h11 (the certificate must reach the scope,
and only this subclass puts it there); without one, uvicorn picks its own (httptools when
installed, as the serve extra does).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography import x509
from uvicorn.protocols.http.h11_impl import H11Protocol

from gamma.core.terms.errors import InputError

__all__ = ["TLSProtocol", "ssl_options", "client_certificate", "tls_extension"]

# the TLS versions' wire numbers (RFC 8446 appendix B, RFC 5246 appendix A.1)
_VERSIONS = {"TLSv1": 0x0301, "TLSv1.1": 0x0302, "TLSv1.2": 0x0303, "TLSv1.3": 0x0304}


def ssl_options(
    cert: str | Path | None, key: str | Path | None, client_ca: str | Path | None
) -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.run`` / ``uvicorn.Config``: TLS with ``cert`` (and ``key``
    when the certificate file does not hold it), and client certificates required and verified
    against ``client_ca`` when it is given. No ``cert``: plain HTTP, no options.

    The files are loaded here once, so a bad one is an InputError naming it before the server
    starts rather than a traceback in each worker.
    """
    if cert is None:
        if client_ca is not None or key is not None:
            raise InputError("a TLS key or client CA needs a server certificate", field="cert")
        return {}
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(str(cert), str(key) if key is not None else None)
    except (OSError, ssl.SSLError) as exc:
        message = f"cannot load the server certificate and key: {exc}"
        raise InputError(message, source=str(cert), field="cert") from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=str(client_ca))
        except (OSError, ssl.SSLError) as exc:
            message = f"cannot load the client CA: {exc}"
            raise InputError(message, source=str(client_ca), field="client_ca") from None
    return {
        "ssl_certfile": str(cert),
        "ssl_keyfile": str(key) if key is not None else None,
        "ssl_cert_reqs": ssl.CERT_REQUIRED if client_ca is not None else ssl.CERT_NONE,
        "ssl_ca_certs": str(client_ca) if client_ca is not None else None,
        "http": TLSProtocol,
    }


def client_certificate(scope: Mapping[str, Any]) -> bytes | None:
    """The verified client certificate of the request's TLS connection (DER), or None."""
    tls = scope.get("extensions", {}).get("tls")
    if not tls or tls.get("client_cert_error") is not None:
        return None
    first = next(iter(tls.get("client_cert_chain") or ()), None)
    return ssl.PEM_cert_to_DER_cert(first) if first is not None else None


def tls_extension(ssl_object: ssl.SSLObject) -> dict[str, Any]:
    """The ASGI TLS extension for one established connection.

    ``server_cert`` is None, as the spec allows (it is the operator's file, not the caller's).
    The chain holds the client's own certificate only: Python 3.11's ``ssl`` does not expose
    the intermediates the client sent.
    """
    der = ssl_object.getpeercert(binary_form=True)
    cipher = ssl_object.cipher()
    suite = None
    if cipher is not None:  # OpenSSL's cipher id ends with the IANA suite's two bytes
        ciphers = ssl_object.context.get_ciphers()
        suite = next((item["id"] & 0xFFFF for item in ciphers if item["name"] == cipher[0]), None)
    version = ssl_object.version()
    name = x509.load_der_x509_certificate(der).subject.rfc4514_string() if der else None
    return {
        "server_cert": None,
        "client_cert_chain": (ssl.DER_cert_to_PEM_cert(der),) if der else (),
        "client_cert_name": name,
        "client_cert_error": None,  # CERT_REQUIRED refuses an unverified one at the handshake
        "tls_version": _VERSIONS.get(version) if version is not None else None,
        "cipher_suite": suite,
    }


class TLSProtocol(H11Protocol):
    """uvicorn's h11 protocol that adds the ASGI TLS extension to each request's scope.

    asyncio calls ``connection_made`` once the handshake is done, so the peer certificate is
    known there; the app this connection calls is wrapped to add it to every request's scope.
    HTTP only: uvicorn hands a WebSocket upgrade to its own protocol, which ``gamma serve``
    does not use.
    """

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is None:  # the extension is for TLS connections only
            return
        extension = tls_extension(ssl_object)
        app = self.app

        async def with_tls(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                scope["extensions"] = {**scope.get("extensions", {}), "tls": dict(extension)}
            await app(scope, receive, send)

        self.app = with_tls
