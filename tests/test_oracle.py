"""No oracle for the model: nothing it can call tells a right guess of a hidden value from a wrong one.

One log holds 1,000 generated values the bound actor may not see: withheld from it
(a role it lacks, a clearance above its own, a scope that does not contain its own,
a dependency on such a fact) or another tenant's. Two worlds share every byte but
those values: in world A each holds its value, in world B a different value of the
same shape. The same calls go to a server over each world, each guessing world A's
value, right in A and wrong in B; every result (the whole ``CallToolResult``,
serialized) must be byte-identical, through every tool and every argument that
takes model text or ids. A fact the actor cannot see and one that does not exist
must also be answered alike, byte for byte, in one world. The same for the
LangGraph store. The generator is seeded: the same 1,000 values on every run.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

pytest.importorskip("mcp")
pytest.importorskip("langgraph")

from langgraph.store.base import PutOp  # noqa: E402

import gamma  # noqa: E402
from gamma.integrations.binding import Binding  # noqa: E402
from gamma.integrations.langgraph import GovernedStore, namespace_of  # noqa: E402
from gamma.integrations.mcp import TOOLS, GammaMCP  # noqa: E402

N = 1000
AT = datetime(2026, 3, 2, 10, tzinfo=UTC)
ALICE = {"id": "alice", "tenant": "acme", "roles": ["sales"], "clearance": "internal",
         "scope": "helios/launch"}
HIDINGS = ("access_denied", "clearance", "out_of_scope", "dependency_restricted", "foreign")
SYLLABLES = ("zor", "van", "kel", "mir", "tas", "quo", "ret", "lun", "dax", "pel")


def _noun(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()


#: shape -> a value of that shape (the salient-token classes the validator knows, and more)
SHAPES: dict[str, Callable[[random.Random], str | int | bool]] = {
    "amount": lambda r: f"${r.randrange(1000, 999_999):,}",
    "percent": lambda r: f"{r.randrange(1, 99)}%",
    "identifier": lambda r: f"ORD-{r.randrange(1000, 9999)}",
    "date": lambda r: f"2026-{r.randrange(1, 12):02d}-{r.randrange(1, 28):02d}",
    "noun": _noun,
    "integer": lambda r: r.randrange(10_000, 99_999),
    "boolean": lambda r: r.random() < 0.5,
    "sentence": lambda r: f"the launch moves to {_noun(r)} on day {r.randrange(2, 300)}",
}


@attrs.frozen
class Hidden:
    fact: str
    key: str
    hiding: str
    value: str | int | bool  # world A
    other: str | int | bool  # world B: the same shape, another value

    @property
    def absent_fact(self) -> str:
        return "H" + str(int(self.fact[1:]) + N)  # same shape, no such fact

    @property
    def absent_key(self) -> str:
        return f"secret.{int(self.fact[1:]) + N}"


def generate() -> list[Hidden]:
    rng = random.Random(26)
    out = []
    for i in range(N):
        shape = rng.choice(sorted(SHAPES))
        value = SHAPES[shape](rng)
        other = value
        while other == value:
            other = SHAPES[shape](rng) if shape != "boolean" else not value
        out.append(Hidden(fact=f"H{i}", key=f"secret.{i}", hiding=HIDINGS[i % len(HIDINGS)],
                          value=value, other=other))
    return out


HIDDEN = generate()


def world(values: str) -> list[dict[str, Any]]:
    """The log of world A (``values="value"``) or B (``"other"``): only hidden values differ."""
    events: list[dict[str, Any]] = [
        {"id": "v1", "type": "assert", "ts": "2026-03-01T08:00:00Z", "actor": "crm", "tenant": "acme",
         "fact": "V1", "key": "region", "value": "EMEA", "authority": "executive"},
        {"id": "v2", "type": "assert", "ts": "2026-03-01T08:00:00Z", "actor": "crm", "tenant": "acme",
         "fact": "V2", "key": "launch", "value": "2026-04-20", "scope": "helios"},
    ]
    for i, h in enumerate(HIDDEN):
        event: dict[str, Any] = {
            "id": f"e{i}", "type": "assert", "ts": "2026-03-01T09:00:00Z", "actor": "crm",
            "tenant": "acme", "fact": h.fact, "key": h.key, "value": getattr(h, values),
        }
        if h.hiding == "access_denied":
            event["visibility"] = {"roles": ["hr"]}
        elif h.hiding == "clearance":
            event["visibility"] = {"clearance": "secret"}
        elif h.hiding == "out_of_scope":
            event["scope"] = "hr/payroll"
        elif h.hiding == "dependency_restricted":
            event["depends_on"] = [HIDDEN[i - 3].fact]  # an access_denied fact
        else:
            event["tenant"] = "globex" if i % 2 else "initech"
        if i % 7 == 0:
            event["authority"] = "executive"
        events.append(event)
    return events


def server(values: str) -> GammaMCP:
    engine = gamma.Engine()
    engine.append(world(values))
    return GammaMCP(Binding(engine, ALICE, clock=lambda: AT))


def probes(h: Hidden) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every tool, every argument that takes model text or ids, guessing world A's value."""
    text = json.dumps(h.value) if not isinstance(h.value, str) else h.value
    yield "recall", {"keys": [h.key]}
    yield "recall", {"keys": [h.key, "region", "launch"]}
    yield "remember", {"key": h.key, "value": h.value}
    yield "remember", {"key": "note", "value": text, "scope": "helios"}
    yield "remember", {"key": text if isinstance(h.value, str) else f"k{h.value}", "value": 1}
    yield "remember", {"key": h.key, "value": h.value, "kind": "fact", "scope": "hr/payroll"}
    yield "remember", {"key": "note", "value": "v", "supersedes": [h.fact]}
    yield "remember", {"key": "note", "value": "v", "depends_on": ["V2", h.fact]}
    yield "forget", {"fact": h.fact, "reason": text}
    yield "forget", {"fact": "V1", "reason": text}  # executive's: kept, and said so
    if int(h.fact[1:]) % 20 == 0:
        yield "recall", {}  # everything, after the writes (every 20th: it grows with them)


