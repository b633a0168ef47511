"""Caller identity for ``gamma serve``: the callers file, bearer tokens, mTLS and the verifier.

The TLS tests run a real uvicorn server over real TLS on loopback, with a CA, server and
client certificates made here, and a tiny Starlette app that echoes who authenticated.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn")  # the TLS tests run a real server: the extra gamma-governance[serve]
pytest.importorskip("starlette")

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gamma.core.terms.errors import (
    ActorError,
    InputError,
    MissingFieldError,
    UnknownFieldError,
    ValueTypeError,
)
from gamma.core.terms.model import Actor
from gamma.core.terms.policy import DEFAULT_POLICY
from gamma.serve.errors import Unauthenticated
from gamma.serve.identity import Callers, authenticate, new_token, token_sha256
from gamma.serve.tls import TLSProtocol, client_certificate, ssl_options
from gamma.serve.types import Caller

ALICE_TOKEN = "alice-token-0123456789abcdefghijklmnopqrstuvw"
BOB_TOKEN = "bob-token-0123456789abcdefghijklmnopqrstuvwxyz"
HOST_TOKEN = "host-issued-token-not-in-the-file"
HOST_CALLER = Caller(name="host-issued", actor=Actor(id="hank", tenant="acme", clearance="public"))


def callers_text(alice_cert: str = "ab" * 32) -> str:
    return f"""\
# callers of the test server
[[caller]]
name = "alice-agent"
token_sha256 = "{token_sha256(ALICE_TOKEN)}"
cert_sha256 = "{alice_cert}"
actor = {{ id = "alice", tenant = "acme", roles = ["analyst"], clearance = "internal" }}

