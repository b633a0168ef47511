"""Issue 30, "gone from every byte": once ``gamma erase`` returns, an erased value and its salt
occur in no byte of the store, its -wal and -shm, nor in anything gamma writes after (an export,
``resolve`` in every format and its audit record, the HTML report, ``explain``), nor in what an
engine open on the store keeps once the erase reached it.

Over generated logs and values (text with quotes, backslashes, newlines, non-ASCII, emoji,
markup; long text that spills onto SQLite's overflow pages; integers and booleans, erased too
but not scannable), in a committed store with a read-only ``Store`` and a ``gamma.Engine`` open
on it during every erase, the values are erased by fact, by key, by data subject and by tenant
in turn. After each erase every file is scanned for every erased value in UTF-8, JSON-escaped,
``\\u``-escaped, HTML-escaped, UTF-16 LE and BE, hex and base64 (each alignment), for its random
core in the same forms, for each chunk of a long value, and for its salt (hex, raw, base64).
The scan is checked to find each value before its erase (a scanner that finds nothing proves
nothing), and the values that were not erased must still be there after.
"""

from __future__ import annotations

import base64
import json
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import attrs
from erasure_helpers import (
    core_of,
    distinctive,
    every_file,
    gamma,
    kept_values,
    needles,
    scan,
    store_files,
    text_leaks,
)
from helpers import AT, A, R, stamp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gamma import Engine
from gamma.storage.store import Store

