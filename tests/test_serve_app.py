"""``gamma serve`` as a client meets it: a real server process (``serve_process``), httpx.

One single-worker server serves most tests (module scope: it starts once); two workers
over one store, and a server stopped mid-request, have their own.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import signal
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

import httpx  # noqa: E402
import structlog  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from serve_process import Server, serving, start, write_callers  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402
from test_serve_identity import Pki  # noqa: E402

import gamma  # noqa: E402
from gamma.audit.checkpoint import generate_key, verify_checkpoint  # noqa: E402
from gamma.cli import main  # noqa: E402
from gamma.core.reading.events import load_events  # noqa: E402
from gamma.serve.app import HTTP_PROTOCOL, ROUTES, OneSendHttpTools, OneSendTransport, create_app  # noqa: E402
from gamma.serve.config import ServeConfig  # noqa: E402
from gamma.serve.endpoints import HANDLERS  # noqa: E402
from gamma.serve.freshness import FreshnessToken  # noqa: E402
from gamma.serve.replay import replay_decisions  # noqa: E402
from gamma.serve.service import refusal  # noqa: E402
from gamma.storage.decisions import DecisionLog, DecisionLogFailure, decision_log_path  # noqa: E402
from gamma.storage.proofs import parse_inclusion  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "fixtures" / "examples" / "acme.jsonl"
NOW = "2026-03-02T10:00:00Z"
ALICE = {"id": "alice", "tenant": "acme", "roles": ["sales"], "clearance": "internal",
         "scope": "helios/launch"}
LEGAL = {"id": "legal-lead", "tenant": "acme", "roles": ["legal"], "clearance": "internal"}
CALLERS = [
    {"name": "alice-agent", "actor": ALICE},
    {"name": "legal", "actor": LEGAL},
    {"name": "auditor", "actor": {"id": "audit", "tenant": "acme"}, "auditor": True},
]


def evaluation(fact: str, subject: str = "alice", **context: str) -> dict[str, Any]:
    body: dict[str, Any] = {"subject": {"type": "agent", "id": subject},
                            "action": {"name": "rely"}, "resource": {"type": "fact", "id": fact}}
    if context:
        body["context"] = context
    return body


def make_store(path: Path) -> Path:
    with gamma.Store.init(path) as store:
        store.append(EXAMPLE.read_text(encoding="utf-8"))
    return path


SIGNER = generate_key("gamma-test")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("serve")
    tokens = write_callers(root / "callers.toml", CALLERS)
    (root / "signer.key").write_text(SIGNER.encode() + "\n", encoding="utf-8")
    return make_store(root / "memory.db"), root / "callers.toml", tokens


@pytest.fixture(scope="module")
def server(setup: tuple[Path, Path, dict[str, str]]) -> Iterator[Server]:
    store, callers, _ = setup
    with serving(store, callers, "--max-body", "4096", "--fresh-wait", "0.5",
                 "--signer-key", str(store.parent / "signer.key")) as running:
        yield running


@pytest.fixture(scope="module")
def tokens(setup: tuple[Path, Path, dict[str, str]]) -> dict[str, str]:
    return setup[2]


def rows(store: Path) -> int:
    with DecisionLog.open(decision_log_path(store), read_only=True) as log:
        return len(log)


class TestAuthentication:
    """Every route but health, readiness and discovery needs a caller."""

    @pytest.mark.parametrize("path", ["/v1/resolve", "/access/v1/evaluation", "/v1/append"])
    def test_missing_or_bad_token_is_401(self, server: Server, path: str) -> None:
        """No token and a forged one are both 401, with a Bearer challenge and a JSON error,
        and no ``Gamma-Token`` (the log position tells how much every tenant wrote)."""
        for headers in ({}, {"Authorization": "Bearer forged-token"}, {"Authorization": "Basic x"}):
            with server.client() as client:
                response = client.post(path, json={}, headers=headers)
            assert response.status_code == 401
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert response.json()["error"]["code"] == "unauthenticated"
            assert "gamma-token" not in response.headers

    def test_no_position_without_a_caller(self, server: Server) -> None:
        """Health, readiness, discovery and a 404 answer anyone, and tell nothing of the log:
        no ``Gamma-Token``, and ``/readyz`` is ready without a position."""
        with server.client() as client:
            answers = [client.get(path) for path in
                       ("/healthz", "/readyz", "/.well-known/authzen-configuration", "/nowhere")]
        assert [a.status_code for a in answers] == [200, 200, 200, 404]
        assert [a for a in answers if "gamma-token" in a.headers] == []
        assert answers[1].json() == {"ready": True}

    def test_metrics_are_the_auditors(self, server: Server, tokens: dict[str, str]) -> None:
        """``/metrics`` counts every tenant's decisions: 401 without a caller, 403 for a caller
        that is no auditor, Prometheus text with the series for an auditor (a scraper's token)."""
        with server.client() as client:
            assert client.get("/metrics").status_code == 401
        with server.client(tokens["alice-agent"]) as client:
            client.post("/access/v1/evaluation", json=evaluation("F1"))
            refused = client.get("/metrics")
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "forbidden"
        assert "gamma_serve" not in refused.text
        with server.client(tokens["auditor"]) as client:
            text = client.get("/metrics").text
        assert 'gamma_serve_requests_total{route="/metrics",status="401"}' in text
        assert 'gamma_serve_requests_total{route="/metrics",status="403"}' in text
        assert 'gamma_serve_decisions_total{endpoint="evaluation",outcome="permit"}' in text
        assert "gamma_serve_log_position" in text


class TestDiscovery:
    """The AuthZEN discovery document names the server as configured, never as a client says."""

    def test_forwarded_proto_is_not_trusted(self, server: Server) -> None:
        """``X-Forwarded-Proto`` from a loopback client (which uvicorn trusts by default)
        does not turn the advertised endpoints into https ones."""
        with server.client() as client:
            document = client.get("/.well-known/authzen-configuration",
                                  headers={"X-Forwarded-Proto": "https"}).json()
        assert document["policy_decision_point"] == server.url
        assert document["access_evaluation_endpoint"] == f"{server.url}/access/v1/evaluation"

    def test_public_url_is_named_whatever_the_host_header(self, limited: Server) -> None:
        with limited.client() as client:
            document = client.get("/.well-known/authzen-configuration",
                                  headers={"Host": "evil.example", "X-Forwarded-Proto": "http"}).json()
        assert document["policy_decision_point"] == PUBLIC
        assert document["access_evaluations_endpoint"] == f"{PUBLIC}/access/v1/evaluations"


PUBLIC = "https://pdp.example/gamma"


@pytest.fixture(scope="module")
def limited(setup: tuple[Path, Path, dict[str, str]]) -> Iterator[Server]:
    """A server with a public URL and tight connection limits: 3 connections, 1 s keep-alive."""
    store, callers, _ = setup
    with serving(store, callers, "--public-url", PUBLIC, "--max-connections", "3",
                 "--keep-alive", "1") as running:
        yield running


def _connect(server: Server) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=5)