[[caller]]
name = "bob-agent"
token_sha256 = "{token_sha256(BOB_TOKEN)}"
auditor = true
[caller.actor]
id = "bob"
tenant = "acme"
"""


def verifier(token: str) -> Caller | None:
    return HOST_CALLER if token == HOST_TOKEN else None


def expect_unauthenticated(message: str, *args: Any, **kwargs: Any) -> Unauthenticated:
    with pytest.raises(Unauthenticated) as info:
        authenticate(*args, **kwargs)
    assert str(info.value) == message
    return info.value


class TestCallersFile:
    """Loading the callers file: what it holds, and errors that name the file, line, entry and field."""

    def test_loads_in_file_order_with_normalised_actors(self, tmp_path: Path) -> None:
        """Callers come back in file order, their actors parsed by gamma's actor rules."""
        path = tmp_path / "callers.toml"
        path.write_text(callers_text())
        callers = Callers.load(path)
        assert [caller.name for caller in callers] == ["alice-agent", "bob-agent"]
        alice, bob = callers
        assert alice.actor == Actor(
            id="alice", tenant="acme", roles=("analyst",), clearance="internal"
        )
        assert (
            bob.actor.clearance == DEFAULT_POLICY.clearance_default
            and bob.auditor
            and not alice.auditor
        )
        assert callers.by_token(ALICE_TOKEN) == alice and callers.by_token(BOB_TOKEN) == bob
        assert callers.by_certificate(b"not alice's certificate") is None
        assert len(callers) == 2

    def test_repr_holds_no_secret(self) -> None:
        """Neither the token nor its digest shows in the repr of Callers or of a Caller."""
        callers = Callers.parse(callers_text())
        shown = repr(callers) + repr(list(callers))
        assert "alice-agent" in shown
        digest = token_sha256(ALICE_TOKEN)
        for secret in (
            ALICE_TOKEN,
            BOB_TOKEN,
            digest,
            repr(bytes.fromhex(digest))[2:-1],
            "ab" * 32,
        ):
            assert secret not in shown

    def test_the_clearance_ladder_is_the_policys(self) -> None:
        """An actor's clearance must be on the ladder of the policy the server runs."""
        text = callers_text().replace('clearance = "internal"', 'clearance = "cosmic"')
        with pytest.raises(ActorError) as info:
            Callers.parse(text, source="callers.toml")
        assert (info.value.line, info.value.field) == (6, "actor.clearance")

    @pytest.mark.parametrize(
        ("old", "new", "error", "line", "field", "words"),
        [
            pytest.param(
                "auditor = true",
                "auditor = true\nrole = 'x'",
                UnknownFieldError,
                12,
                "role",
                "caller entry 2: unknown field",
                id="unknown-field",
            ),
            pytest.param(
                'actor = { id = "alice", tenant = "acme", roles = ["analyst"], clearance = "internal" }\n',
                "",
                MissingFieldError,
                2,
                "actor",
                "caller entry 1: missing required field",
                id="missing-actor",
            ),
            pytest.param(
                'cert_sha256 = "' + "ab" * 32,
                'cert_sha256 = "' + "ab" * 31 + "zz",
                ValueTypeError,
                5,
                "cert_sha256",
                "caller entry 1: expected 64 hexadecimal",
                id="bad-hex",
            ),
            pytest.param(
                'name = "bob-agent"',
                'name = "alice-agent"',
                ValueTypeError,
                9,
                "name",
                "caller entry 2: name 'alice-agent' is also caller entry 1's",
                id="duplicate-name",
            ),
            pytest.param(
                token_sha256(BOB_TOKEN),
                token_sha256(ALICE_TOKEN).upper(),
                ValueTypeError,
                10,
                "token_sha256",
                "caller entry 2: the same digest as caller entry 1",
                id="duplicate-token",
            ),
            pytest.param(
                "auditor = true",
                'auditor = true\ncert_sha256 = "' + "AB" * 32 + '"',
                ValueTypeError,
                12,
                "cert_sha256",
                "caller entry 2: the same digest as caller entry 1",
                id="duplicate-certificate",
            ),
            pytest.param(
                'id = "bob"',
                'id = ""',
                ActorError,
                13,
                "actor.id",
                "caller entry 2: must be a non-empty",
                id="actor-rules",
            ),
            pytest.param(
                'tenant = "acme"\n',
                'tenant = "acme"\nextra = 1\n',
                ActorError,
                15,
                "actor.extra",
                "caller entry 2: unknown field",
                id="actor-unknown-field",
            ),
            pytest.param(
                'token_sha256 = "' + token_sha256(BOB_TOKEN) + '"\n',
                "",
                MissingFieldError,
                8,
                "token_sha256",
                "needs token_sha256, cert_sha256 or both",
                id="no-credential",
            ),
            pytest.param(
                "auditor = true",
                'auditor = "yes"',
                ValueTypeError,
                11,
                "auditor",
                "expected true or false",
                id="auditor-not-bool",
            ),
            pytest.param(
                '[[caller]]\nname = "bob',
                '[[caller]\nname = "bob',
                InputError,
                8,
                None,
                "invalid TOML",
                id="invalid-toml",
            ),
            pytest.param(
                "# callers of the test server",
                "mode = 'open'",
                UnknownFieldError,
                1,
                "mode",
                "unknown top-level key",
                id="unknown-top-level",
            ),
        ],
    )
    def test_errors_name_file_line_entry_and_field(
        self,
        tmp_path: Path,
        old: str,
        new: str,
        error: type[InputError],
        line: int | None,
        field: str | None,
        words: str,
    ) -> None:
        """Each refusal is an InputError naming the file, the line, the 1-based entry and the field."""
        text = callers_text()
        assert old in text
        path = tmp_path / "callers.toml"
        path.write_text(text.replace(old, new, 1))
        with pytest.raises(error) as info:
            Callers.load(path)
        assert type(info.value) is error
        assert (info.value.source, info.value.line, info.value.field) == (str(path), line, field)
        assert words in info.value.message
        assert str(path) in str(info.value)

    def test_an_unreadable_file_is_an_input_error(self, tmp_path: Path) -> None:
        """A missing file is an InputError naming it, not an OSError."""
        with pytest.raises(InputError, match="cannot read the callers file") as info:
            Callers.load(tmp_path / "absent.toml")
        assert info.value.source == str(tmp_path / "absent.toml")

    def test_new_token_is_listed_by_its_digest(self) -> None:
        """new_token's digest is what the file lists, and the token authenticates by it."""
        token, digest = new_token()
        assert digest == hashlib.sha256(token.encode()).hexdigest() and len(token) >= 43
        assert new_token()[0] != token
        text = callers_text().replace(token_sha256(BOB_TOKEN), digest)
        assert authenticate(Callers.parse(text), f"Bearer {token}", None).name == "bob-agent"