EXAMPLES = max(3, min(30, settings().max_examples // 20))
"""Few by default (each example is a store, four erasures and some thirty commands); the ``ci``
profile runs 25."""

DECORATIONS = (
    "", '"', "\\", "\n", "\r\n", "\t", "é", "Grüße, ", "日本語", "😀", "\U0001f9ec x",
    "\u2028", "<b a='1'>&amp;", "\\u0041", '"}', "' OR 1=1 --", "\u00a0", "ß\u0301",
)  # fmt: skip
TENANTS = ("acme", "beta")
KEYS = ("k0", "k1", "kkey")
SUBJECTS = (None, "subj", "other")
ACTORS = {tenant: json.dumps({"id": f"reader-{tenant}", "tenant": tenant}) for tenant in TENANTS}
ERASER = "dpo"
BASIS = "GDPR Art. 17(1)(b)"


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 90 else f"{shown[:80]}...<{len(value)} characters>"


@attrs.frozen
class Fact:
    fact: str
    tenant: str
    key: str
    subject: str | None
    value: Any = attrs.field(repr=_short)
    core: str | None  # None: not text, so not scannable


@attrs.frozen
class World:
    facts: tuple[Fact, ...]
    lines: tuple[dict[str, Any], ...]
    policy: str

    def fact(self, name: str) -> Fact:
        return next(f for f in self.facts if f.fact == name)


@st.composite
def values(draw: st.DrawFn, seed: int, index: int, *, text_only: bool) -> tuple[Any, str | None]:
    kind = draw(st.sampled_from(("text", "text", "long") if text_only else
                                ("text", "text", "long", "int", "bool")))
    if kind == "int":
        return draw(st.integers(-(2**53) + 1, 2**53 - 1)), None
    if kind == "bool":
        return draw(st.booleans()), None
    core = core_of(seed, index)
    before = draw(st.sampled_from(DECORATIONS)) + draw(st.text(max_size=4).filter(_printable))
    after = draw(st.text(max_size=4).filter(_printable)) + draw(st.sampled_from(DECORATIONS))
    filler = draw(st.integers(5_000, 20_000)) if kind == "long" else 0
    return distinctive(core, before, after, filler), core


def _printable(text: str) -> bool:
    return all(not 0xD800 <= ord(c) <= 0xDFFF for c in text)


@st.composite
def worlds(draw: st.DrawFn) -> World:
    """Facts f0..fn: f0 is erased by its id, f1 (key ``kkey``) by key, f2 (subject ``subj``)
    by subject, all of tenant acme; f3 and any other of beta by tenant. Others fall where
    their drawn tenant, key and subject put them. Sometimes a retract, and a derived fact whose
    recomputed value (policy ``recompute``) would be f0's value itself."""
    seed = draw(st.integers(0, 2**32 - 1))
    count = draw(st.integers(4, 7))
    facts = []
    for i in range(count):
        tenant = "acme" if i < 3 else "beta" if i == 3 else draw(st.sampled_from(TENANTS))
        key = {0: draw(st.sampled_from(("k0", "kkey"))), 1: "kkey", 2: "k1"}.get(
            i, draw(st.sampled_from(KEYS)))
        subject = "subj" if i == 2 else draw(st.sampled_from(SUBJECTS))
        value, core = draw(values(seed, i, text_only=i < 4))
        facts.append(Fact(f"f{i}", tenant, key, subject, value, core))
    # a short value in each tenant: `resolve --format text` fails (exit 4) when every cell of
    # a column is longer than 120 characters (gamma/core/resolving/render.py `_table`, a bug of its own)
    facts += [Fact(f"n-{tenant}", tenant, "note", None, 7, None) for tenant in TENANTS]
    lines = [A(f.fact, f.key, f.value, tenant=f.tenant, **({"subject": f.subject} if f.subject else {}))
             for f in facts]
    policy = draw(st.sampled_from(("default", "recompute")))
    if draw(st.booleans()):  # f0 through a derivation: recompute would hand f0's value on
        lines.append(A("d0", "derived.key", "stated", kind="derived", depends_on=["f0"],
                       derivation='if({f0} == "", "empty", {f0})'))
    if draw(st.booleans()):
        gone = draw(st.sampled_from(facts[:count]))
        lines.append(R(gone.fact, tenant=gone.tenant, reason="moved"))
    return World(tuple(facts), tuple(stamp(lines)), policy)


def rounds(world: World) -> Iterator[tuple[str, list[str], set[str]]]:
    """Each erase in turn: its name, its selector arguments, and the facts it must erase (the
    tenant's committed facts it selects that an earlier round did not erase)."""
    erased: set[str] = set()
    plan: list[tuple[str, str, list[str], Any]] = [
        ("fact", "acme", ["--fact", "f0"], lambda f: f.fact == "f0"),
        ("key", "acme", ["--key", "kkey"], lambda f: f.key == "kkey"),
        ("subject", "acme", ["--subject", "subj"], lambda f: f.subject == "subj"),
        ("tenant", "beta", ["--all-of-tenant"], lambda f: True),
    ]
    for name, tenant, selector, picks in plan:
        chosen = {f.fact for f in world.facts if f.tenant == tenant and picks(f)} - erased
        erased |= chosen
        yield name, ["--tenant", tenant, *selector], chosen


@given(world=worlds())
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_an_erased_value_is_in_no_byte_gamma_keeps_or_writes(world: World) -> None:
    with tempfile.TemporaryDirectory(prefix="gamma-erasure-") as tmp, ExitStack() as open_:
        root = Path(tmp)
        inputs, folder, out = root / "in", root / "store", root / "out"
        for made in (inputs, folder, out):
            made.mkdir()
        store = folder / "s.db"
        log = inputs / "log.jsonl"
        half = len(world.lines) // 2  # the rest is appended by the engine: still in the WAL
        log.write_text("".join(json.dumps(line) + "\n" for line in world.lines[:half]),
                       encoding="utf-8")
        assert gamma("init", store, "--commit-values", "--policy", world.policy).code == 0
        appended = gamma("append", store, log)
        assert appended.code == 0, appended.err
        reader = open_.enter_context(Store.open(store, read_only=True))
        engine = open_.enter_context(Engine.open(store))
        engine.append([json.dumps(line) for line in world.lines[half:]])
        before = gamma("export", store)
        kept = kept_values(before.out)
        assert set(kept) >= {f.fact for f in world.facts}, "a committed store keeps each value and salt"
        scannable = {f.fact: f for f in world.facts if f.core is not None}
        wanted = {name: needles(name, f.value, kept[name][1], str(f.core)) for name, f in scannable.items()}

        # the scanner finds each value (its core, in the value row) before any erase
        found = {name for _, name in scan(store_files(store), {n: forms for fact in wanted.values()
                                                                for n, forms in fact.items()})}
        for name in scannable:
            assert f"{name} core utf-8" in found, f"the scan does not see {name}'s value stored"
            assert f"{name} salt hex" in found, f"the scan does not see {name}'s salt stored"

        signed = reader.tree_head()  # as a checkpoint would sign it
        for tenant in TENANTS:  # the engine and the reader hold every value before the erase
            engine.resolve(json.loads(ACTORS[tenant]), AT)
        assert reader.events()

        erased: set[str] = set()
        for name, selector, expected in rounds(world):
            if not expected:  # erasing what is not there: an error that changes nothing
                refused = gamma("erase", store, *selector, "--basis", BASIS, "--actor", ERASER)
                assert refused.code == 2, (name, refused)
                continue
            done = gamma("erase", store, *selector, "--basis", BASIS, "--actor", ERASER)
            assert done.code == 0, (name, done.err)
            assert sorted(done.json()["erased"]) == sorted(expected), name
            erased |= expected
            _check_after(world, root, store, engine, reader, erased, wanted, kept, name)
            assert reader.tree_head(signed.size) == signed, "the erase changed the tree"
        verified = gamma("verify", store, "--json")
        assert verified.code == 0, verified.err + verified.out
        assert verified.json()["erased"] == len(erased)
    assert erased


def _check_after(world: World, root: Path, store: Path, engine: Engine, reader: Store,
                 erased: set[str], wanted: dict[str, dict[str, bytes]],
                 kept: dict[str, tuple[Any, str]], name: str) -> None:
    """After one erase: the engine's next read, the readers' memory, every output, every file."""
    out = root / "out" / name
    out.mkdir()
    assert engine.refresh() == 1  # the engine's read of the store takes the erase event in
    for tenant in TENANTS:
        res = engine.resolve(json.loads(ACTORS[tenant]), AT)
        for fact in erased:
            if world.fact(fact).tenant == tenant:
                found = res.excluded_fact(fact)
                assert found is not None and "erased" in found.codes, (name, fact, tenant)
    gone = {fact: [str(world.fact(fact).value), str(world.fact(fact).core), kept[fact][1]]
            for fact in erased if world.fact(fact).core is not None}
    assert text_leaks([engine], gone) == [], f"after erasing by {name}, the engine keeps a value"
    assert all(getattr(e, "value", None) is None for e in reader.events()
               if getattr(e, "fact", None) in erased and type(e).__name__ == "Assert")
    assert text_leaks([reader], gone) == []

    _outputs(world, store, out, erased)
    targets = {n: form for fact in gone for n, form in wanted[fact].items()}
    files = [*store_files(store), *every_file(out)]  # what was written before may hold it
    assert scan(files, targets) == [], f"after erasing by {name}, bytes of an erased value remain"

    exported = kept_values((out / "export.jsonl").read_text(encoding="utf-8"))
    assert not set(exported) & erased
    for fact in {f.fact for f in world.facts} - erased:  # what was not erased is all there
        assert exported[fact] == kept[fact], f"erasing by {name} touched {fact}"


def _event_of(world: World, fact: str) -> str:
    return next(str(line["id"]) for line in world.lines
                if line["type"] == "assert" and line["fact"] == fact)


def _outputs(world: World, store: Path, out: Path, erased: set[str]) -> None:
    """Everything gamma writes from the store after the erase, into ``out``."""
    exported = gamma("export", store)
    assert exported.code == 0, exported.err
    (out / "export.jsonl").write_text(exported.out, encoding="utf-8")
    verified = gamma("verify", store, "--json")
    assert verified.code == 0, verified.err
    (out / "verify.json").write_text(verified.out, encoding="utf-8")
    for tenant, who in ACTORS.items():
        sliced = gamma("log", store, "--tenant", tenant)
        assert sliced.code == 0, sliced.err
        (out / f"log-{tenant}.jsonl").write_text(sliced.out, encoding="utf-8")
        for fmt in ("json", "text", "context"):
            audit = out / f"audit-{tenant}-{fmt}.json"
            res = gamma("resolve", store, "--actor", who, "--at", AT, "--format", fmt,
                        *(["--audit", audit] if fmt == "json" else []))
            assert res.code == 0, res.err
            (out / f"resolve-{tenant}.{fmt}").write_text(res.out, encoding="utf-8")
        for auditor in ([], ["--auditor"]):
            report = out / f"report-{tenant}{'-auditor' if auditor else ''}.html"
            done = gamma("report", store, "--actor", who, "--at", AT, *auditor, "--out", report)
            assert done.code == 0, done.err
        for fact in sorted(f for f in erased if world.fact(f).tenant == tenant):
            proof = gamma("prove", "inclusion", store, "--event", _event_of(world, fact))
            assert proof.code == 0, proof.err
            (out / f"prove-{fact}.json").write_text(proof.out, encoding="utf-8")
            for fmt in ("text", "json"):
                shown = gamma("explain", store, fact, "--actor", who, "--at", AT, "--auditor",
                              "--format", fmt)
                assert shown.code == 0, shown.err
                (out / f"explain-{fact}.{fmt}").write_text(shown.out, encoding="utf-8")


def test_the_scanner_finds_each_form_it_looks_for(tmp_path: Path) -> None:
    """The scan's own check: a value written in any of its forms, at any offset (base64 at
    each alignment), is found; bytes that hold none of them are not."""
    core = core_of(1, 2)
    value = distinctive(core, "😀\"\\\n", "日本")
    wanted = needles("f", value, "ab" * 32, core)
    written = {}
    for name, form in wanted.items():
        shift = int(name[-1]) if "base64/" in name else None
        for offset in range(3) if shift is None else (shift,):
            data = form
            if shift is not None:  # encoded from the raw bytes, as any base64 writer would
                raw = {"value": value.encode("utf-8"), "core": core.encode("ascii"),
                       "salt": bytes.fromhex("ab" * 32)}[name.split()[1]]
                data = base64.b64encode(b"x" * offset + raw)
            path = tmp_path / f"{len(written)}.bin"
            path.write_bytes(b"\0" * offset + data + b"\0")
            written[str(path)] = name
    hits = scan([Path(p) for p in written], wanted)
    assert {path for path, _ in hits} == set(written)
    assert all(written[path] in {name for p, name in hits if p == path} for path in written)
    clean = tmp_path / "clean.bin"
    clean.write_bytes(value.encode("utf-16-le")[1:] + core.lower().encode())  # off by a byte
    assert scan([clean], {n: f for n, f in wanted.items() if "utf-16" not in n}) == []


def test_an_erase_through_the_engine_leaves_nothing_in_it(tmp_path: Path) -> None:
    """``Engine.erase`` (the host's): the values leave the engine it ran in, its resolutions
    (made before, cached) and the store's bytes."""
    store = tmp_path / "s.db"
    values = {f"f{i}": distinctive(core_of(7, i), "«", "»\n") for i in range(4)}
    lines = [json.dumps(e) for e in stamp([A(fact, "k", value, **({} if fact == "f3" else
                                                                  {"subject": "subj"}))
                                            for fact, value in values.items()])]
    with Store.init(store, commit_values=True) as made:
        made.append(lines)
        kept = kept_values(made.export())
    who = json.loads(ACTORS["acme"])
    with Engine.open(store) as engine:
        before = engine.resolve(who, AT)
        assert {a.fact for a in before.admitted} == {"f3"}  # the same key: the last one wins
        engine.resolve(who, "2026-03-01T09:02:30Z")  # a time f1 held the key
        done = engine.erase(tenant="acme", subject="subj", basis=BASIS, actor=ERASER)
        assert sorted(done.erased) == ["f0", "f1", "f2"]
        gone = {f: [values[f], core_of(7, int(f[1:])), kept[f][1]] for f in done.erased}
        assert text_leaks([engine], gone) == []
        res = engine.resolve(who, "2026-03-01T09:02:30Z")  # as of every time
        for fact in ("f0", "f1"):  # heard by then (f2 came later)
            found = res.excluded_fact(fact)
            assert found is not None and "erased" in found.codes, fact
        assert text_leaks([engine, res], gone) == []
        wanted = {n: form for f in done.erased
                  for n, form in needles(f, values[f], kept[f][1], core_of(7, int(f[1:]))).items()}
        assert scan(store_files(store), wanted) == []
    assert scan(store_files(store), wanted) == []