class TestConnectionLimits:
    """A client that holds connections open cannot hold the server: past ``--max-connections``
    a request is 503, and an idle keep-alive connection is closed after ``--keep-alive``."""

    def test_past_max_connections_is_503(self, limited: Server) -> None:
        idle = [_connect(limited) for _ in range(3)]
        try:
            time.sleep(0.2)  # the server has accepted them
            with limited.client() as client:
                assert client.get("/healthz").status_code == 503
        finally:
            for sock in idle:
                sock.close()
        deadline = time.monotonic() + 5
        with limited.client() as client:
            while (status := client.get("/healthz").status_code) != 200 and time.monotonic() < deadline:
                time.sleep(0.05)
        assert status == 200

    def test_an_idle_keep_alive_connection_is_closed(self, limited: Server) -> None:
        with _connect(limited) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while not answer.endswith(b'{"status":"ok"}'):  # headers and body may come apart
                chunk = sock.recv(65536)
                assert chunk, answer
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200"), answer
            started = time.monotonic()
            assert sock.recv(65536) == b""  # closed by the server, not by our 5 s timeout
            assert time.monotonic() - started < 4


class TestOwnApi:
    """resolve, explain, check and append as the CLI would answer them."""

    def test_resolve_is_gamma_resolve_byte_for_byte(self, server: Server, tokens: dict[str, str]) -> None:
        """The record is ``gamma.resolve`` for the caller's actor at ``at``, and the context
        block is its rendering."""
        expected = gamma.resolve(load_events(EXAMPLE), ALICE, NOW)
        with server.client(tokens["auditor"]) as client:  # only an auditor chooses the time
            response = client.post("/v1/resolve", json={"at": NOW, "subject": ALICE})
        assert response.status_code == 200
        assert b'"resolution":' + expected.to_json_bytes() in response.content
        body = response.json()
        assert body["context"] == expected.render("context")
        assert body["token"] == response.headers["gamma-token"]

    def test_resolve_never_takes_an_actor_from_the_body(self, server: Server, tokens: dict[str, str],
                                                        setup: tuple[Path, Path, dict[str, str]]) -> None:
        """A caller that is no auditor naming another subject is refused, 403; an auditor
        gets that subject's resolution, logged as on its behalf."""
        with server.client(tokens["alice-agent"]) as client:
            response = client.post("/v1/resolve", json={"subject": LEGAL})
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "forbidden"
        with server.client(tokens["auditor"]) as client:
            response = client.post("/v1/resolve", json={"at": NOW, "subject": ALICE, "view": "json"})
        expected = gamma.resolve(load_events(EXAMPLE), ALICE, NOW)
        assert response.json()["resolution"] == expected.to_dict()
        with DecisionLog.open(decision_log_path(setup[0]), read_only=True) as log:
            last = [entry for _, entry in log.entries()][-1]
        assert (last.caller, last.auditor, last.on_behalf) == ("auditor", True, expected.to_dict()["actor"])

    def test_check_is_the_hosts_not_an_agents(self, server: Server, tokens: dict[str, str]) -> None:
        """An agent cannot check a response (its findings would confirm a withheld value);
        the host (an auditor) checks one for alice as ``gamma.validate`` does."""
        body = {"question": "What is the severance?", "response": "The severance is $40,000.",
                "at": NOW}
        with server.client(tokens["alice-agent"]) as client:
            assert client.post("/v1/check", json=body).status_code == 403
        with server.client(tokens["auditor"]) as client:
            answer = client.post("/v1/check", json={**body, "subject": ALICE})
        expected = gamma.validate(EXAMPLE, actor=ALICE, at=NOW, question=body["question"],
                                  response=body["response"])
        assert answer.status_code == 200
        assert answer.json()["violations"] == expected.to_dict()["violations"] != []

    def test_other_tenants_fact_is_a_missing_one(self, server: Server, tokens: dict[str, str]) -> None:
        """G1 is globex's: every endpoint answers it exactly as an id that does not exist."""
        with server.client(tokens["alice-agent"]) as client:
            for path, field in (("/access/v1/evaluation", None), ("/v1/explain", "fact")):
                answers = []
                for fact in ("G1", "no-such-fact"):
                    body = evaluation(fact) if field is None else {"fact": fact}
                    response = client.post(path, json=body)
                    answers.append((response.status_code, response.content))
                assert answers[0] == answers[1], path
        with server.client(tokens["auditor"]) as client:
            proofs = [client.get("/v1/prove/inclusion", params={"event": e}) for e in ("e18", "zz")]
        assert proofs[0].status_code == 200 and proofs[1].status_code == 400

    def test_proofs_and_checkpoints_are_the_auditors(self, server: Server, tokens: dict[str, str]) -> None:
        """An inclusion path holds other events' leaf hashes (hidden ones of alice's own tenant
        too) and a checkpoint the root over every value: both would check a guess of a hidden
        value, so an agent gets 403 for each, whatever event it names."""
        with server.client(tokens["alice-agent"]) as client:
            answers = [client.get("/v1/prove/inclusion", params={"event": e})
                       for e in ("e01", "e18", "zz")] + [client.get("/v1/checkpoint")]
        assert [a.status_code for a in answers] == [403] * 4
        assert {a.json()["error"]["code"] for a in answers} == {"forbidden"}
        assert "proof" not in answers[0].json() and "checkpoint" not in answers[3].json()
        assert len({(a.status_code, a.content) for a in answers[:3]}) == 1  # names no event

    def test_proof_and_checkpoint_verify_offline(self, server: Server, tokens: dict[str, str]) -> None:
        """The inclusion proof checks against the event's line, and the checkpoint is signed
        by the server's key over the tree head its token names."""
        with server.client(tokens["auditor"]) as client:
            proved = client.get("/v1/prove/inclusion", params={"event": "e01"}).json()
            signed = client.get("/v1/checkpoint")
        proof = parse_inclusion(proved["proof"])
        assert proof.leaf_index == 0 and proof.verify(proved["event_line"].encode("utf-8"))
        assert not proof.verify(proved["event_line"].replace("EMEA", "APAC").encode("utf-8"))
        checkpoint = verify_checkpoint(signed.json()["checkpoint"].encode("utf-8"),
                                       SIGNER.verifier())
        assert checkpoint is not None
        token = signed.headers["gamma-token"]
        assert checkpoint.head.root not in token  # the token names the head by a MAC only
        with DecisionLog.open(decision_log_path(server_store(server)), read_only=True) as log:
            assert log.token_key is not None
            assert token == FreshnessToken.make(log.token_key, checkpoint.head.size,
                                       checkpoint.head.root).encode()


