"""What a caller of ``gamma serve`` must not learn or do: the reviewer's probes, in process.

Writes: the server assigns every id (a caller's own could collide with another tenant's or
a hidden one, and the refusal would tell them apart), and a reference to a fact the caller
cannot see is one answer, whatever the fact is (so no one retracts, supersedes, promotes,
grants or revokes what it cannot see). Time: only an auditor chooses it (a time before a
revoke would grant what was revoked). A write is stored only once its decision-log row can
be, and a write stored without one is found by replay. At-exact views are kept, and a cold
one counts against the request's time limit.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from serve_process import write_callers  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402
from test_serve_app import ALICE, CALLERS, evaluation, make_store  # noqa: E402

from gamma.core.incremental.engine import EngineState  # noqa: E402
from gamma.integrations.binding import NO_SUCH_FACT  # noqa: E402
from gamma.serve.app import create_app  # noqa: E402
from gamma.serve.config import ServeConfig  # noqa: E402
from gamma.serve.endpoints import HANDLERS  # noqa: E402
from gamma.serve.replay import replay_decisions  # noqa: E402
from gamma.serve.service import refusal  # noqa: E402
from gamma.storage.decisions import DecisionLog, decision_log_path  # noqa: E402
from gamma.storage.store import Store  # noqa: E402

GLOBEX = {"name": "bob", "actor": {"id": "bob", "tenant": "globex"}}
NOT_SEEN = {"error": {"code": "invalid_request",
                      "message": NO_SUCH_FACT.format(actor="alice")}}  # fmt: skip
#: G1 is globex's, F20 and F8 are hidden from alice (legal's, hr's), NOPE is in no tenant
UNSEEN = ("G1", "F20", "F8", "NOPE")


class Served:
    """A client per caller over one in-process app, and the service behind it."""

    def __init__(self, client: TestClient, service: Any, tokens: dict[str, str], store: Path) -> None:
        self.client, self.service, self.tokens, self.store = client, service, tokens, store

    def post(self, caller: str, path: str, body: dict[str, Any], **headers: str) -> Any:
        return self.client.post(path, json=body, headers={
            "Authorization": f"Bearer {self.tokens[caller]}", **headers})

    def append(self, caller: str, *events: dict[str, Any]) -> Any:
        return self.post(caller, "/v1/append", {"events": list(events)})


def serve(root: Path, timeout: float = 5.0) -> Iterator[Served]:
    store = make_store(root / "memory.db")
    tokens = write_callers(root / "callers.toml", [*CALLERS, GLOBEX])
    app = create_app(ServeConfig(store=str(store), callers=str(root / "callers.toml"),
                                 timeout=timeout))  # fmt: skip
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Served(client, app.state.service, tokens, store)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serve(tmp_path_factory.mktemp("security"))


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Served]:
    yield from serve(tmp_path, timeout=0.5)


class TestIds:
    @pytest.mark.parametrize(("event", "field"), [
        ({"type": "assert", "key": "k", "value": 1, "id": "e18"}, "events[0].id"),
        ({"type": "assert", "key": "k", "value": 1, "fact": "G1"}, "events[0].fact"),
        ({"type": "experience", "content": "x", "experience": "X1"}, "events[0].experience"),
        ({"type": "retract", "fact": "F1", "id": "zz-new"}, "events[0].id"),
    ])
    def test_a_caller_chosen_id_is_refused(self, served: Served, event: dict[str, Any],
                                           field: str) -> None:
        """Another tenant's id, a hidden one and a fresh one are refused alike, naming the field."""
        response = served.append("alice-agent", event)
        assert response.status_code == 400
        assert response.json()["error"]["message"].startswith(f"field '{field}': the server assigns")

    def test_ids_are_assigned_per_tenant_and_a_retry_stores_nothing_twice(self, served: Served) -> None:
        event = {"type": "assert", "key": "probe", "value": 1, "ts": "2026-11-01T00:00:00Z"}
        first = served.append("alice-agent", event)
        again = served.append("alice-agent", event)
        other = served.append("bob", event)
        assert first.status_code == again.status_code == other.status_code == 200, first.text
        assert first.json()["appended"] == 1 and again.json()["appended"] == 0
        assert first.json()["assigned"] == again.json()["assigned"]
        (mine,), (theirs,) = first.json()["assigned"], other.json()["assigned"]
        assert set(mine) == {"id", "fact"} and mine["fact"].startswith("f-")
        assert mine["id"] != theirs["id"] and mine["fact"] != theirs["fact"]
        assert served.post("alice-agent", "/access/v1/evaluation",
                           evaluation(mine["fact"])).json()["decision"] is True
        report = replay_decisions(served.store, handlers=HANDLERS, refusal=refusal)
        assert report.ok, report.render()  # the retry appended nothing and claims nothing


