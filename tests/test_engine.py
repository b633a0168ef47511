"""gamma.Engine: an open, growing log whose answers are those of the pure Γ, byte for byte."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import A, R, stamp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from strategies import (
    Log,
    actors,
    logs,
    merge,
    other_tenant_streams,
    probe_times,
)

import gamma
from gamma.cli import main
from gamma.core.incremental.engine import EngineState
from gamma.core.integrity.chain import step
from gamma.core.terms.decisions import Recomputed


def _pure(lines: list[dict[str, Any]], policy: gamma.Policy, actor: Any, at: Any) -> gamma.Resolution:
    events = gamma.parse_events([json.dumps(line) for line in lines], policy=policy)
    return gamma.resolve(events, actor, at, policy)


@given(st.data())
def test_engine_equals_pure_resolve_over_random_batches(data: st.DataObject) -> None:
    """Cut a log into random batches; after each, resolve/check agree with Γ over all events so far."""
    log = data.draw(logs(max_size=14))
    engine = EngineState(log.policy)
    lines = list(log.lines)
    done = 0
    while done < len(lines):
        size = data.draw(st.integers(1, len(lines) - done))
        batch = lines[done : done + size]
        form = data.draw(st.sampled_from(("dict", "json", "event")))
        if form == "json":
            engine.append([json.dumps(line) for line in batch])
        elif form == "dict":
            engine.append(batch)
        else:
            engine.append(list(log.events[done : done + size]))
        done += size
        so_far = log.lines[:done]
        for _ in range(data.draw(st.integers(0, 3))):
            actor = data.draw(actors(log))
            at = data.draw(probe_times(log))
            expected = _pure(list(so_far), log.policy, actor, at)
            got = engine.resolve(actor, at)
            assert got.to_json() == expected.to_json()
            assert got.digest == expected.digest
            assert got.render("context") == expected.render("context")
            decided = {a.fact: a for a in expected.admitted} | {x.fact: x for x in expected.excluded}
            if decided:
                asked = data.draw(st.lists(st.sampled_from(sorted(decided)), min_size=1, max_size=4))
                assert engine.check(actor, at, asked) == {f: decided[f] for f in asked}
            keys = sorted({a.key for a in expected.admitted} | {x.key for x in expected.excluded if x.key})
            if keys:
                wanted = set(data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=2)))
                part = engine.resolve(actor, at, keys=wanted)
                assert part.admitted == tuple(a for a in expected.admitted if a.key in wanted)
                assert part.excluded == tuple(x for x in expected.excluded if x.key in wanted)
                assert part.known_unknowns == tuple(k for k in expected.known_unknowns if k in wanted)


@given(st.data())
def test_a_bad_batch_changes_nothing(data: st.DataObject) -> None:
    """A batch with one bad event is refused whole, naming its line; the engine answers as before."""
    log = data.draw(logs(min_size=2, max_size=10))
    cut = data.draw(st.integers(1, len(log.lines) - 1))
    engine = EngineState(log.policy)
    engine.append(list(log.lines[:cut]))
    rest = list(log.lines[cut:])
    bad_at = data.draw(st.integers(0, len(rest) - 1))
    bad = dict(rest[bad_at])
    bad["id"] = log.lines[0]["id"]  # a duplicate id
    rest[bad_at] = bad
    actor = data.draw(actors(log))
    at = log.last_ts() + timedelta(days=1)
    before = engine.resolve(actor, at).to_json()
    head = engine.head
    with pytest.raises(gamma.InputError) as caught:
        engine.append(rest)
    assert caught.value.line == bad_at + 1
    assert engine.head == head and len(engine) == cut
    assert engine.resolve(actor, at).to_json() == before
    engine.append(list(log.lines[cut:]))  # the good batch still goes in
    assert engine.resolve(actor, at).to_json() == _pure(list(log.lines), log.policy, actor, at).to_json()


@given(st.data())
def test_other_tenants_never_change_an_answer(data: st.DataObject) -> None:
    """Merging any other tenants' events into a log moves only the head of an acme actor's record."""
    log = data.draw(logs(tenants=("acme",), max_size=10))
    others = data.draw(other_tenant_streams(log.policy))
    mixed = merge(log, others)
    actor = data.draw(actors(log, tenant="acme"))
    at = data.draw(probe_times(mixed))
    alone, together = EngineState(log.policy), EngineState(log.policy)
    alone.append(list(log.lines))
    together.append(list(mixed.lines))
    a, b = alone.resolve(actor, at).to_dict(), together.resolve(actor, at).to_dict()
    for name in ("admitted", "excluded", "experiences", "ignored"):
        assert a[name] == b[name]
    assert b["log"] == together.head_at(at)


# -- a store-backed engine -----------------------------------------------------------------


class EngineWithSecondWriter(RuleBasedStateMachine):
    """An engine over a store, a second writer (another Store handle) appending behind its back."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "log.db"
        self.log: Log | None = None
        self.done = 0
        self.engine: gamma.Engine | None = None
        self.writer: gamma.Store | None = None

    @initialize(log=logs(min_size=1, max_size=14))
    def start(self, log: Log) -> None:
        self.log = log
        gamma.Store.init(self.path, policy=log.policy).close()
        self.engine = gamma.Engine.open(self.path)
        self.writer = gamma.Store.open(self.path)

    def _next(self, data: st.DataObject) -> list[dict[str, Any]]:
        assert self.log is not None
        size = data.draw(st.integers(1, len(self.log.lines) - self.done))
        batch = list(self.log.lines[self.done : self.done + size])
        self.done += size
        return batch

    @precondition(lambda self: self.log is not None and self.done < len(self.log.lines))
    @rule(data=st.data())
    def engine_appends(self, data: st.DataObject) -> None:
        assert self.engine is not None
        result = self.engine.append(self._next(data))
        assert result.events == self.done == len(self.engine)

    @precondition(lambda self: self.log is not None and self.done < len(self.log.lines))
    @rule(data=st.data())
    def second_writer_appends(self, data: st.DataObject) -> None:
        assert self.writer is not None
        self.writer.append(self._next(data))

    @rule()
    def refresh(self) -> None:
        assert self.engine is not None
        self.engine.refresh()
        assert len(self.engine) == self.done

    @rule(data=st.data())
    def resolve(self, data: st.DataObject) -> None:
        assert self.engine is not None and self.log is not None
        actor = data.draw(actors(self.log))
        at = data.draw(probe_times(self.log))
        lines = list(self.log.lines[: len(self.engine)])
        assert self.engine.resolve(actor, at).to_json() == _pure(lines, self.log.policy, actor, at).to_json()

    @rule(data=st.data())
    def check(self, data: st.DataObject) -> None:
        """A check after the kept results of earlier calls: the pure decisions, never stale ones."""
        assert self.engine is not None and self.log is not None
        actor = data.draw(actors(self.log))
        at = data.draw(probe_times(self.log))
        lines = list(self.log.lines[: len(self.engine)])
        expected = _pure(lines, self.log.policy, actor, at)
        decided = {a.fact: a for a in expected.admitted} | {x.fact: x for x in expected.excluded}
        if decided:
            asked = data.draw(st.lists(st.sampled_from(sorted(decided)), min_size=1, max_size=3))
            assert self.engine.check(actor, at, asked) == {f: decided[f] for f in asked}

    @invariant()
    def head_is_the_stores(self) -> None:
        if self.engine is not None and self.writer is not None:
            stored = gamma.Store.open(self.path)
            try:
                assert stored.events()[: len(self.engine)] == self.engine.events
            finally:
                stored.close()

    def teardown(self) -> None:
        for handle in (self.engine, self.writer):
            if handle is not None:
                handle.close()
        self.dir.cleanup()