class TestTransport:
    """AuthZEN 1.0's transport rules, on every route they apply to."""

    def test_request_id_is_echoed(self, server: Server, tokens: dict[str, str]) -> None:
        """``X-Request-ID`` comes back as sent (AuthZEN 1.0 §2.5.1), on answers and refusals."""
        with server.client(tokens["alice-agent"]) as client:
            sent = [client.post("/access/v1/evaluation", json=evaluation("F1"),
                                headers={"X-Request-ID": "req-7f3a"}),
                    client.get("/v1/checkpoint", headers={"X-Request-ID": "req-403"})]
            unsent = client.post("/access/v1/evaluation", json=evaluation("F1"))
        assert [r.headers.get("x-request-id") for r in sent] == ["req-7f3a", "req-403"]
        assert "x-request-id" not in unsent.headers

    @pytest.mark.parametrize("path", [p for p, (m, _) in ROUTES.items() if m == ("POST",)])
    def test_a_post_that_is_not_json_is_400(self, server: Server, tokens: dict[str, str],
                                            path: str) -> None:
        """A body sent as anything but ``application/json`` is 400 with a JSON error (AuthZEN
        1.0 §2.4.3), before it is read; ``application/json`` with parameters is JSON."""
        body = json.dumps(evaluation("F1", time=NOW)).encode("utf-8")
        with server.client(tokens["auditor"]) as client:
            refused = [client.post(path, content=body, headers=headers) for headers in (
                {}, {"Content-Type": "text/plain"}, {"Content-Type": "application/jsonx"},
                {"Content-Type": "application/x-www-form-urlencoded"})]
            taken = client.post(path, content=body,
                                headers={"Content-Type": "Application/JSON; charset=utf-8"})
        for answer in refused:
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"]["code"] == "invalid_request"
            assert "Content-Type" in answer.json()["error"]["message"]
        assert "Content-Type" not in taken.text

    def test_watch_stream_headers_and_the_token_field(self, server: Server,
                                                      tokens: dict[str, str]) -> None:
        """The stream is not cached nor buffered by a proxy; a bad ``Last-Event-ID`` is refused
        naming that header, a bad ``since`` naming ``since``."""
        with server.client(tokens["alice-agent"]) as client:
            with client.stream("GET", "/v1/watch") as stream:
                headers = stream.headers
            forged = "gt1.3." + "0" * 64
            by_header = client.get("/v1/watch", headers={"Last-Event-ID": forged})
            by_query = client.get("/v1/watch", params={"since": forged})
        assert headers["cache-control"] == "no-cache" and headers["x-accel-buffering"] == "no"
        assert by_header.status_code == 400 and "Last-Event-ID" in by_header.json()["error"]["message"]
        assert by_query.status_code == 400 and "'since'" in by_query.json()["error"]["message"]