class TestReferences:
    SHAPES = {
        "supersedes": lambda f: {"type": "assert", "key": "discount", "value": "1%", "supersedes": [f]},
        "depends_on": lambda f: {"type": "assert", "key": "d", "value": 1, "kind": "derived",
                                 "depends_on": [f]},
        "retract": lambda f: {"type": "retract", "fact": f},
        "promote": lambda f: {"type": "promote", "fact": f},
        "grant": lambda f: {"type": "grant", "fact": f, "to_actor": "alice"},
        "revoke": lambda f: {"type": "revoke", "fact": f, "to_actor": "alice"},
        "uses": lambda f: {"type": "experience", "content": "x", "uses": [f]},
    }

    @pytest.mark.parametrize("shape", sorted(SHAPES))
    def test_an_unseen_fact_is_one_answer(self, served: Served, shape: str) -> None:
        """Another tenant's, a hidden and an absent fact: the same status and bytes, naming none."""
        answers = {(r.status_code, r.content)
                   for r in (served.append("alice-agent", self.SHAPES[shape](f)) for f in UNSEEN)}
        assert len(answers) == 1, answers
        ((status, content),) = answers
        assert status == 400 and b"G1" not in content and b"F20" not in content
        assert NO_SUCH_FACT.format(actor="alice").encode() in content

    def test_alice_cannot_grant_herself_a_hidden_fact(self, served: Served) -> None:
        """The reviewer's escalation: alice grants herself legal's F20, then relies on it."""
        granted = served.append("alice-agent", {"type": "grant", "fact": "F20", "to_actor": "alice"})
        assert granted.status_code == 400
        assert granted.json()["error"]["message"] == f"field 'events[0].fact': {NOT_SEEN['error']['message']}"
        decided = served.post("alice-agent", "/access/v1/evaluation", evaluation("F20")).json()
        assert decided["decision"] is False and decided["context"]["reasons"] == ["unknown_fact"]

    def test_a_key_wide_grant_is_the_auditors(self, served: Served) -> None:
        """A key-wide grant reaches every fact of the key, hidden ones too: alice granting
        sales (her role) legal_hold would then rely on F20. Refused, 403; F20 stays denied."""
        granted = served.append("alice-agent", {"type": "grant", "key": "legal_hold", "role": "sales"})
        assert granted.status_code == 403, granted.text
        decided = served.post("alice-agent", "/access/v1/evaluation", evaluation("F20")).json()
        assert decided["decision"] is False

    def test_a_visible_fact_is_still_referred_to(self, served: Served) -> None:
        """F19 (granted to alice) she may revoke from herself; it is then denied."""
        revoked = served.append("alice-agent", {"type": "revoke", "fact": "F19", "to_actor": "alice"})
        assert revoked.status_code == 200, revoked.text
        token = revoked.json()["token"]
        decided = served.post("alice-agent", "/access/v1/evaluation", evaluation("F19"),
                              **{"Gamma-At-Least-As-Fresh": token})
        assert decided.json()["decision"] is False


class TestTime:
    def test_only_an_auditor_reads_the_past(self, fresh: Served) -> None:
        """After legal revokes F19 from alice, alice asking at a time before it is refused (403),
        by ``at`` and by ``context.time``, alone or in a batch item; the auditor may ask."""
        revoked = fresh.append("legal", {"type": "revoke", "fact": "F19", "to_actor": "alice",
                                         "authority": "manager"})
        assert revoked.status_code == 200, revoked.text
        fresh_token = {"Gamma-At-Least-As-Fresh": revoked.json()["token"]}
        past = "2026-03-01T09:30:00Z"
        asked = fresh.post("alice-agent", "/access/v1/evaluation",
                           evaluation("F19", time=past), **fresh_token)
        resolved = fresh.post("alice-agent", "/v1/resolve", {"at": past}, **fresh_token)
        batch = fresh.post("alice-agent", "/access/v1/evaluations", {
            "subject": {"type": "agent", "id": "alice"}, "action": {"name": "rely"},
            "evaluations": [{"resource": {"type": "fact", "id": "F19"}, "context": {"time": past}}]},
            **fresh_token)
        now = fresh.post("alice-agent", "/access/v1/evaluation", evaluation("F19"), **fresh_token)
        assert asked.status_code == resolved.status_code == 403
        assert {asked.json()["error"]["code"], resolved.json()["error"]["code"]} == {"forbidden"}
        (item,) = batch.json()["evaluations"]
        assert item["decision"] is False and item["context"]["error"]["status"] == 403
        assert now.json()["decision"] is False
        audited = fresh.post("auditor", "/v1/resolve", {"at": past, "subject": ALICE, "view": "json"})
        assert "F19" in {a["fact"] for a in audited.json()["resolution"]["admitted"]}
        report = replay_decisions(fresh.store, handlers=HANDLERS, refusal=refusal)
        assert report.ok, report.render()