class TestAuthenticate:
    """authenticate: the bearer token, the certificate and the verifier, and what a refusal says."""

    callers = Callers.parse(callers_text(alice_cert=hashlib.sha256(b"alice-der").hexdigest()))

    @pytest.mark.parametrize(
        "header", [f"Bearer {ALICE_TOKEN}", f"bearer {ALICE_TOKEN}", f"BEARER  {ALICE_TOKEN} "]
    )
    def test_a_good_token_authenticates(self, header: str) -> None:
        """The scheme is case-insensitive (RFC 7235); the token maps to its caller."""
        assert authenticate(self.callers, header, None).name == "alice-agent"

    def test_missing_credentials(self) -> None:
        """No header and no certificate: 'missing credentials'."""
        expect_unauthenticated("missing credentials", self.callers, None, None)

    @pytest.mark.parametrize(
        "header",
        [
            f"Bearer {ALICE_TOKEN}x",
            f"Basic {ALICE_TOKEN}",
            "Bearer",
            "Bearer ",
            "",
            ALICE_TOKEN,
            f"Bearer {ALICE_TOKEN} extra",
            f"Bearer\t{ALICE_TOKEN}",
            "Bearer tok\u00e9n",
        ],
    )
    def test_wrong_or_malformed_tokens_are_invalid_alike(self, header: str) -> None:
        """A wrong token and a malformed header get the same message, which holds no token."""
        error = expect_unauthenticated(
            "invalid credentials", self.callers, header, None, verifier=verifier
        )
        assert ALICE_TOKEN not in str(error) and error.__cause__ is None

    def test_the_verifier_decides_tokens_not_in_the_file(self) -> None:
        """A token not in the file goes to the host's verifier; a file token never does."""
        asked: list[str] = []

        def recording(token: str) -> Caller | None:
            asked.append(token)
            return verifier(token)

        assert (
            authenticate(self.callers, f"Bearer {HOST_TOKEN}", None, verifier=recording)
            == HOST_CALLER
        )
        assert (
            authenticate(self.callers, f"Bearer {BOB_TOKEN}", None, verifier=recording).name
            == "bob-agent"
        )
        assert asked == [HOST_TOKEN]
        expect_unauthenticated("invalid credentials", self.callers, f"Bearer {HOST_TOKEN}", None)

    def test_a_verifier_must_return_a_caller(self) -> None:
        """A verifier returning something else is the host's bug, never a caller."""
        with pytest.raises(TypeError):
            authenticate(self.callers, f"Bearer {HOST_TOKEN}", None, verifier=lambda _: "alice")  # type: ignore[arg-type,return-value]

    def test_certificate_maps_to_its_caller(self) -> None:
        """A listed certificate alone authenticates; with its own caller's token too."""
        assert authenticate(self.callers, None, b"alice-der").name == "alice-agent"
        assert (
            authenticate(self.callers, f"Bearer {ALICE_TOKEN}", b"alice-der").name == "alice-agent"
        )

    def test_certificate_and_token_of_different_callers_are_refused(self) -> None:
        """A certificate of one caller with another caller's (or the host's) token: 401."""
        expect_unauthenticated(
            "invalid credentials", self.callers, f"Bearer {BOB_TOKEN}", b"alice-der"
        )
        expect_unauthenticated(
            "invalid credentials",
            self.callers,
            f"Bearer {HOST_TOKEN}",
            b"alice-der",
            verifier=verifier,
        )

    def test_an_unlisted_certificate_names_no_caller(self) -> None:
        """An unlisted (CA-verified) certificate is transport only: alone it is invalid, a token decides."""
        expect_unauthenticated("invalid credentials", self.callers, None, b"other-der")
        assert authenticate(self.callers, f"Bearer {BOB_TOKEN}", b"other-der").name == "bob-agent"


# -- over real TLS ----------------------------------------------------------------------------


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _issue(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, Any] | None,
    *,
    ca: bool = False,
    server: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer[0].subject if issuer else _name(subject))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        )
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        assert issuer is not None
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer[1].public_key()),
            critical=False,
        )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