def server_store(server: Server) -> Path:
    """The store a test server serves (its command line's first argument after ``serve``)."""
    args = server.process.args
    assert isinstance(args, list)
    return Path(args[args.index("serve") + 1])

    def test_oversize_body_is_413(self, server: Server, tokens: dict[str, str]) -> None:
        """A body over --max-body is refused before it is read whole, with a JSON error."""
        with server.client(tokens["alice-agent"]) as client:
            response = client.post("/v1/resolve", content=b'{"at": "' + b"x" * 8000 + b'"}',
                                   headers={"Content-Type": "application/json"})
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "too_large"

    def test_errors_are_json_without_traceback(self, server: Server, tokens: dict[str, str]) -> None:
        """Bad JSON, an unknown route and a wrong method: JSON errors, no Python in sight."""
        with server.client(tokens["alice-agent"]) as client:
            answers = [client.post("/v1/resolve", content=b"{not json"),
                       client.get("/v1/nowhere"), client.get("/v1/resolve")]
        assert [a.status_code for a in answers] == [400, 404, 405]
        for answer in answers:
            assert set(answer.json()["error"]) == {"code", "message"}
            assert "Traceback" not in answer.text

    def test_append_then_read_at_least_as_fresh(self, server: Server, tokens: dict[str, str],
                                                setup: tuple[Path, Path, dict[str, str]]) -> None:
        """A write's token read back sees it; an exact read at the token before does not; each
        decision and the write are one row of the decision log, and the log replays."""
        store = setup[0]
        with server.client(tokens["alice-agent"]) as client:
            before = client.post("/v1/resolve", json={}).headers["gamma-token"]
            written = client.post("/v1/append", json={"events": [
                {"type": "assert", "key": "codename", "value": "kite", "scope": "helios"}]})
            assert written.status_code == 200, written.text
            token = written.json()["token"]
            (assigned,) = written.json()["assigned"]
            n1 = assigned["fact"]
            count = rows(store)
            fresh = client.post("/access/v1/evaluation", json=evaluation(n1),
                                headers={"Gamma-At-Least-As-Fresh": token})
            exact = client.post("/access/v1/evaluation", json=evaluation(n1),
                                headers={"Gamma-At-Exact": before})
            ahead = client.post("/access/v1/evaluation", json=evaluation(n1),
                                headers={"Gamma-At-Least-As-Fresh": "gt1.999999." + "0" * 64})
            elsewhere = client.post("/access/v1/evaluation", json=evaluation(n1),
                                    headers={"Gamma-At-Exact": "gt1.3." + "0" * 64})
            scoped = client.post("/v1/append", json={"events": [
                {"type": "assert", "key": "k", "value": 1, "scope": "apollo"}]})
        assert fresh.json()["decision"] is True
        assert fresh.headers["gamma-token"] == token
        assert exact.json()["decision"] is False
        assert exact.headers["gamma-token"] == before
        assert ahead.status_code == 503 and ahead.json()["error"]["code"] == "not_fresh"
        assert elsewhere.status_code == 400
        assert scoped.status_code == 400 and "scope" in scoped.text
        assert rows(store) == count + 3  # two decisions and the refused write; 503/400 waits none
        with DecisionLog.open(decision_log_path(store), read_only=True) as log:
            fresh_row, exact_row, refused_row = [entry for _, entry in log.entries()][-3:]
        assert (fresh_row.endpoint, fresh_row.caller, fresh_row.response) == (
            "evaluation", "alice-agent", {"decision": True})
        assert fresh_row.position == int(token.split(".")[1])
        assert exact_row.position == int(before.split(".")[1])
        assert exact_row.reasons == ["unknown_fact"]
        assert (refused_row.endpoint, refused_row.status) == ("append", 400)
        report = replay_decisions(store, handlers=HANDLERS, refusal=refusal)
        assert report.ok, report.render()


