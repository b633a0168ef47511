"""Erasure in ``gamma serve``'s decision log (issue 30, SPEC §20.3): a redaction leaves no byte
of an erased value or of the redacted rows' salts in ``STORE.decisions``, its -wal or -shm,
while the chain still verifies and ``gamma replay --decisions`` counts redacted rows as erased."""

from __future__ import annotations

import base64
import json
import random
import sqlite3
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers import actor
from test_serve_decisions import format_1

from gamma.core.resolving.render import inert
from gamma.core.terms.canonical import canonical_text, format_ts
from gamma.core.terms.errors import InputError, StoreBusyError
from gamma.serve.freshness import FreshnessToken
from gamma.serve.replay import replay_decisions
from gamma.serve.types import Caller, Handler, View
from gamma.storage.decisions import (
    DecisionEntry,
    DecisionLog,
    DecisionLogBusy,
    EntryMatcher,
    decision_log_path,
    redact_decisions,
)
from gamma.storage.engine import Engine
from gamma.storage.store import Store

AT = "2031-01-01T00:00:00Z"
#: An erased value with what every encoding changes: quotes, a backslash, a newline, non-ASCII
#: letters, a bidirectional override (§6 writes it as a \u escape) and an astral character.
SECRET = 'Zoë "Ångström" \\ <zoe@example.org>\n\u202eevil 𝔷 #7731'
#: A value that is not erased: the scans must still find it (so they can find at all).
KEPT = "Kept Körber value 5551212"
NUMBER = 86753091


def entry(n: int, **changes: Any) -> DecisionEntry:
    base = DecisionEntry(
        endpoint="resolve", caller="alice-agent", actor={"id": "alice", "tenant": "acme"},
        on_behalf=None, at=AT, request={"n": n}, position=n, root="ab" * 32,
        token=f"gt1.{n}.{'ef' * 32}", policy="cd" * 32, status=200, response={}, reasons=[],
        duration_ms=0.5,
    )  # fmt: skip
    return attrs.evolve(base, **changes)


def context_block(fact: str, key: str, value: Any) -> str:
    """A context block (SPEC §6) holding one fact, as an own-API resolve answers it."""
    return f"# Authorized state for alice (tenant acme, scope global) at {AT}\n## Binding\n- [{inert(fact)}] {inert(key)} = {json.dumps(value, ensure_ascii=False)}\n"


def forms(text: str) -> dict[str, bytes]:
    """Every encoding of ``text`` a scan looks for."""
    utf8 = text.encode("utf-8")
    return {
        "utf-8": utf8,
        "json-escaped": canonical_text(text)[1:-1].encode("utf-8"),
        "\\u-escaped": json.dumps(text, ensure_ascii=True)[1:-1].encode("ascii"),
        "utf-16-le": text.encode("utf-16-le"),
        "utf-16-be": text.encode("utf-16-be"),
        "hex": utf8.hex().encode(),
        "HEX": utf8.hex().upper().encode(),
        "base64": base64.b64encode(utf8).rstrip(b"="),
        "base64url": base64.urlsafe_b64encode(utf8).rstrip(b"="),
    }


def salt_forms(salt: str) -> dict[str, bytes]:
    raw = bytes.fromhex(salt)
    return {"hex": salt.encode(), "HEX": salt.upper().encode(), "bytes": raw,
            "base64": base64.b64encode(raw).rstrip(b"=")}  # fmt: skip


def files(path: Path) -> Iterator[tuple[str, bytes]]:
    for suffix in ("", "-wal", "-shm"):
        name = Path(f"{path}{suffix}")
        if name.exists():
            yield name.name, name.read_bytes()


def found(path: Path, needles: Mapping[str, bytes]) -> list[str]:
    """Where any needle occurs in the log's file, -wal or -shm."""
    return [f"{how} in {name}" for name, data in files(path) for how, needle in needles.items() if needle in data]


def salts(path: Path) -> dict[int, str]:
    conn = sqlite3.connect(str(path))
    try:
        return {int(seq): str(salt) for seq, salt in conn.execute("SELECT seq, salt FROM decision_entries")}
    finally:
        conn.close()


