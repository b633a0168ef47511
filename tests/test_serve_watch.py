"""The change feed of ``gamma serve`` (``gamma.serve.watch``): the pure diff, the feed against
an independent oracle (pure ``gamma.resolve`` at every position), resuming from any token, and
a real server's stream."""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import A, G, R, V, actor, log, stamp, ts
from hypothesis import given, settings
from hypothesis import strategies as st
from serve_process import serving, write_callers
from strategies import actors, logs

from gamma import Engine, Event, Policy, parse_actor, parse_events, resolve
from gamma.core.terms.canonical import compact_json
from gamma.core.terms.errors import InputError
from gamma.core.terms.policy import DEFAULT_POLICY
from gamma.data import policy_by_name
from gamma.serve import watch
from gamma.serve.errors import NotFresh
from gamma.serve.freshness import FreshnessToken
from gamma.serve.types import Caller
from gamma.serve.watch import (
    Follower,
    Message,
    changes,
    encode_message,
    resume_token,
    watch_events,
)
from gamma.storage.decisions import DecisionLog, decision_log_path
from gamma.storage.store import Store

# -- the pure diff ---------------------------------------------------------------------------

ALICE = actor("alice", roles=["r1"])
SECRET = "the-hidden-value"
STORY = (
    A("f1", "k1", "v1"),  # 1: admitted
    A("f2", "k2", SECRET, visibility={"roles": ["r9"]}),  # 2: hidden: nothing
    A("f3", "k1", "v2", supersedes=["f1"]),  # 3: f1 superseded, f3 admitted
    A("f4", "k3", "x", visibility={"roles": ["r9"]}),  # 4: hidden: nothing
    G(fact="f4", to_actor="alice"),  # 5: f4 admitted
    V(fact="f4", to_actor="alice"),  # 6: f4 hidden again: removed, no value, no reason
    A("f5", "k4", "soon", valid_until=ts(8.5)),  # 7: admitted
    R("f3"),  # 8: f3 retracted
    {"type": "experience", "experience": "x1", "content": "c", "uses": ["f3"], "ts": ts(9)},
)
EXPECTED: dict[int, list[dict[str, Any]]] = {
    1: [{"change": "admitted", "fact": "f1", "key": "k1", "value": "v1"}],
    3: [
        {"change": "excluded", "fact": "f1", "key": "k1", "reasons": ["superseded"]},
        {"change": "admitted", "fact": "f3", "key": "k1", "value": "v2"},
    ],
    5: [{"change": "admitted", "fact": "f4", "key": "k3", "value": "x"}],
    6: [{"change": "removed", "fact": "f4", "key": "k3"}],
    7: [{"change": "admitted", "fact": "f5", "key": "k4", "value": "soon"}],
    8: [{"change": "excluded", "fact": "f3", "key": "k1", "reasons": ["retracted"]}],
    9: [{"change": "excluded", "fact": "f5", "key": "k4", "reasons": ["expired"]}],
}