class TestOneSend:
    """A response's head and body leave in one send (the transport ``run_server`` gives uvicorn)."""

    def test_a_turns_writes_are_one_send_and_a_close_sends_first(self) -> None:
        sent: list[object] = []

        class Transport:
            def write(self, data: bytes) -> None:
                sent.append(data)

            def is_closing(self) -> bool:
                return False

            def close(self) -> None:
                sent.append("closed")

            def get_extra_info(self, name: str) -> object:
                return ("127.0.0.1", 1) if name == "peername" else None

        async def main() -> None:
            one = OneSendTransport(Transport(), asyncio.get_running_loop())  # type: ignore[arg-type]
            one.write(b"HTTP/1.1 200 OK\r\n\r\n")
            one.write(b"{}")
            assert sent == []  # held for the turn
            await asyncio.sleep(0)
            assert sent == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
            one.write(b"last")
            one.close()
            assert sent[1:] == [b"last", "closed"]
            assert one.get_extra_info("peername") == ("127.0.0.1", 1)

        asyncio.run(main())
        assert HTTP_PROTOCOL is OneSendHttpTools  # the serve extra brings httptools


class TestHeap:
    """A worker's app (``factory``) freezes what the folded store left alive; a library's does not."""

    def test_only_a_worker_freezes_its_heap(self, tmp_path: Path) -> None:
        store = make_store(tmp_path / "memory.db")
        write_callers(tmp_path / "callers.toml", CALLERS)
        config = ServeConfig(store=str(store), callers=str(tmp_path / "callers.toml"))
        gc.unfreeze()
        try:
            with TestClient(create_app(config)):
                assert gc.get_freeze_count() == 0
            with TestClient(create_app(config, freeze_heap=True)):
                assert gc.get_freeze_count() > 0
        finally:
            gc.unfreeze()