class Pki:
    """A CA, a server and two client certificates of it, and one client of another CA, as files."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        ca_key, other_key = (
            ec.generate_private_key(ec.SECP256R1()),
            ec.generate_private_key(ec.SECP256R1()),
        )
        ca = _issue("gamma test CA", ca_key, None, ca=True)
        other = _issue("another CA", other_key, None, ca=True)
        self.ca = self._write("ca", ca)
        self.server = self._pair("server", ca, ca_key, server=True)
        self.alice = self._pair("alice", ca, ca_key)
        self.carol = self._pair("carol", ca, ca_key)
        self.mallory = self._pair("mallory", other, other_key)

    def _write(self, name: str, cert: x509.Certificate, key: Any = None) -> Path:
        path = self.folder / f"{name}.pem"
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        if key is not None:
            (self.folder / f"{name}.key").write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
        return path

    def _pair(
        self, name: str, ca: x509.Certificate, ca_key: Any, *, server: bool = False
    ) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _issue(f"{name}.test", key, (ca, ca_key), server=server)
        return self._write(name, cert, key), self.folder / f"{name}.key"

    def der(self, pair: tuple[Path, Path]) -> bytes:
        return ssl.PEM_cert_to_DER_cert(pair[0].read_text())

    def client(self, pair: tuple[Path, Path] | None, *, tls12: bool = False) -> httpx.Client:
        context = ssl.create_default_context(cafile=str(self.ca))
        if tls12:
            context.maximum_version = ssl.TLSVersion.TLSv1_2
        if pair is not None:
            context.load_cert_chain(str(pair[0]), str(pair[1]))
        return httpx.Client(verify=context, timeout=5)


class EchoServer:
    """A uvicorn server in a thread, on a free loopback port, serving an app that echoes the caller."""

    def __init__(self, pki: Pki, callers: Callers, *, mtls: bool) -> None:
        self.calls = 0
        self.scopes: list[dict[str, Any]] = []

        async def whoami(request: Request) -> JSONResponse:
            self.calls += 1
            self.scopes.append(dict(request.scope))
            try:
                caller = authenticate(
                    callers,
                    request.headers.get("authorization"),
                    client_certificate(request.scope),
                    verifier=verifier,
                )
            except Unauthenticated as exc:
                return JSONResponse({"error": str(exc)}, status_code=exc.status)
            return JSONResponse({"name": caller.name})

        app = Starlette(routes=[Route("/whoami", whoami)])
        options = ssl_options(pki.server[0], pki.server[1], pki.ca if mtls else None)
        config = uvicorn.Config(app, ws="none", lifespan="off", log_level="info", **options)
        self.server = uvicorn.Server(config)
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self.socket.getsockname()[1]}/whoami"
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )

    def __enter__(self) -> EchoServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), (
                "the server did not start"
            )
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def callers(pki: Pki) -> Callers:
    carol = hashlib.sha256(pki.der(pki.carol)).hexdigest()
    text = (
        callers_text(alice_cert=hashlib.sha256(pki.der(pki.alice)).hexdigest())
        + f"""