def _brief(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fields the story pins (an admitted record's other fields are the resolution's)."""
    names = ("change", "fact", "key", "value", "reasons")
    return [{n: c[n] for n in names if n in c} for c in found]


def _oracle(events: Sequence[Event], who: Any, policy: Policy | None = None) -> dict[int, list]:
    """Pure ``gamma.resolve`` over every prefix at its last event's ts, diffed pairwise."""
    out, before = {}, None
    for p in range(1, len(events) + 1):
        after = resolve(events[:p], who, events[p - 1].ts, policy)
        found = changes(before, after)
        if found:
            out[p] = found
        before = after
    return out


def test_the_story_by_pure_resolve_and_by_the_follower() -> None:
    events = log(*STORY)
    oracle = _oracle(events, ALICE)
    assert {p: _brief(c) for p, c in oracle.items()} == EXPECTED
    follower = Follower(ALICE, DEFAULT_POLICY)
    assert dict(follower.steps(events)) == oracle
    assert SECRET not in json.dumps(oracle)


def test_an_admitted_record_is_the_callers_reading_of_it() -> None:
    events = log(A("f1", "k1", 7, scope="a", kind="rule", priority="soft"))
    (entry,) = changes(None, resolve(events, actor(scope="a/b"), ts(1)))
    assert entry == {"change": "admitted", "fact": "f1", "key": "k1", "value": 7, "scope": "a",
                     "authority": "peer", "kind": "rule", "priority": "soft",
                     "needs_recheck": False}  # fmt: skip


def test_a_changed_record_is_reported_and_an_unchanged_one_is_not() -> None:
    # retracting f1 invalidates its dependent f2 (policy mode exclude)
    events = log(A("f1", "k1", "a"), A("f2", "k2", "b", depends_on=["f1"]), R("f1"))
    before = resolve(events[:2], ALICE, ts(2))
    after = resolve(events, ALICE, ts(3))
    assert _brief(changes(before, after)) == [
        {"change": "excluded", "fact": "f1", "key": "k1", "reasons": ["retracted"]},
        {"change": "excluded", "fact": "f2", "key": "k2", "reasons": ["dependency_invalidated"]},
    ]
    assert changes(after, after) == []
    assert changes(before, before) == []


def test_a_recheck_flag_or_a_recomputed_value_is_a_change() -> None:
    flagged = policy_by_name("recheck")
    events = log(A("f1", "k1", "a"), A("f2", "k2", "b", depends_on=["f1"]), R("f1"),
                 policy=flagged)  # fmt: skip
    found = changes(resolve(events[:2], ALICE, ts(2), flagged),
                    resolve(events, ALICE, ts(3), flagged))  # fmt: skip
    assert [(c["change"], c["fact"], c.get("needs_recheck")) for c in found] == [
        ("excluded", "f1", None), ("changed", "f2", True)
    ]  # fmt: skip
    recompute = policy_by_name("recompute")
    events = log(A("w1", "weekly", 10), A("t1", "two_weeks", 20, kind="derived",
                 depends_on=["w1"], derivation="{weekly} * 2"), A("w2", "weekly", 7),
                 policy=recompute)  # fmt: skip
    before = resolve(events[:2], ALICE, ts(2), recompute)
    (entry,) = [c for c in changes(before, resolve(events, ALICE, ts(3), recompute))
                if c["fact"] == "t1"]  # fmt: skip
    assert (entry["change"], entry["value"]) == ("changed", 14)
    assert entry["inputs"] == {"events": ["e3"], "facts": ["w2"]}
    assert 20 not in entry.values()  # the stale stated value is never shown


def test_a_hidden_fact_never_shows_and_a_fact_hidden_later_is_removed_without_cause() -> None:
    # f1 is for r2 only; a key grant shows it to r1, its revoke hides it again; f2 stays hidden
    events = log(
        A("f1", "k1", SECRET, visibility={"roles": ["r2"]}),
        G(key="k1", role="r1"),
        V(key="k1", role="r1"),
        A("f2", "k2", SECRET, visibility={"actors": ["bob"]}),
    )
    seen = _oracle(events, ALICE)
    assert _brief(seen[2]) == [{"change": "admitted", "fact": "f1", "key": "k1", "value": SECRET}]
    assert seen[3] == [{"change": "removed", "fact": "f1", "key": "k1"}]  # as a fact gone
    assert set(seen) == {2, 3}
    assert _oracle(events, actor("carol", roles=["r3"])) == {}  # never seen: never named
    assert SECRET not in json.dumps(seen[3])


def test_order_is_by_key_then_fact_id() -> None:
    events = log(A("z", "k1", 1), A("b", "k2", 2), A("a", "k2", 3, supersedes=["b"]),
                 A("c", "k0", 4))  # fmt: skip
    found = changes(resolve(events[:2], ALICE, ts(2)), resolve(events, ALICE, ts(4)))
    assert [(c["key"], c["fact"], c["change"]) for c in found] == [
        ("k0", "c", "admitted"),
        ("k2", "a", "admitted"),
        ("k2", "b", "excluded"),
    ]


# -- the feed against the oracle ---------------------------------------------------------------


def _tail(events: Sequence[Event], who: Any, policy: Policy, since: int) -> dict[int, list]:
    follower = Follower(who, policy)
    follower.start(events[:since])
    assert follower.position == since
    return dict(follower.steps(events[since:]))


_POLICIES = tuple(policy_by_name(name) for name in ("default", "recheck", "recompute"))
_WHO = actor("alice", roles=["r1"])
_SHOWN = ({"roles": ["r1"]}, {"actors": ["alice"]})
_HIDDEN = ({"roles": ["r2"]}, {"actors": ["bob"]})


@st.composite
def _histories(draw: st.DrawFn) -> tuple[tuple[Event, ...], Policy]:
    """A log of the watched tenant (acme) and another (globex) in which what alice may rely
    on moves often: asserts that expire or start later, hidden ones, supersessions, derived
    facts over inputs that change (recomputed values, recheck flags), retractions, grants
    and revocations by fact and by key; time passes between events, or not."""
    policy = draw(st.sampled_from(_POLICIES))
    lines: list[dict[str, Any]] = []
    facts: list[tuple[str, str]] = []  # acme's (fact, key)
    grants: list[dict[str, str]] = []
    hidden: list[tuple[str, str]] = []  # those alice may not see (unless granted)
    minute = 0.0
    for n in range(draw(st.integers(1, 16))):
        minute += draw(st.sampled_from((0, 1, 1, 5)))
        body: dict[str, Any] = {"id": f"e{n}", "ts": ts(minute), "actor": "w", "tenant": "acme"}
        kind = draw(st.sampled_from(("assert",) * 4 + ("retract", "grant", "revoke", "other")))
        if kind in ("retract", "grant", "revoke") and not facts:
            kind = "assert"
        if kind == "other":
            body |= {"tenant": "globex", "type": "assert", "fact": f"g{n}", "key": "k1", "value": n}
        elif kind == "assert":
            key = draw(st.sampled_from(("k1", "k1", "k2", "k3")))
            body |= {"type": "assert", "fact": f"f{n}", "key": key, "value": n}
            if draw(st.booleans()):
                body["visibility"] = draw(st.sampled_from(_SHOWN + _HIDDEN))
                if body["visibility"] in _HIDDEN:
                    hidden.append((f"f{n}", key))
            for field in ("valid_from", "valid_until"):
                if draw(st.integers(0, 3)) == 0:
                    body[field] = ts(minute + draw(st.sampled_from((-1, 0.5, 1, 3, 6))))
            if "valid_from" in body and "valid_until" in body:
                body["valid_until"] = ts(minute + 7)
            inputs = [f for f, k in facts if k == "k1"]
            if key != "k1" and inputs and draw(st.booleans()):
                body |= {"kind": "derived", "depends_on": [inputs[-1]], "derivation": "{k1} * 2"}
            elif facts and draw(st.integers(0, 3)) == 0:
                body["supersedes"] = [draw(st.sampled_from(facts))[0]]
            facts.append((f"f{n}", key))
        elif kind == "retract":
            body |= {"type": "retract", "fact": draw(st.sampled_from(facts))[0]}
        elif kind == "revoke" and grants and draw(st.integers(0, 3)) > 0:
            body |= {"type": "revoke", **draw(st.sampled_from(grants))}  # ends an earlier grant
        else:  # mostly of a fact hidden from alice: what a grant changes
            fact, key = draw(st.sampled_from(hidden if hidden and draw(st.booleans()) else facts))
            target = draw(st.sampled_from(({"fact": fact}, {"key": key})))
            target |= draw(st.sampled_from(({"to_actor": "alice"}, {"role": "r1"}, {"role": "r2"})))
            body |= {"type": kind, **target}
            if kind == "grant":
                grants.append(target)
        lines.append(body)
    return parse_events([compact_json(line) for line in lines], policy=policy), policy


@given(_histories(), st.data())
def test_the_feed_is_the_diff_of_pure_resolve_at_every_position(
    history: tuple[tuple[Event, ...], Policy], data: st.DataObject
) -> None:
    """Appends, retractions, expiries and deferred starts (time passing between events),
    grants and revocations, derived values recomputed, another tenant's events between: the
    follower's changes equal pure Γ's diffs at each position, from the start and resumed from
    any position, and a value shows only for a fact alice may rely on."""
    events, policy = history
    oracle = _oracle(events, _WHO, policy)
    assert _tail(events, _WHO, policy, 0) == oracle
    since = data.draw(st.integers(0, len(events)))
    assert _tail(events, _WHO, policy, since) == {p: c for p, c in oracle.items() if p > since}
    for p, found in oracle.items():
        admitted = {a.fact: a for a in resolve(events[:p], _WHO, events[p - 1].ts, policy).admitted}
        for entry in found:
            if "value" in entry:
                assert entry["value"] == admitted[entry["fact"]].value
            else:
                assert entry["fact"] not in admitted
            if entry["change"] == "removed":
                assert set(entry) == {"change", "fact", "key"}


@settings(max_examples=min(settings().max_examples, 200))  # a second look, not the main one
@given(st.data())
def test_the_feed_is_the_diff_of_pure_resolve_over_generated_logs(data: st.DataObject) -> None:
    """The suite's general log generator (every event type, policies, actors) as well."""
    generated = data.draw(logs(max_size=12))
    events, policy = generated.events, generated.policy
    who = parse_actor(data.draw(actors(generated, tenant="acme")), policy=policy)
    assert _tail(events, who, policy, 0) == _oracle(events, who, policy)


# -- the async feed over a store ---------------------------------------------------------------


class _Source:
    """A worker's service as the feed sees it: an engine over a store, refreshed while waited on."""

    def __init__(self, path: Path) -> None:
        self.engine = Engine.open(path)
        self.store_path = path
        self.policy = self.engine.policy
        self.token_key = KEY
        self.reads = 0  # of the store, while someone waits
        self.broken: Exception | None = None

    def __len__(self) -> int:
        return len(self.engine)

    def events_since(self, position: int) -> Sequence[Event]:
        return self.engine.events_since(position)

    async def wait_for_growth(self, position: int, timeout: float) -> int:
        with anyio.move_on_after(timeout):
            while True:
                if self.broken is not None:
                    raise self.broken
                self.reads += 1
                self.engine.refresh()
                if len(self.engine) > position:
                    break
                await anyio.sleep(0.005)
        return len(self.engine)


KEY = bytes(range(32))


def _token(path: Path, position: int, key: bytes = KEY) -> FreshnessToken:
    with Store.open(path) as store:
        return FreshnessToken.make(key, position, store.tree_head(position).root)


def _store(tmp_path: Path, lines: Sequence[dict[str, Any]]) -> Path:
    path = tmp_path / "s.db"
    with Store.init(path) as store:
        if lines:
            store.append([compact_json(line) for line in lines])
    return path


def _caller() -> Caller:
    return Caller(name="alice-agent", actor=ALICE)


async def _collect(source: _Source, since: FreshnessToken | None, until: int, **kw: Any) -> list[Message]:
    """Messages until the stream has caught up with position ``until`` (then it is dropped)."""
    got: list[Message] = []
    stream = await watch_events(source, _caller(), since, **kw)
    async for message in stream:
        got.append(message)
        if message.get("event") == "position" and json.loads(message["data"])["position"] >= until:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    return got


def test_the_stream_resumes_from_every_id_with_the_same_tail(tmp_path: Path) -> None:
    lines = stamp(STORY)
    path = _store(tmp_path, lines)

    async def main() -> None:
        source = _Source(path)
        whole = await _collect(source, _token(path, 0), len(lines))
        assert [m["event"] for m in whole] == ["change"] * len(EXPECTED) + ["position"]
        bodies = [json.loads(m["data"]) for m in whole if m["event"] == "change"]
        assert {b["position"]: _brief(b["changes"]) for b in bodies} == EXPECTED
        with Store.open(path) as store:
            roots = {store.tree_head(p).root for p in range(len(lines) + 1)}
        for index, message in enumerate(whole):  # a client that saw this message, reconnecting
            assert message["id"] == json.loads(message["data"])["token"]
            assert not any(root in message["data"] for root in roots)  # a MAC, never the root
            resumed = await _collect(source, resume_token("junk", message["id"]), len(lines))
            assert resumed[:-1] == whole[index + 1 : -1]
            assert resumed[-1] == whole[-1]

    anyio.run(main)


def test_a_token_of_another_log_is_refused_and_one_from_the_future_is_not_fresh(
    tmp_path: Path,
) -> None:
    path = _store(tmp_path, stamp(STORY))

    async def main() -> None:
        source = _Source(path)
        forged = FreshnessToken(position=3, mac="0" * 64)
        with pytest.raises(InputError) as refused:
            await watch_events(source, _caller(), forged)
        assert refused.value.field == "since"
        with pytest.raises(InputError) as refused:
            await watch_events(source, _caller(), forged, field="Last-Event-ID")
        assert refused.value.field == "Last-Event-ID"
        with pytest.raises(InputError):  # the right root under another deployment's key
            await watch_events(source, _caller(), _token(path, 3, bytes(32)))
        with pytest.raises(NotFresh):
            await watch_events(source, _caller(), FreshnessToken(position=99, mac="0" * 64), wait=0.05)

    anyio.run(main)


def test_resume_token_prefers_last_event_id() -> None:
    one, two = FreshnessToken(position=1, mac="a" * 64), FreshnessToken(position=2, mac="b" * 64)
    assert resume_token(one.encode(), two.encode()) == two
    assert resume_token(one.encode(), None) == one
    assert resume_token(None, None) is None
    with pytest.raises(InputError) as bad:
        resume_token("gt1.x", None)
    assert bad.value.field == "since"


def test_messages_encode_as_server_sent_events() -> None:
    assert encode_message({"comment": "keep-alive"}) == b": keep-alive\n\n"
    assert encode_message({"event": "change", "id": "gt1.1.x", "data": '{"a":1}'}) == (
        b'event: change\nid: gt1.1.x\ndata: {"a":1}\n\n'
    )
    # a value's line breaks stay escaped in the one data line: nothing can end the message
    data = compact_json({"value": "two\nlines\r\u2028x"})
    assert encode_message({"event": "change", "data": data}).count(b"\n") == 3


async def _next_event(stream: Any) -> Message:
    """The next message that is not a comment."""
    while "comment" in (message := await stream.__anext__()):
        pass
    return message  # type: ignore[no-any-return]


def test_a_live_stream_sees_appends_keeps_alive_and_advances_over_other_tenants(
    tmp_path: Path,
) -> None:
    path = _store(tmp_path, stamp(STORY[:1]))

    async def main() -> None:
        source = _Source(path)
        stream = await watch_events(source, _caller(), None, keepalive=0.05)
        first = await stream.__anext__()
        assert first["event"] == "position" and json.loads(first["data"])["position"] == 1
        assert await stream.__anext__() == {"comment": "keep-alive"}
        writer = Store.open(path)  # another writer: the source learns of it by polling
        other = {"id": "o1", "ts": ts(2), "actor": "w", "tenant": "globex", "type": "assert",
                 "fact": "g1", "key": "k", "value": 1}  # fmt: skip
        writer.append([compact_json(other)])
        moved = await _next_event(stream)
        assert moved["event"] == "position" and json.loads(moved["data"])["position"] == 2
        writer.append([compact_json(stamp([A("f9", "k9", "new")])[0] | {"id": "e9", "ts": ts(3)})])
        writer.close()
        got = await _next_event(stream)
        body = json.loads(got["data"])
        assert got["event"] == "change" and body["position"] == 3
        assert _brief(body["changes"]) == [
            {"change": "admitted", "fact": "f9", "key": "k9", "value": "new"}
        ]
        await stream.aclose()  # type: ignore[attr-defined]

    anyio.run(main)


# -- a real server -----------------------------------------------------------------------------


def _messages(response: Any) -> Iterator[Message]:
    """The SSE messages of a streamed response, comments included."""
    message: Message = {}
    for line in response.iter_lines():
        if line:
            name, _, value = line.partition(":")
            message[name or "comment"] = value.removeprefix(" ")
        elif message:
            yield message
            message = {}


def _next_change(stream: Iterator[Message]) -> Message:
    return next(m for m in stream if m.get("event") in ("change", "position"))


@pytest.mark.skipif(importlib.util.find_spec("uvicorn") is None, reason="needs gamma[serve]")
def test_a_real_server_streams_appends_within_50_ms_and_a_killed_watcher_resumes(
    tmp_path: Path,
) -> None:
    """One watcher sees each append by another process, is killed, misses appends, and a new
    one resuming from the last id it saw gets each change after it once, in order."""
    path = _store(tmp_path, stamp(STORY[:1]))
    callers = tmp_path / "callers.toml"
    secret = write_callers(
        callers,
        [{"name": "alice-agent", "actor": {"id": "alice", "tenant": "acme", "roles": ["r1"]}}],
    )
    # the deployment's token key, made here by the first opener of the decision log: the
    # server opening it next reads the same key, so a token made now is the server's
    with DecisionLog.open(decision_log_path(path)) as decisions:
        assert decisions.token_key is not None
        start = _token(path, 0, decisions.token_key).encode()
    latencies: list[float] = []
    seen: list[int] = []

    def append_and_see(writer: Store, stream: Iterator[Message], n: int) -> str:
        body = {"id": f"w{n}", "ts": ts(10 + n), "actor": "writer", "tenant": "acme",
                "type": "assert", "fact": f"w{n}", "key": f"wk{n}", "value": n}  # fmt: skip
        writer.append([compact_json(body)])
        appended = time.perf_counter()
        message = _next_change(stream)
        latencies.append(time.perf_counter() - appended)
        data = json.loads(message["data"])
        assert message["event"] == "change" and data["changes"][0]["fact"] == f"w{n}"
        seen.append(data["position"])
        return message["id"]

    with serving(path, callers) as server, server.client(secret["alice-agent"]) as client:
        writer = Store.open(path)
        with client.stream("GET", "/v1/watch", params={"since": start}) as response:
            assert response.status_code == 200
            stream = _messages(response)
            first = _next_change(stream)  # f1, then caught up
            assert json.loads(first["data"])["position"] == 1
            assert _next_change(stream)["event"] == "position"
            last = first["id"]
            for n in range(1, 9):
                last = append_and_see(writer, stream, n)
        for n in range(9, 12):  # nobody watching
            writer.append(
                [
                    compact_json(
                        {
                            "id": f"w{n}",
                            "ts": ts(10 + n),
                            "actor": "writer",
                            "tenant": "acme",
                            "type": "retract",
                            "fact": f"w{n - 8}",
                        }
                    )
                ]
            )
        headers = {"Last-Event-ID": last}
        with client.stream(
            "GET", "/v1/watch", params={"since": start}, headers=headers
        ) as response:
            stream = _messages(response)
            missed = [json.loads(_next_change(stream)["data"]) for _ in range(4)]
            assert [m["position"] for m in missed] == [10, 11, 12, 12]
            assert [c["fact"] for m in missed[:3] for c in m["changes"]] == ["w1", "w2", "w3"]
            for n in range(12, 20):
                append_and_see(writer, stream, n)
        writer.close()
        bad = client.get("/v1/watch", params={"since": f"gt1.1.{'0' * 64}"})
        assert bad.status_code == 400 and "traceback" not in bad.text.lower()
        assert "Traceback" not in server.log()  # a watcher that left is no error
    assert seen == [*range(2, 10), *range(13, 21)]
    latencies.sort()
    shown = [f"{latencies[int(q * (len(latencies) - 1))] * 1e3:.1f}" for q in (0, 0.5, 0.9, 1)]
    print(f"watch latency ms (n={len(latencies)}): min, p50, p90, max = {', '.join(shown)}")
    assert latencies[len(latencies) // 2] < 0.050


def test_idle_watchers_share_one_poller_and_a_failed_read_ends_every_stream(
    tmp_path: Path,
) -> None:
    path = _store(tmp_path, stamp(STORY[:1]))

    async def main() -> None:
        source = _Source(path)
        streams = [await watch_events(source, _caller(), None) for _ in range(10)]
        for stream in streams:
            assert (await stream.__anext__())["event"] == "position"
        reads = 0
        with pytest.raises(ExceptionGroup) as ended:  # noqa: PT012
            async with anyio.create_task_group() as group:
                for stream in streams:
                    group.start_soon(stream.__anext__)
                await anyio.sleep(0.3)
                reads = source.reads
                source.broken = InputError("the store went away")
                await anyio.sleep(1)
        assert 0 < reads < 120  # one poller reads every 5 ms; ten would read 600 times
        assert len(ended.value.exceptions) == 10
        assert all(isinstance(e, InputError) for e in ended.value.exceptions)

    anyio.run(main)


def test_a_log_that_keeps_growing_still_gets_position_messages_at_a_bounded_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch, "POSITION_EVERY", 0.1)
    path = _store(tmp_path, stamp(STORY[:1]))

    async def main() -> None:
        source = _Source(path)
        stream = await watch_events(source, _caller(), None)
        assert (await stream.__anext__())["event"] == "position"
        got: list[Message] = []

        async def read() -> None:
            async for message in stream:
                got.append(message)

        async with anyio.create_task_group() as group:
            group.start_soon(read)
            with Store.open(path) as writer:
                for n in range(40):  # another tenant's events, every 10 ms
                    other = {"id": f"o{n}", "ts": ts(2), "actor": "w", "tenant": "globex",
                             "type": "assert", "fact": f"g{n}", "key": "k", "value": n}  # fmt: skip
                    writer.append([compact_json(other)])
                    await anyio.sleep(0.01)
            await anyio.sleep(0.2)
            group.cancel_scope.cancel()
        positions = [json.loads(m["data"])["position"] for m in got]
        assert [m["event"] for m in got] == ["position"] * len(positions)
        assert 2 <= len(positions) <= 10 and positions == sorted(positions)
        assert positions[-1] == 41  # and the last one is told once it stops

    anyio.run(main)