class TestWorkers:
    """Two workers over one store, writes raced against reads with freshness tokens."""

    def test_revocation_is_never_granted_after_its_token(self, tmp_path: Path) -> None:
        """Once the revoke's token is returned, no read at or after it grants F19 to alice,
        whichever worker answers; every decision is one row of the decision log."""
        store = make_store(tmp_path / "memory.db")
        tokens = write_callers(tmp_path / "callers.toml", CALLERS)
        with serving(store, tmp_path / "callers.toml", "--workers", "2") as server:
            assert self.ask(server, tokens["alice-agent"], None) == {True}
            with server.client(tokens["legal"]) as client:
                revoked = client.post("/v1/append", json={"events": [
                    {"type": "revoke", "fact": "F19", "to_actor": "alice",
                     "authority": "manager"}]})
            assert revoked.status_code == 200, revoked.text
            token = revoked.json()["token"]
            assert self.ask(server, tokens["alice-agent"], token) == {False}
            assert rows(store) == 1 + 12 + 12

    @staticmethod
    def ask(server: Server, token: str, fresh: str | None) -> set[bool]:
        """F19 asked 12 times, each on a new connection (so either worker may answer)."""
        seen = set()
        headers = {} if fresh is None else {"Gamma-At-Least-As-Fresh": fresh}
        for _ in range(12):
            with server.client(token) as client:
                response = client.post("/access/v1/evaluation", json=evaluation("F19"),
                                       headers=headers)
                assert response.status_code == 200, response.text
                seen.add(response.json()["decision"])
        return seen


def test_mtls_names_the_caller_by_its_certificate(tmp_path: Path) -> None:
    """Over mTLS a certificate the callers file lists is a caller without a token; one it
    does not list is not, and a connection without a certificate is refused at the handshake."""
    pki = Pki(tmp_path)
    store = make_store(tmp_path / "memory.db")
    callers = [{**CALLERS[0], "cert_sha256": hashlib.sha256(pki.der(pki.alice)).hexdigest()}]
    write_callers(tmp_path / "callers.toml", callers)
    server_pem, server_key = pki.server
    client_context = ssl.create_default_context(cafile=str(pki.ca))
    client_context.load_cert_chain(str(pki.alice[0]), str(pki.alice[1]))
    with serving(store, tmp_path / "callers.toml", "--tls-cert", str(server_pem), "--tls-key",
                 str(server_key), "--tls-client-ca", str(pki.ca), verify=client_context) as server:
        with server.client() as client:
            response = client.post("/v1/resolve", json={})
        assert response.status_code == 200, response.text
        assert response.json()["resolution"]["actor"]["id"] == "alice"
        with pki.client(pki.carol) as client:
            assert client.post(f"{server.url}/v1/resolve", json={}).status_code == 401
        with pki.client(None) as client, pytest.raises(httpx.TransportError):
            client.get(f"{server.url}/healthz")