def test_every_tool_is_probed() -> None:
    """A tool added later must be added to the probes (and so to this rule)."""
    probed = {name for h in HIDDEN[:1] for name, _ in probes(h)}
    assert probed == set(TOOLS) == {"recall", "remember", "forget"}


def test_hiding_kinds_are_what_they_say() -> None:
    """World A hides each generated fact from alice for the reason it was generated with."""
    resolution = server("value").binding.resolve()
    codes = {x.fact: set(x.codes) for x in resolution.excluded}
    expected = {"access_denied": "access_denied", "clearance": "access_denied",
                "out_of_scope": "out_of_scope", "dependency_restricted": "dependency_restricted"}
    for h in HIDDEN:
        if h.hiding == "foreign":
            assert h.fact not in codes
        else:
            assert expected[h.hiding] in codes[h.fact], h
        assert resolution.admitted_fact(h.fact) is None
    assert {a.fact for a in resolution.admitted} == {"V1", "V2"}


def test_a_right_guess_and_a_wrong_one_get_the_same_bytes() -> None:
    """The same 10,050 calls over world A (each guess right) and world B (each wrong); a fresh
    pair of servers every 100 values keeps the logs, and the test's time, small."""
    calls = 0
    for h in HIDDEN:
        if int(h.fact[1:]) % 100 == 0:
            a, b = server("value"), server("other")
        for name, arguments in probes(h):
            right = a.call(name, arguments).model_dump_json()
            wrong = b.call(name, arguments).model_dump_json()
            assert right == wrong, (h, name, arguments)
            calls += 1
    assert calls == 10 * N + N // 20
    # the calls did something: writes landed, refusals were refusals
    assert len(a.binding.engine) == len(b.binding.engine) > len(world("value")) + 100


def test_hidden_and_absent_facts_and_keys_are_answered_alike() -> None:
    """In one world, naming a hidden (or another tenant's) fact or key reads as naming none."""
    a = server("value")
    for h in HIDDEN:
        pairs = [
            ("forget", {"fact": h.fact, "reason": "r"}, {"fact": h.absent_fact, "reason": "r"}),
            ("remember", {"key": "k", "value": 1, "supersedes": [h.fact]},
             {"key": "k", "value": 1, "supersedes": [h.absent_fact]}),
            ("remember", {"key": "k", "value": 1, "depends_on": [h.fact]},
             {"key": "k", "value": 1, "depends_on": [h.absent_fact]}),
            ("recall", {"keys": [h.key]}, {"keys": [h.absent_key]}),
        ]
        for name, hidden, absent in pairs:
            seen, unseen = a.call(name, hidden), a.call(name, absent)
            assert seen.model_dump_json() == unseen.model_dump_json(), (h, name)
            assert seen.is_error is (name != "recall")


def stores() -> tuple[GovernedStore, GovernedStore]:
    """Stores over world A and world B."""
    a, b = (GovernedStore(server(values).binding.engine, ALICE, clock=lambda: AT)
            for values in ("value", "other"))
    return a, b


def store_ops(h: Hidden) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """(method, args, kwargs) of the store calls that name h's key or guess its value."""
    namespace = namespace_of("hr/payroll" if h.hiding == "out_of_scope" else "global")
    ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("get", (namespace, h.key), {}),
        ("batch", ([PutOp(namespace, h.key, {"value": h.value})],), {}),
        ("put", (("helios", "launch"), h.key, {"value": h.value}), {}),
        ("get", (("helios", "launch"), h.key), {}),
        ("delete", (namespace, h.key), {}),
    ]
    if int(h.fact[1:]) % 20 == 0:
        ops.append(("search", ((),), {"filter": {"value": h.value}}))
    return ops


def outcome(store: GovernedStore, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    try:
        return repr(getattr(store, method)(*args, **kwargs))
    except gamma.GammaError as exc:
        return f"{type(exc).__name__}: {exc}"


def test_the_langgraph_store_answers_alike() -> None:
    """get, put, delete and search over worlds A and B, and of hidden against absent keys."""
    for h in HIDDEN:
        if int(h.fact[1:]) % 100 == 0:
            a, b = stores()
        for method, args, kwargs in store_ops(h):
            assert outcome(a, method, args, kwargs) == outcome(b, method, args, kwargs), h
        engine = a.binding.engine
        before = len(engine)
        namespace = store_ops(h)[0][1][0]
        assert a.get(namespace, h.key) is None and a.get(namespace, h.absent_key) is None
        a.delete(namespace, h.key)
        a.delete(namespace, h.absent_key)
        assert len(engine) == before
        if int(h.fact[1:]) % 100 == 99:  # the worlds differ, but not to alice
            assert engine.head != b.binding.engine.head
            assert [e.id for e in engine.events] == [e.id for e in b.binding.engine.events]