[[caller]]
name = "carol-gateway"
cert_sha256 = "{carol}"
actor = {{ id = "carol", tenant = "globex" }}
"""
    )
    return Callers.parse(text)


@pytest.fixture(scope="module")
def mtls_server(pki: Pki, callers: Callers) -> Iterator[EchoServer]:
    with EchoServer(pki, callers, mtls=True) as server:
        yield server


@pytest.fixture(scope="module")
def tls_server(pki: Pki, callers: Callers) -> Iterator[EchoServer]:
    with EchoServer(pki, callers, mtls=False) as server:
        yield server


class TestOverTLS:
    """A real uvicorn server over real TLS: tokens, client certificates and refusals."""

    def test_bearer_token_over_tls(self, tls_server: EchoServer, pki: Pki) -> None:
        """Server TLS only: a good token authenticates, the scope carries TLS without a client cert."""
        with pki.client(None) as client:
            reply = client.get(tls_server.url, headers={"Authorization": f"Bearer {BOB_TOKEN}"})
        assert (reply.status_code, reply.json()) == (200, {"name": "bob-agent"})
        tls = tls_server.scopes[-1]["extensions"]["tls"]
        assert tls["client_cert_chain"] == () and tls["client_cert_name"] is None
        assert tls["tls_version"] == 0x0304 and tls["server_cert"] is None  # TLS 1.3 by default
        assert tls["cipher_suite"] in (0x1301, 0x1302, 0x1303)  # RFC 8446 B.4, as the spec encodes

    def test_tls_12_reports_its_numbers(self, mtls_server: EchoServer, pki: Pki) -> None:
        """Over TLS 1.2 the extension carries 0x0303 and an ECDHE-ECDSA suite's IANA number."""
        with pki.client(pki.alice, tls12=True) as client:
            assert client.get(mtls_server.url).json() == {"name": "alice-agent"}
        tls = mtls_server.scopes[-1]["extensions"]["tls"]
        assert tls["tls_version"] == 0x0303 and tls["cipher_suite"] in (0xC02B, 0xC02C, 0xCCA9)

    def test_refusals_never_log_the_token(
        self, tls_server: EchoServer, pki: Pki, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A wrong, a missing and a malformed credential are 401s; no log line holds the token."""
        wrong = ALICE_TOKEN[::-1]
        with caplog.at_level(logging.DEBUG), pki.client(None) as client:
            replies = [
                client.get(tls_server.url, headers={"Authorization": f"Bearer {wrong}"}),
                client.get(tls_server.url),
                client.get(tls_server.url, headers={"Authorization": f"Token {ALICE_TOKEN}"}),
                client.get(tls_server.url, headers={"Authorization": f"Bearer {ALICE_TOKEN}"}),
            ]
        assert [(r.status_code, r.json()) for r in replies] == [
            (401, {"error": "invalid credentials"}),
            (401, {"error": "missing credentials"}),
            (401, {"error": "invalid credentials"}),
            (200, {"name": "alice-agent"}),
        ]
        logged = caplog.text + "".join(repr(record.args) for record in caplog.records)
        assert "GET /whoami" in logged  # the access log did run
        assert wrong not in logged and ALICE_TOKEN not in logged

    def test_client_certificate_maps_to_its_caller(self, mtls_server: EchoServer, pki: Pki) -> None:
        """mTLS: each listed client certificate authenticates as its caller, with no token."""
        for pair, name in ((pki.alice, "alice-agent"), (pki.carol, "carol-gateway")):
            with pki.client(pair) as client:
                reply = client.get(mtls_server.url)
            assert (reply.status_code, reply.json()) == (200, {"name": name})
        tls = mtls_server.scopes[-1]["extensions"]["tls"]
        assert tls["client_cert_name"] == "CN=carol.test" and tls["client_cert_error"] is None
        assert client_certificate(mtls_server.scopes[-1]) == pki.der(pki.carol)

    def test_certificate_and_token_must_agree(self, mtls_server: EchoServer, pki: Pki) -> None:
        """Alice's certificate with Bob's token is refused; with her own token it passes."""
        with pki.client(pki.alice) as client:
            mixed = client.get(mtls_server.url, headers={"Authorization": f"Bearer {BOB_TOKEN}"})
            own = client.get(mtls_server.url, headers={"Authorization": f"Bearer {ALICE_TOKEN}"})
        assert (mixed.status_code, own.status_code) == (401, 200)

    @pytest.mark.parametrize("who", ["mallory", None])
    def test_other_ca_or_no_certificate_is_refused_at_the_handshake(
        self, mtls_server: EchoServer, pki: Pki, who: str | None
    ) -> None:
        """A client certificate of another CA, or none, never reaches the app, even with a good token."""
        calls = mtls_server.calls
        with (
            pki.client(pki.mallory if who else None) as client,
            pytest.raises(httpx.TransportError),
        ):
            client.get(mtls_server.url, headers={"Authorization": f"Bearer {ALICE_TOKEN}"})
        assert mtls_server.calls == calls


class TestTLSOptions:
    """ssl_options and client_certificate outside a server."""

    def test_plain_http_has_no_options(self) -> None:
        """No certificate: no TLS options, and a key or client CA alone is refused."""
        assert ssl_options(None, None, None) == {}
        with pytest.raises(InputError):
            ssl_options(None, None, "ca.pem")

    def test_options_require_client_certificates_with_a_client_ca(self, pki: Pki) -> None:
        """With a client CA, uvicorn is told to require and verify client certificates."""
        options = ssl_options(pki.server[0], pki.server[1], pki.ca)
        assert options["ssl_cert_reqs"] == ssl.CERT_REQUIRED and options["ssl_ca_certs"] == str(
            pki.ca
        )
        assert options["http"] is TLSProtocol
        assert ssl_options(pki.server[0], pki.server[1], None)["ssl_cert_reqs"] == ssl.CERT_NONE

    @pytest.mark.parametrize("field", ["cert", "client_ca"])
    def test_a_bad_file_is_named_before_the_server_starts(
        self, pki: Pki, tmp_path: Path, field: str
    ) -> None:
        """An unloadable certificate or CA file is an InputError naming the field and the file."""
        bad = tmp_path / "bad.pem"
        bad.write_text("not a certificate")
        args = {"cert": pki.server[0], "key": pki.server[1], "client_ca": pki.ca} | {field: bad}
        with pytest.raises(InputError) as info:
            ssl_options(**args)
        assert (info.value.field, info.value.source) == (field, str(bad))

    def test_no_tls_extension_no_certificate(self) -> None:
        """A plain-HTTP scope, or a certificate the server flags as unverified, gives no certificate."""
        assert client_certificate({"type": "http"}) is None
        assert (
            client_certificate({"type": "http", "extensions": {"tls": {"client_cert_chain": ()}}})
            is None
        )
        flagged = {
            "client_cert_chain": ["-----BEGIN CERTIFICATE-----"],
            "client_cert_error": "expired",
        }
        assert client_certificate({"type": "http", "extensions": {"tls": flagged}}) is None