def filled(path: Path) -> list[int]:
    """A log whose entries hold SECRET (fact f-secret) and KEPT (fact f-kept) every way an entry
    can; returns the seqs that hold or name the secret."""
    holding = []
    with DecisionLog.open(path) as log:
        rows = [
            entry(1, endpoint="append", request={"events": [{"type": "assert", "key": "k.secret", "value": SECRET}]},
                  response={"appended": 1, "assigned": [{"fact": "f-secret", "id": "e-1"}]}),
            entry(2, request={"view": "context"}, response={"context": context_block("f-secret", "k.secret", SECRET)}),
            entry(3, request={"view": "json"}, response={"resolution": {"admitted": [{"fact": "f-secret", "value": SECRET}]}}),
            entry(4, endpoint="evaluation", request={"resource": {"type": "fact", "id": "f-secret"}},
                  response={"decision": True}),  # the fact id only
            entry(5, endpoint="check", request={"response": f"the user said {SECRET[:20]}"},
                  response={"findings": []}),  # part of the value only: not the value
            entry(6, endpoint="check", request={"response": f"I think it is {SECRET}, no?"},
                  response={"findings": []}),  # the value raw in free text, no fact id
            entry(7, request={"view": "context"}, response={"context": context_block("f-kept", "k.kept", KEPT)}),
            entry(8, endpoint="append", request={"events": [{"type": "assert", "key": "k.n", "value": NUMBER}]},
                  response={"appended": 1, "assigned": [{"fact": "f-number", "id": "e-8"}]}),
            entry(9, request={"view": "text"}, response={"text": f"  f-number  k.n  {NUMBER}\n"}),
            entry(10, request={"n": NUMBER + 1}, response={"n": -NUMBER + 2}),  # other numbers
        ]  # fmt: skip
        for row in rows:
            log.record(row)
    holding = [1, 2, 3, 4, 6, 8, 9]
    return holding