def test_server_only_tls_authenticates_by_token(tmp_path: Path) -> None:
    """HTTPS without client certificates runs on uvicorn's own parser (httptools when
    installed): a bearer token names the caller, none is 401, as over plain HTTP."""
    pki = Pki(tmp_path)
    store = make_store(tmp_path / "memory.db")
    secrets = write_callers(tmp_path / "callers.toml", CALLERS)
    server_pem, server_key = pki.server
    context = ssl.create_default_context(cafile=str(pki.ca))
    with serving(store, tmp_path / "callers.toml", "--tls-cert", str(server_pem), "--tls-key",
                 str(server_key), verify=context) as server:
        with server.client(secrets["alice-agent"]) as client:
            response = client.post("/v1/resolve", json={})
        assert response.status_code == 200, response.text
        assert response.json()["resolution"]["actor"]["id"] == "alice"
        with server.client() as client:
            assert client.post("/v1/resolve", json={}).status_code == 401


def test_sigterm_finishes_the_request_in_flight(tmp_path: Path) -> None:
    """SIGTERM while a read waits for freshness: it is still answered (503, JSON), then the
    server leaves by the signal (uvicorn re-raises it once shut down), with no traceback."""
    store = make_store(tmp_path / "memory.db")
    tokens = write_callers(tmp_path / "callers.toml", CALLERS)
    server = start(store, tmp_path / "callers.toml", "--fresh-wait", "1.5")
    answer: list[httpx.Response] = []

    def ask() -> None:
        with server.client(tokens["alice-agent"]) as client:
            answer.append(client.post("/access/v1/evaluation", json=evaluation("F1"),
                                      headers={"Gamma-At-Least-As-Fresh": "gt1.40." + "0" * 64}))

    try:
        thread = threading.Thread(target=ask)
        thread.start()
        threading.Event().wait(0.5)
        status = server.stop()
        thread.join(5)
        assert len(answer) == 1 and answer[0].status_code == 503, server.log()
        assert json.loads(answer[0].content)["error"]["code"] == "not_fresh"
        assert status in (0, -signal.SIGTERM)
        assert "Traceback" not in server.log()
    finally:
        server.stop()
        server.stderr.unlink(missing_ok=True)


def test_sigterm_ends_open_watches_and_tokens_outlive_the_process(tmp_path: Path) -> None:
    """SIGTERM with a watcher's stream open: the stream ends and the server exits within 2 s
    (not after its graceful timeout). A token it gave is still this log's after a restart (the
    key lives in the decision log); a token of the same log under another key is not."""
    store = make_store(tmp_path / "memory.db")
    tokens = write_callers(tmp_path / "callers.toml", CALLERS)
    server = start(store, tmp_path / "callers.toml", "--timeout", "10")
    try:
        with server.client(tokens["alice-agent"]) as client:
            token = client.post("/v1/resolve", json={}).json()["token"]
            with client.stream("GET", "/v1/watch") as stream:
                lines = stream.iter_lines()
                assert next(lines).startswith("event: position")
                started = time.monotonic()
                server.process.send_signal(signal.SIGTERM)
                server.process.wait(5)
                elapsed = time.monotonic() - started
                assert list(lines)[-1:] in ([], [""])  # the stream ended, cleanly
        assert elapsed < 2.0, f"{elapsed:.2f} s\n{server.log()}"
        assert "Traceback" not in server.log()
    finally:
        server.stop()
        server.stderr.unlink(missing_ok=True)
    position = int(token.split(".")[1])
    with gamma.Store.open(store) as opened:
        root = opened.tree_head(position).root
    other = FreshnessToken.make(bytes(32), position, root).encode()
    with serving(store, tmp_path / "callers.toml") as again, \
            again.client(tokens["alice-agent"]) as client:
        kept = client.post("/v1/resolve", json={}, headers={"Gamma-At-Exact": token})
        foreign = client.post("/v1/resolve", json={}, headers={"Gamma-At-Exact": other})
    assert kept.status_code == 200 and kept.json()["token"] == token
    assert foreign.status_code == 400 and "not of this log" in foreign.text