class TestUnloggedWrites:
    def test_a_write_whose_row_cannot_be_taken_is_not_stored(self, fresh: Served) -> None:
        """The decision log locked by another process: the write is 503 and nothing is stored
        (it was stored and in force before, with no row); once free, the write goes through."""
        path = decision_log_path(fresh.store)
        fresh.service._decisions.close()
        fresh.service._decisions = DecisionLog.open(path, busy_timeout=0.1)
        holder = sqlite3.connect(str(path), isolation_level=None)
        event = {"type": "assert", "key": "k1", "value": 1}
        try:
            holder.execute("BEGIN IMMEDIATE")
            locked = fresh.append("alice-agent", event)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert locked.status_code == 503, locked.text
        assert locked.json()["error"]["code"] == "decision_log_unavailable"
        with Store.open(fresh.store, read_only=True) as store:
            assert len(store.events()) == 33
        written = fresh.append("alice-agent", event)
        assert written.status_code == 200 and written.json()["appended"] == 1
        assert replay_decisions(fresh.store, handlers=HANDLERS, refusal=refusal).ok

    def test_replay_finds_an_event_stored_without_its_row(self, fresh: Served) -> None:
        """An event stored behind the server's back, then a decision over it: replay says so."""
        assert fresh.post("alice-agent", "/access/v1/evaluation", evaluation("F1")).status_code == 200
        with Store.open(fresh.store) as store:
            store.append(['{"id":"sneak","type":"assert","ts":"2026-11-01T00:00:00Z","actor":"x",'
                          '"tenant":"acme","fact":"S1","key":"s","value":1}'])
        assert fresh.post("alice-agent", "/access/v1/evaluation", evaluation("S1")).status_code == 200
        report = replay_decisions(fresh.store, handlers=HANDLERS, refusal=refusal)
        assert not report.ok
        assert [(d.field, d.recorded) for d in report.differences] == [("coverage", "0 write rows")]
        assert "event 34 (sneak)" in report.differences[0].replayed


class TestExact:
    def test_alternating_exact_tokens_fold_each_prefix_once(self, fresh: Served,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
        tokens = []
        for value in (1, 2):
            tokens.append(fresh.post("alice-agent", "/v1/resolve", {}).json()["token"])
            assert fresh.append("alice-agent", {"type": "assert", "key": "kx",
                                                "value": value}).status_code == 200
        folds: list[int] = []
        extend = EngineState.extend

        def counting(self: EngineState, events: Any, **kw: Any) -> None:
            if len(events):  # the engine's own refresh extends by nothing
                folds.append(len(events))
            extend(self, events, **kw)

        monkeypatch.setattr(EngineState, "extend", counting)
        for i in range(6):
            answer = fresh.post("alice-agent", "/access/v1/evaluation", evaluation("F1"),
                                **{"Gamma-At-Exact": tokens[i % 2]})
            assert answer.status_code == 200 and answer.headers["gamma-token"] == tokens[i % 2]
        assert folds == [33, 34]

    def test_a_cold_exact_view_counts_against_the_time_limit(self, fresh: Served,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
        """A fold that outlasts --timeout is 504, not a hung request."""
        token = fresh.post("alice-agent", "/v1/resolve", {}).json()["token"]
        assert fresh.append("alice-agent", {"type": "assert", "key": "kx", "value": 1}).status_code == 200
        extend = EngineState.extend

        def slow(self: EngineState, events: Any, **kw: Any) -> None:
            threading.Event().wait(0.8)
            extend(self, events, **kw)

        monkeypatch.setattr(EngineState, "extend", slow)
        answer = fresh.post("alice-agent", "/access/v1/evaluation", evaluation("F1"),
                            **{"Gamma-At-Exact": token})
        assert answer.status_code == 504 and answer.json()["error"]["code"] == "timeout"


class TestReplayOrder:
    def test_a_refusal_names_the_field_replay_names(self, fresh: Served) -> None:
        """A refusal names the first offending field; the decision log keeps the body with its
        keys sorted, so the server reads it in that order too, and replay gives the same bytes
        (it named ``type`` live and ``properties`` on replay before)."""
        for body in ('{"subject": {"type": "agent", "id": "alice", "properties": []}}',
                     '{"subject": {"properties": [], "id": "alice", "type": "agent"}}'):  # fmt: skip
            answered = fresh.client.post("/v1/resolve", content=body, headers={
                "Authorization": f"Bearer {fresh.tokens['auditor']}", "Content-Type": "application/json"})
            assert answered.status_code == 400, answered.text
        report = replay_decisions(fresh.store, handlers=HANDLERS, refusal=refusal)
        assert report.ok, report.render()