TestEngineWithSecondWriter = EngineWithSecondWriter.TestCase
TestEngineWithSecondWriter.settings = settings(stateful_step_count=12)


def test_a_second_writer_process_is_seen_on_refresh(tmp_path: Path) -> None:
    """Events another process appends reach the engine on refresh, and only those rows are read."""
    path = tmp_path / "log.db"
    events = stamp([A("F1", "region", "EMEA"), A("F2", "region", "APAC", supersedes=["F1"])])
    with gamma.Store.init(path) as store:
        store.append([events[0]])
    with gamma.Engine.open(path) as engine:
        script = (
            "import gamma, json, sys\n"
            "with gamma.Store.open(sys.argv[1]) as s: s.append([json.loads(sys.argv[2])])\n"
        )
        subprocess.run([sys.executable, "-c", script, str(path), json.dumps(events[1])], check=True)
        assert len(engine) == 1
        assert engine.refresh() == 1 and engine.refresh() == 0
        who = {"id": "alice", "tenant": "acme"}
        got = engine.resolve(who, "2030-01-01T00:00:00Z")
        assert [a.fact for a in got.admitted] == ["F2"]
        with gamma.Store.open(path) as store:
            assert got.log == store.head()


# -- the store's read path checks what it relies on ------------------------------------------


def _cli(*args: str) -> tuple[int, str]:
    """Run the command line; its exit status and what it printed (stdout and stderr)."""
    runner = CliRunner()
    code = 0
    with runner.isolation() as (out, err, _):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue().decode() + err.getvalue().decode()


def _tampered(tmp_path: Path, sql: list[str]) -> Path:
    path = tmp_path / "log.db"
    with gamma.Store.init(path) as store:
        store.append(stamp([A("F1", "region", "EMEA"), A("F2", "tone", "concise"), R("F1")]))
    conn = sqlite3.connect(path)
    for statement in sql:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path