class TestFailures:
    """What a client sees when the server cannot answer: in process (the faults are injected)."""

    @pytest.fixture
    def app(self, tmp_path: Path) -> Iterator[tuple[Any, Any, dict[str, str]]]:
        store = make_store(tmp_path / "memory.db")
        tokens = write_callers(tmp_path / "callers.toml", CALLERS)
        config = ServeConfig(store=str(store), callers=str(tmp_path / "callers.toml"), timeout=0.3)
        app = create_app(config)
        with TestClient(app, raise_server_exceptions=False) as client:
            client.headers["Authorization"] = f"Bearer {tokens['alice-agent']}"
            yield client, app.state.service, tokens

    def test_decision_log_failure_fails_closed(self, app: tuple[Any, Any, dict[str, str]]) -> None:
        """A decision whose row cannot be written is 503 and carries no decision."""
        client, service, _ = app

        def refuse(rows: object, **options: object) -> list[int]:
            raise DecisionLogFailure("disk full")

        def locked() -> object:
            raise DecisionLogFailure("database is locked")

        service._decisions.commit = refuse  # on the loop's thread or the engine's
        service._decisions.writing = locked  # a write takes the log's lock before the store
        before = len(service.engine)
        response = client.post("/access/v1/evaluation", json=evaluation("F1"))
        assert response.status_code == 503
        assert response.json() == {"error": {"code": "decision_log_unavailable",
                                              "message": response.json()["error"]["message"]}}
        written = client.post("/v1/append", json={"events": [
            {"type": "assert", "key": "z", "value": 1}]})
        assert written.status_code == 503 and "token" not in written.json()
        assert written.json()["error"]["code"] == "decision_log_unavailable"
        assert len(service.engine) == before  # nothing stored: no write is in force unlogged

    def test_a_slow_request_is_504_and_a_crash_500(self, app: tuple[Any, Any, dict[str, str]]) -> None:
        """Past --timeout: 504; an unexpected error: 500 whose message says nothing."""
        client, service, _ = app

        release, finished = threading.Event(), threading.Event()

        def slow(*args: object) -> dict[str, Any]:
            release.wait(10)  # held past the 0.3 s limit until the test has seen the 504
            finished.set()
            return {}

        def crash(*args: object) -> dict[str, Any]:
            raise RuntimeError("secret internals")

        # a long job (a search, here) runs on the engine thread, under the deadline; a short
        # evaluation runs on the event loop's thread when it is free (TestInline)
        service.handlers["search/resource"], service.handlers["resolve"] = slow, crash
        late = client.post("/access/v1/search/resource", json=evaluation("F1"))
        assert late.status_code == 504 and late.json()["error"]["code"] == "timeout"
        release.set()  # the abandoned call ends before the next request is timed
        assert finished.wait(10)
        crashed = client.post("/v1/resolve", json={})
        assert crashed.status_code == 500
        assert crashed.json() == {"error": {"code": "internal", "message": "internal error"}}


class TestCommand:
    """``gamma serve`` refuses what it cannot serve before any worker starts: exit 2, one line."""

    @pytest.mark.parametrize("case", ["no store", "jsonl", "callers", "tls", "workers", "signer",
                                      "public url"])
    def test_bad_input_is_one_error_line(self, tmp_path: Path, case: str) -> None:
        store = make_store(tmp_path / "memory.db")
        callers = tmp_path / "callers.toml"
        write_callers(callers, CALLERS)
        args = {
            "no store": [str(tmp_path / "missing.db"), "--callers", str(callers)],
            "jsonl": [str(EXAMPLE), "--callers", str(callers)],
            "callers": [str(store), "--callers", str(EXAMPLE)],
            "tls": [str(store), "--callers", str(callers), "--tls-cert", str(EXAMPLE)],
            "workers": [str(store), "--callers", str(callers), "--workers", "0"],
            "signer": [str(store), "--callers", str(callers), "--signer-key", str(callers)],
            "public url": [str(store), "--callers", str(callers), "--public-url", "pdp.example"],
        }[case]
        code = 0
        with CliRunner().isolation(env={"GAMMA_LOG_LEVEL": None, "GAMMA_CHAIN_KEY": None}) as (
                _, err, _):
            try:
                main(["serve", *args])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        structlog.reset_defaults()
        stderr = err.getvalue().decode("utf-8")
        assert code == 2, stderr
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error:"), stderr