class TestRedaction:
    def test_no_byte_of_the_value_or_the_salts_is_left_and_the_chain_still_verifies(self, tmp_path: Path) -> None:
        store = tmp_path / "s.db"
        path = decision_log_path(store)
        holding = filled(path)
        before = salts(path)
        with DecisionLog.open(path) as log:
            head = log.head()
        assert found(path, forms(SECRET)), "the scan cannot find the value before"
        # a reader (a worker between requests, an auditor's tool) and a second writer are
        # open before the redaction, holding no read transaction across it
        reader = sqlite3.connect(str(path))
        assert reader.execute("SELECT count(*) FROM decisions").fetchall() == [(10,)]
        worker = DecisionLog.open(path)
        auditor = DecisionLog.open(path, read_only=True)
        try:
            count = redact_decisions(store, erase_event="e-erase-1", facts=["f-secret", "f-number"],
                                     values=[SECRET, NUMBER, True])  # fmt: skip
            assert count == len(holding)
            left = found(path, forms(SECRET) | {f"{k} of {NUMBER}": v for k, v in forms(str(NUMBER)).items()})
            assert left == []
            for seq in holding:
                assert found(path, salt_forms(before[seq])) == [], f"the salt of seq {seq} is left"
            assert found(path, {"kept": KEPT.encode(), "kept salt": before[7].encode()}) != []
            assert Path(f"{path}-wal").stat().st_size == 0
            # the chain is what it was; the redacted rows are counted, by their erase event
            for log in (worker, auditor):
                report = log.verify()
                assert report.ok and report.entries == 10 and report.head == head[1]
                assert (report.redacted, report.erase_events) == (len(holding), ("e-erase-1",))
                assert [seq for seq, _ in log.entries()] == [5, 7, 10]
                assert [(r.seq, r.erase_event) for r in log.redactions()] == [(s, "e-erase-1") for s in holding]
            # the open worker records on, over the redacted file
            assert worker.record(entry(11)) == 11 and worker.verify().ok
            assert reader.execute("SELECT count(*) FROM decision_entries").fetchall() == [(4,)]
        finally:
            reader.close()
            worker.close()
            auditor.close()
        assert found(path, forms(SECRET)) == []

    def test_redacted_rows_keep_their_outline_and_commitment(self, tmp_path: Path) -> None:
        path = tmp_path / "s.db.decisions"
        filled(path)
        conn = sqlite3.connect(str(path))
        chain_before = conn.execute("SELECT seq, outline, commitment, hash FROM decisions").fetchall()
        conn.close()
        with DecisionLog.open(path) as log:
            assert log.redact(erase_event="e-1", facts=["f-secret"], values=[SECRET]) == 5
            (first, *_) = log.redactions()
        assert (first.seq, first.outline.endpoint, first.outline.appended, first.outline.position) == (1, "append", 1, 1)
        conn = sqlite3.connect(str(path))
        assert conn.execute("SELECT seq, outline, commitment, hash FROM decisions").fetchall() == chain_before
        conn.close()

    def test_applying_again_redacts_nothing_more_and_is_recorded_once(self, tmp_path: Path) -> None:
        path = tmp_path / "s.db.decisions"
        filled(path)
        with DecisionLog.open(path) as log:
            assert log.redact(erase_event="e-1", facts=["f-secret"], values=[SECRET], dry_run=True) == 5
            assert log.verify().redacted == 0  # a dry run changes nothing
            assert log.redact(erase_event="e-1", facts=["f-secret"], values=[SECRET]) == 5
            assert log.redact(erase_event="e-1", facts=["f-secret"], values=[SECRET]) == 0
            assert log.redact(erase_event="e-2", facts=["f-nothing"], values=[]) == 0
            assert log.applied_erasures() == {"e-1", "e-2"}
            assert log.verify().ok and log.verify().erase_events == ("e-1",)
        with pytest.raises(InputError) as caught:
            redact_decisions(tmp_path / "s.db", erase_event="", facts=["f"])
        assert caught.value.field == "erase_event"

    def test_a_row_recorded_while_the_log_is_searched_is_redacted_too(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The search runs before the write lock (workers keep recording); what they record
        meanwhile is searched under the lock."""
        path = tmp_path / "s.db.decisions"
        filled(path)
        texts = DecisionLog._texts
        worker = DecisionLog.open(path)

        def searching(self: DecisionLog, **kw: Any) -> Iterator[tuple[int, str]]:
            yield from texts(self, **kw)
            if kw.get("upto") is not None:  # the search without the lock is done
                worker.record(entry(11, response={"late": SECRET}))

        monkeypatch.setattr(DecisionLog, "_texts", searching)
        try:
            with DecisionLog.open(path) as log:
                assert log.redact(erase_event="e-1", facts=["f-secret"], values=[SECRET]) == 6
                assert [r.seq for r in log.redactions()][-1] == 11
        finally:
            worker.close()
        assert found(path, forms(SECRET)) == []

    def test_no_decision_log_beside_the_store_is_nothing_to_do(self, tmp_path: Path) -> None:
        assert redact_decisions(tmp_path / "s.db", erase_event="e-1", facts=["f1"], values=["v"]) == 0
        assert list(tmp_path.iterdir()) == []

    def test_a_reader_holding_a_read_transaction_is_reported_busy_and_scrub_finishes(self, tmp_path: Path) -> None:
        path = tmp_path / "s.db.decisions"
        filled(path)
        with DecisionLog.open(path) as log:
            log.record(entry(11, response={"again": SECRET}))  # in the WAL, not yet in the file
        reader = sqlite3.connect(str(path), isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM decision_entries").fetchall()  # its snapshot holds the value
        with DecisionLog.open(path, busy_timeout=0.2) as log:
            with pytest.raises(StoreBusyError, match="read transaction") as caught:
                log.redact(erase_event="e-1", facts=["f-secret"], values=[SECRET])
            assert isinstance(caught.value, DecisionLogBusy)  # exit 3, as a busy store
            assert log.verify().redacted == 6  # committed: only its scrub waits
            reader.execute("ROLLBACK")
            log.scrub()
        reader.close()
        assert found(path, forms(SECRET)) == []

    @pytest.mark.parametrize("seed", [7])
    def test_generated_logs_redacted_in_rounds_keep_no_copy_anywhere(self, tmp_path: Path, seed: int) -> None:
        """Rows of varied sizes, redacted a few at a time: a deleted row's page rebalanced
        before may hold a stale copy of another entry in its free space, which a later
        redaction of that entry must not leave behind (secure_delete alone does not clear it)."""
        rng = random.Random(seed)
        path = tmp_path / "s.db.decisions"
        marks = [f"value-{seed}-{n:05d}-{rng.randrange(10**9):09d}" for n in range(300)]
        with DecisionLog.open(path) as log:
            for n, mark in enumerate(marks):
                pad = "p" * rng.choice([0, 30, 120, 700, 2500, 6000])
                log.record(entry(n, response={"value": mark, "pad": pad}, request={"fact": f"f{n}"}))
        erased: list[str] = []
        for round_ in range(4):
            chosen = rng.sample([m for m in marks if m not in erased], 30)
            with DecisionLog.open(path) as log:
                assert log.redact(erase_event=f"e-{round_}", facts=[], values=chosen) == 30
                log.record(entry(900 + round_, response={"value": "after"}))
            erased += chosen
            data = b"".join(d for _, d in files(path))
            assert [m for m in erased if m.encode() in data] == []
        kept = [m for m in marks if m not in erased]
        assert all(m.encode() in data for m in kept)
        with DecisionLog.open(path, read_only=True) as log:
            report = log.verify()
        assert report.ok and report.redacted == 120 and report.entries == 304

    def test_a_stale_copy_in_a_pages_free_space_is_gone_too(self, tmp_path: Path) -> None:
        """SQLite rebuilding a page when it rebalances a b-tree (``rebuildPage``) leaves the
        bytes of cells that moved out in the page's unallocated space, and ``secure_delete``
        zeroes only what is deleted: a later redaction of such an entry would leave that copy.
        Here the copy is put where SQLite would leave it (a page of other rows), and the
        redaction must still leave no byte of it (it rebuilds the file)."""
        path = tmp_path / "s.db.decisions"
        with DecisionLog.open(path) as log:
            for n in range(40):
                log.record(entry(n, response={"value": f"row {n}", "pad": "p" * 1200}))
            log.record(entry(99, response={"value": SECRET}))
            text = next(e for seq, e in log.entries() if seq == 41).canonical()
        data = bytearray(path.read_bytes())
        size = int.from_bytes(data[16:18], "big")
        for start in range(size, len(data), size):  # a table leaf page with room for the copy
            page = data[start : start + size]
            cells = int.from_bytes(page[3:5], "big")
            free_from, free_to = 8 + 2 * cells, int.from_bytes(page[5:7], "big")
            if page[0] == 0x0D and b"row " in page and free_to - free_from > len(text) + 8:
                data[start + free_from + 4 : start + free_from + 4 + len(text)] = text
                break
        else:
            pytest.fail("no leaf page with room")
        path.write_bytes(bytes(data))
        conn = sqlite3.connect(str(path))
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.close()
        assert found(path, {"copy": text}) != []
        assert redact_decisions(tmp_path / "s.db", erase_event="e-1", facts=[], values=[SECRET]) == 1
        assert found(path, forms(SECRET)) == []

    def test_a_format_1_log_with_a_match_is_refused_and_one_without_is_left_alone(self, tmp_path: Path) -> None:
        store = tmp_path / "s.db"
        path = format_1(decision_log_path(store))
        with DecisionLog.open(path) as log:
            log.record(entry(1, response={"value": SECRET}))
            log.record(entry(2))
        before = path.read_bytes()
        assert redact_decisions(store, erase_event="e-1", facts=["f-nothing"], values=["absent"]) == 0
        with pytest.raises(InputError, match="format-1"):
            redact_decisions(store, erase_event="e-1", facts=["f-nothing"], values=[SECRET], dry_run=True)
        with pytest.raises(InputError, match="format-1"):
            redact_decisions(store, erase_event="e-1", facts=[], values=[SECRET])
        with DecisionLog.open(path, read_only=True) as log:
            assert log.version == "1" and log.verify().ok and log.applied_erasures() == frozenset()
        assert path.read_bytes() == before


class TestMatcher:
    @pytest.mark.parametrize(
        ("facts", "values", "text", "expected"),
        [
            # a fact id as a JSON string, as the context block's tag, as a text-view cell
            (["f1"], [], '{"fact":"f1"}', True),
            (["f1"], [], '{"context":"- [f1] k = 1"}', True),
            (["f1"], [], '{"text":"  f1  k  1"}', True),
            (["f1"], [], '{"fact":"f10"}', False),
            (["f1"], [], '{"fact":"xf1"}', False),
            (["f-1"], [], '{"fact":"f-10"}', False),
            # an id that is no plain word: JSON-encoded in the context block
            (["a b"], [], '{"fact":"a b"}', True),
            (["a b"], [], '{"context":"- [\\"a b\\"] k = 1"}', True),
            (["a\"b"], [], '{"fact":"a\\"b"}', True),
            # string values: raw, JSON-escaped, in a context block, §6's \u escapes
            ([], ["tel 555"], '{"v":"call tel 555 now"}', True),
            ([], ['say "hi"'], '{"v":"say \\"hi\\""}', True),
            ([], ['say "hi"'], '{"context":"k = \\"say \\\\\\"hi\\\\\\"\\""}', True),
            ([], ["a\u202eb"], '{"context":"k = \\"a\\\\u202eb\\""}', True),
            ([], ["line\nbreak"], '{"v":"line\\nbreak"}', True),
            ([], ["tel 555"], '{"v":"tel 55"}', False),
            ([], [""], '{"v":""}', False),
            # integers: a standalone number, not digits of a longer number, a time or a token
            ([], [8675309], '{"value":8675309}', True),
            ([], [8675309], '{"context":"k = 8675309"}', True),
            ([], [8675309], '{"value":86753090}', False),
            ([], [8675309], '{"value":18675309}', False),
            ([], [12], '{"at":"2031-01-01T00:12:00Z"}', False),
            ([], [12], '{"token":"gt1.12.abcd"}', False),
            ([], [12], '{"v":"12.5"}', False),
            ([], [-12], '{"value":-12}', True),
            ([], [12], '{"value":-12}', False),
            ([], [5], '{"position":5,"status":5,"duration_ms":5}', False),  # the entry's own
            ([], [5], '{"position":1,"response":{"appended":5}}', True),
            # booleans only through their fact
            ([], [True], '{"value":true}', False),
        ],
    )  # fmt: skip
    def test_matches(self, facts: list[str], values: list[Any], text: str, expected: bool) -> None:
        assert json.loads(text) is not None
        assert EntryMatcher(facts=facts, values=values).matches(text) is expected

    def test_refuses_what_is_no_fact_or_value(self) -> None:
        with pytest.raises(InputError) as caught:
            EntryMatcher(facts=["f1", ""], values=[])
        assert caught.value.field == "facts[1]"
        with pytest.raises(InputError) as caught:
            EntryMatcher(facts=[], values=[1, 2.5])  # type: ignore[list-item]
        assert caught.value.field == "values[1]"


# -- replay after an erasure ---------------------------------------------------------------


def h_resolve(view: View, caller: Caller, at: datetime, body: Mapping[str, Any]) -> dict[str, Any]:
    res = view.resolve(caller.actor, at)
    return {"admitted": {a.fact: a.value for a in res.admitted}}


def h_check(view: View, caller: Caller, at: datetime, body: Mapping[str, Any]) -> dict[str, Any]:
    fact = str(body["fact"])
    decision = view.check(caller.actor, at, [fact])[fact]
    return {"codes": list(getattr(decision, "codes", ()))}


HANDLERS: dict[str, Handler] = {"resolve": h_resolve, "check": h_check}
ALICE = Caller(name="alice-agent", actor=actor("alice"))


def assert_(fact: str, key: str, value: Any, minute: int, **more: Any) -> dict[str, Any]:
    return {"id": f"e-{fact}", "type": "assert", "actor": "writer", "tenant": "acme", "fact": fact,
            "key": key, "value": value, "ts": format_ts(datetime(2026, 3, 1, 9, minute)), **more}  # fmt: skip


class Served:
    """A committed store served for a while (decisions and writes logged), then erased."""

    def __init__(self, path: Path) -> None:
        Store.init(path, commit_values=True).close()
        self.path = path
        self.engine = Engine.open(path)
        self.log = DecisionLog.open(decision_log_path(path))

    def append(self, events: list[dict[str, Any]], *, recorded: list[dict[str, Any]] | None = None) -> int:
        result = self.engine.append([json.dumps(e) for e in events])
        response = {**result.to_dict(), "assigned": [{"fact": e["fact"], "id": e["id"]} for e in events]}
        return self.log.record(self._entry("append", {"events": recorded or events}, 200, response))

    def decide(self, endpoint: str, body: dict[str, Any], response: dict[str, Any] | None = None) -> int:
        answer = HANDLERS[endpoint](self.engine, ALICE, datetime.fromisoformat(AT), body)
        return self.log.record(self._entry(endpoint, body, 200, response or answer))

    def _entry(self, endpoint: str, body: dict[str, Any], status: int, response: dict[str, Any]) -> DecisionEntry:
        assert self.log.token_key is not None
        token = FreshnessToken.of(self.engine, self.log.token_key)
        return DecisionEntry(endpoint=endpoint, caller=ALICE.name, actor=attrs.asdict(ALICE.actor),
                             on_behalf=None, at=AT, request=body, position=token.position,
                             root=self.engine.tree_head.root, token=token.encode(),
                             policy=self.engine.policy.digest, status=status, response=response,
                             reasons=[], duration_ms=1.0)  # fmt: skip

    def close(self) -> None:
        self.engine.close()
        self.log.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path / "s.db")
    server.append([assert_("f1", "k.secret", SECRET, 1)])
    server.append([assert_("f2", "k.derived", "derived", 2, depends_on=["f1"]),
                   assert_("f3", "k.other", KEPT, 3)])  # names f1 (depends_on): redacted  # fmt: skip
    server.decide("resolve", {})  # names f1 and holds the value: redacted
    server.decide("check", {"fact": "f1"})  # names f1: redacted
    server.decide("check", {"fact": "f2"})  # admitted then, dependency_invalidated now
    server.decide("check", {"fact": "f3"})  # untouched by the erasure
    yield server
    server.close()


def erase(server: Served) -> str:
    """``Store.erase``, which redacts the decision log beside the store before its commit."""
    server.engine.close()
    server.log.close()
    with Store.open(server.path) as store:
        result = store.erase(tenant="acme", basis="GDPR Art. 17", actor="writer", facts=["f1"])
    with DecisionLog.open(decision_log_path(server.path), read_only=True) as log:
        if log.version != "1":
            assert len(log.redactions()) == 4
            # done already: a second redaction for the same erase finds nothing more
            assert redact_decisions(server.path, erase_event=result.event, facts=["f1"],
                                    values=[SECRET]) == 0
    server.engine = Engine.open(server.path)
    server.log = DecisionLog.open(decision_log_path(server.path))
    return result.event


class TestReplay:
    def test_before_the_erasure_every_entry_replays(self, served: Served) -> None:
        result = replay_decisions(served.path, handlers=HANDLERS)
        assert result.ok, result.render()
        assert (result.entries, result.replayed, result.erased, result.changed_by_erasure) == (6, 6, 0, 0)

    def test_redacted_entries_are_erased_not_different_and_the_run_is_ok(self, served: Served) -> None:
        event = erase(served)
        served.decide("check", {"fact": "f3"})  # after the erasure
        for _, data in files(decision_log_path(served.path)):
            assert SECRET.encode() not in data
        result = replay_decisions(served.path, handlers=HANDLERS)
        assert result.ok, result.render()
        assert result.chain.ok and result.chain.erase_events == (event,)
        assert (result.entries, result.replayed, result.erased) == (7, 3, 4)
        assert (result.different, result.changed_by_erasure) == (0, 1)  # f2's check
        summary = result.to_dict()
        assert (summary["erased"], summary["changed_by_erasure"], summary["ok"]) == (4, 1, True)
        assert "4 erased" in result.render() and "1 changed by erasure" in result.render()

    def test_an_erasure_excuses_nothing_it_does_not_reach(self, served: Served) -> None:
        """A lying answer about a fact no erasure reaches is still a difference."""
        erase(served)
        served.decide("check", {"fact": "f3"}, response={"codes": ["retracted"]})
        result = replay_decisions(served.path, handlers=HANDLERS)
        assert not result.ok and result.different == 1
        assert result.differences[0].field == "response.codes.length"

    def test_a_redaction_naming_no_erase_event_of_the_store_is_a_difference(self, served: Served) -> None:
        """Made by hand with the schema's own rules (the triggers allow it): the chain cannot
        tell, the store can."""
        path = decision_log_path(served.path)
        served.log.close()
        conn = sqlite3.connect(str(path), isolation_level=None)
        conn.execute("INSERT INTO applied_erasures (erase_event) VALUES ('e-forged')")
        conn.execute("INSERT INTO redactions (seq, erase_event) VALUES (6, 'e-forged')")
        conn.execute("DELETE FROM decision_entries WHERE seq = 6")
        conn.close()
        served.log = DecisionLog.open(path)
        result = replay_decisions(served.path, handlers=HANDLERS)
        assert result.chain.ok and not result.ok
        assert [(d.seq, d.field, d.recorded) for d in result.differences] == [(6, "redaction", "e-forged")]

    def test_a_committed_write_not_as_stored_names_the_value(self, served: Served) -> None:
        """In a committed store a write's events are compared as lines (value and salt): a
        recorded value other than the stored one is reported at the value, not unreadable."""
        event = assert_("f9", "k.nine", "nine", 9)
        seq = served.append([event], recorded=[{**event, "value": "ten"}])
        result = replay_decisions(served.path, handlers=HANDLERS)
        assert [(d.seq, d.field) for d in result.differences] == [(seq, "request.events[0].value")]

    def test_a_redacted_write_still_covers_its_events(self, served: Served) -> None:
        """The first write is redacted (it held the value); coverage counts it by its outline,
        so the event it appended is not reported as stored without a row."""
        erase(served)
        result = replay_decisions(served.path, handlers=HANDLERS)
        assert not [d for d in result.differences if d.field == "coverage"]
        with DecisionLog.open(decision_log_path(served.path), read_only=True) as log:
            assert [r.outline.appended for r in log.redactions()] == [1, 2, None, None]

    def test_a_format_1_log_holding_the_value_refuses_the_erase(self, tmp_path: Path) -> None:
        """An old log cannot be redacted without breaking its chain: ``Store.erase`` refuses
        before anything is written: no erase event, the log as it was."""
        format_1(decision_log_path(tmp_path / "s.db"))
        server = Served(tmp_path / "s.db")
        try:
            assert server.log.version == "1"
            server.append([assert_("f1", "k.secret", SECRET, 1)])
            server.decide("check", {"fact": "f1"})
            server.engine.close()
            server.log.close()
            with Store.open(server.path) as store, pytest.raises(InputError, match="format-1"):
                store.erase(tenant="acme", basis="GDPR Art. 17", actor="writer", facts=["f1"])
            with Store.open(server.path, read_only=True) as store:
                assert len(store) == 1
            server.engine = Engine.open(server.path)
            server.log = DecisionLog.open(decision_log_path(server.path))
        finally:
            server.close()
        assert canonical_text(SECRET)[1:-1].encode() in (tmp_path / "s.db.decisions").read_bytes()
        result = replay_decisions(server.path, handlers=HANDLERS)
        assert result.ok and (result.erased, result.changed_by_erasure) == (0, 0), result.render()