def _duplicate_last_row(tmp_path: Path) -> Path:
    path = _tampered(tmp_path, [])
    conn = sqlite3.connect(path)
    # the assert of F2 again, chained onto the last row, once the unique indexes are gone
    for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' AND sql IS NOT NULL"
    ).fetchall():
        conn.execute(f"DROP INDEX {name}")
    conn.execute("DROP TRIGGER events_no_replace")  # it refuses an existing key too
    row = conn.execute("SELECT * FROM events WHERE position = 2").fetchone()
    names = [d[0] for d in conn.execute("SELECT * FROM events LIMIT 0").description]
    copy = dict(zip(names, row, strict=True))
    last = conn.execute("SELECT position, head FROM events ORDER BY position DESC LIMIT 1").fetchone()
    copy["position"] = last[0] + 1
    copy["prev_head"] = last[1]
    copy["head"] = step(bytes.fromhex(last[1]), copy["body"]).hex()
    copy["keyed_head"] = None
    marks = ",".join("?" * len(names))
    conn.execute(f"INSERT INTO events ({','.join(names)}) VALUES ({marks})", [copy[n] for n in names])
    conn.commit()
    conn.close()
    return path


def test_a_duplicate_row_is_an_integrity_error_naming_its_position(tmp_path: Path) -> None:
    path = _duplicate_last_row(tmp_path)
    with gamma.Store.open(path) as store, pytest.raises(gamma.IntegrityError, match="position 4"):
        store.events()
    with pytest.raises(gamma.IntegrityError, match="position 4"):
        gamma.Engine.open(path)


def test_a_deleted_first_row_is_an_integrity_error(tmp_path: Path) -> None:
    path = _tampered(tmp_path, ["DROP TRIGGER events_no_delete", "DELETE FROM events WHERE position = 1"])
    with gamma.Store.open(path) as store, pytest.raises(gamma.IntegrityError, match="position 1: missing"):
        store.events()


def test_an_edited_body_is_an_integrity_error(tmp_path: Path) -> None:
    path = _tampered(
        tmp_path,
        ["DROP TRIGGER events_no_update", "UPDATE events SET body = replace(body, 'EMEA', 'APAC') WHERE position = 1"],
    )
    with gamma.Store.open(path) as store, pytest.raises(gamma.IntegrityError, match="position 1: its body"):
        store.events()


@pytest.mark.parametrize("damage", ["duplicate", "deleted"])
def test_resolve_exits_1_naming_the_position(tmp_path: Path, damage: str) -> None:
    if damage == "duplicate":
        path, where = _duplicate_last_row(tmp_path), "position 4"
    else:
        path = _tampered(tmp_path, ["DROP TRIGGER events_no_delete", "DELETE FROM events WHERE position = 1"])
        where = "position 1"
    code, output = _cli(
        "resolve", str(path), "--actor", '{"id": "alice", "tenant": "acme"}', "--at", "2030-01-01T00:00:00Z"
    )
    assert code == 1, output
    assert where in output and "Traceback" not in output


def test_resolve_key_gives_the_block_for_those_keys(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(
        "\n".join(json.dumps(e) for e in stamp([A("F1", "region", "EMEA"), A("F2", "tone", "concise"), A("F3", "plan", "gold")]))
    )
    args = ["resolve", str(log), "--actor", '{"id": "alice", "tenant": "acme"}', "--at", "2030-01-01T00:00:00Z", "--format", "context"]
    code, output = _cli(*args, "--key", "region", "--key", "plan")
    assert code == 0, output
    assert "EMEA" in output and "gold" in output and "concise" not in output


def test_engine_starts_empty_and_appends_json_lines() -> None:
    engine = gamma.Engine()
    lines = "\n".join(json.dumps(e) for e in stamp([A("F1", "region", "EMEA")]))
    result = engine.append(lines)
    assert (result.appended, result.events) == (1, 1) and result.head == engine.head
    decision = engine.check({"id": "alice", "tenant": "acme"}, "2030-01-01T00:00:00Z", ["F1"])
    assert isinstance(decision["F1"], gamma.Admitted)
    with pytest.raises(gamma.UnknownReferenceError):
        engine.check({"id": "gina", "tenant": "globex"}, "2030-01-01T00:00:00Z", ["F1"])


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (2**60, gamma.ValueTypeError),
        (-(2**53), gamma.ValueTypeError),
        (1.5, gamma.ValueTypeError),
        (float("nan"), gamma.JSONSyntaxError),
        ("\ud800", gamma.ValueTypeError),
        ({1, 2}, gamma.ValueTypeError),
    ],
)
@pytest.mark.parametrize("as_event", [False, True])
def test_objects_from_python_obey_the_rules_of_a_json_line(
    value: object, error: type[gamma.InputError], as_event: bool
) -> None:
    """A dict or a hand-built Event is refused for what its JSON line would be refused for."""
    (event,) = stamp([A("F1", "region", "EMEA")])
    item: Any = {**event, "value": value}
    if as_event:
        item = gamma.parse_events([json.dumps(event)])[0]
        object.__setattr__(item, "value", value)  # what a careless caller's object can hold
    engine = gamma.Engine()
    with pytest.raises(error) as raised:
        engine.append([item])
    assert raised.value.line == 1
    assert engine.events == ()


def test_a_dict_and_its_json_line_append_the_same_bytes() -> None:
    (event,) = stamp([A("F1", "region", "EMEA ✓ é")])
    from_dict, from_line = gamma.Engine(), gamma.Engine()
    assert from_dict.append([event]).head == from_line.append([json.dumps(event)]).head


_RECOMPUTE = gamma.load_policy(Path(__file__).resolve().parent.parent / "policies/recompute.toml")
_DERIVED_LOG = stamp([
    A("W1", "snacks.weekly", 10),
    A("T1", "snacks.two_weeks", 20, kind="derived", depends_on=["W1"], derivation="{snacks.weekly} * 2"),
    A("P1", "pay", 3000),
    A("S1", "savings", 900, kind="derived", depends_on=["P1"], derivation="{pay} * 30%"),
    A("G1", "fund", 5400, kind="derived", depends_on=["S1"], derivation="{savings} * 6"),
    A("W2", "snacks.weekly", 7),
    A("P2", "pay", 0, visibility={"roles": ["hr"]}),
    A("Z1", "zero", 0),
    A("Q1", "per_head", 1, kind="derived", depends_on=["S1", "Z1"], derivation="{savings} / {zero}"),
    R("Z1"),
    A("W3", "snacks.weekly", "12.5"),
    A("W4", "snacks.weekly_v2", 9, supersedes=["W3"]),  # another key now holds the input
])  # fmt: skip


@given(st.data())
def test_engine_recomputes_derivations_as_the_pure_resolver_does(data: st.DataObject) -> None:
    """Issue 29: appended in random batches, asked for everything, some keys or some facts, by
    an actor who sees the hidden pay or not, the engine gives the pure resolver's bytes."""
    engine = EngineState(_RECOMPUTE)
    done = 0
    seen = set()
    while done < len(_DERIVED_LOG):
        size = data.draw(st.integers(1, len(_DERIVED_LOG) - done))
        engine.append(_DERIVED_LOG[done : done + size])
        done += size
        who = data.draw(st.sampled_from(({"id": "a", "tenant": "acme"},
                                         {"id": "h", "tenant": "acme", "roles": ["hr"]})))
        at = _DERIVED_LOG[done - 1]["ts"]
        expected = _pure(_DERIVED_LOG[:done], _RECOMPUTE, who, at)
        keys = set(data.draw(st.lists(st.sampled_from(("snacks.two_weeks", "fund", "per_head")),
                                      max_size=2)))
        if keys:
            part = engine.resolve(who, at, keys=keys)
            assert part.admitted == tuple(a for a in expected.admitted if a.key in keys)
            assert part.excluded == tuple(x for x in expected.excluded if x.key in keys)
        got = engine.resolve(who, at)
        assert got.to_json() == expected.to_json()
        assert got.render("context") == expected.render("context")
        seen |= {a.fact for a in expected.admitted if isinstance(a, Recomputed)}
    assert seen  # the log recomputes along the way


def test_wrong_types_are_named_at_the_engine_door() -> None:
    """A str actor, a str of facts, a dict batch, a number for a path: each a TypeError naming
    the parameter, before any work (a str of facts is never read as its characters)."""
    engine = gamma.Engine()
    engine.append([{"id": "e1", "type": "assert", "ts": "2026-03-01T09:00:00Z", "actor": "a",
                    "tenant": "acme", "fact": "F1", "key": "k", "value": 1}])  # fmt: skip
    who = {"id": "a", "tenant": "acme"}
    for call, name in ((lambda: engine.resolve("a", "2026-03-02T00:00:00Z"), "actor"),
                       (lambda: engine.check(who, "2026-03-02T00:00:00Z", "F1"), "facts"),
                       (lambda: engine.resolve(who, "2026-03-02T00:00:00Z", keys="k"), "keys"),
                       (lambda: engine.append({"a": 1}), "events"),
                       (lambda: gamma.Engine.open(3), "source"),
                       (lambda: gamma.Engine(policy="strict"), "policy")):  # fmt: skip
        with pytest.raises(TypeError, match=name):
            call()
    assert len(engine) == 1
    assert set(engine.check(who, "2026-03-02T00:00:00Z", ("F1",))) == {"F1"}
