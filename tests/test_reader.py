"""The one way in (issue 27): every source ``gamma.core.reading.reader.read`` takes gives the same log.

A log's content handed in as a path, bytes, a byte or text stream, standard input, JSON
lines (a list, a generator, bytes), decoded objects or events is read into the same events,
the same canonical bytes and the same heads; broken in one place, every source raises the
same first error (class, message, line, field, source). And nothing in the package but the
reader and its decoders decodes an event: a grep of every module says so.
"""

from __future__ import annotations

import ast
import io
import json
import re
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import logs, malformed_logs
from test_rooms import top_level_definitions

from gamma.core.integrity.chain import head_of
from gamma.core.integrity.commitment import commit
from gamma.core.integrity.merkle import tree_head_of
from gamma.core.reading import events as events_module
from gamma.core.reading.events import canonical_event, load_events
from gamma.core.reading.parsed import ParsedLog
from gamma.core.reading.reader import read, read_numbered, read_objects_log
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import Assert, heard_by
from gamma.core.terms.policy import Policy
from gamma.storage.store import Store
from gamma.storage.verify import verify_file

_SETTINGS = settings(
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
NAME = "<the log>"
Reader = Callable[[Policy], ParsedLog]


def _no_repeated_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({key for key, _ in pairs}) != len(pairs):
        raise ValueError("a key written twice")
    return dict(pairs)


def _object_or_line(row: str) -> Any:
    """A row as a caller holding decoded objects hands it in: an object when the row is one
    JSON object that a dict keeps whole (no repeated key, no float), else the line itself."""
    try:
        obj = json.loads(row, object_pairs_hook=_no_repeated_key, parse_float=_refuse)
    except ValueError:
        return row
    return obj if isinstance(obj, dict) else row


def _refuse(text: str) -> float:
    raise ValueError(text)


def _sources(text: str, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Reader]]:
    """Each adapter of ``read``, over the same content (a log file's text)."""
    rows = text.split("\n")
    yield "lines", lambda p: read(rows, policy=p, name=NAME)
    yield "generator", lambda p: read(iter(rows), policy=p, name=NAME)
    yield "text stream", lambda p: read(io.StringIO(text), policy=p, name=NAME)
    yield "objects", lambda p: read([_object_or_line(row) for row in rows], policy=p, name=NAME)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no file holds it
        return
    path = tmp / "log.jsonl"
    path.write_bytes(data)
    yield "path", lambda p: read(str(path), policy=p, name=NAME)
    yield "pathlike", lambda p: read(path, policy=p, name=NAME)
    yield "bytes", lambda p: read(data, policy=p, name=NAME)
    yield "byte stream", lambda p: read(io.BytesIO(data), policy=p, name=NAME)
    yield "byte lines", lambda p: read([row.encode("utf-8") for row in rows], policy=p, name=NAME)

    def stdin(p: Policy) -> ParsedLog:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        return read("-", policy=p, name=NAME)

    yield "stdin", stdin


def _outcome(reader: Reader, policy: Policy) -> Any:
    """The events, canonical texts and heads read, or the first error's every part."""
    try:
        log = reader(policy)
    except InputError as exc:
        return ("error", type(exc).__name__, exc.message, exc.line, exc.field, exc.source)
    texts = [canonical_event(event) for event in log]
    assert isinstance(log, ParsedLog)
    assert log.heads == (head_of(texts), tree_head_of(texts))  # hashed as it was read
    return ("log", list(log), texts)


class TestEverySourceReadsAlike:
    """The same content through every adapter: the same log, or the same first error."""

    @_SETTINGS
    @given(data=st.data())
    def test_a_valid_log(
        self, data: Any, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Events, canonical bytes and heads agree, with the events handed in as well."""
        log_ = data.draw(logs(max_size=10), label="log")
        text = "\n".join(json.dumps(line, ensure_ascii=False) for line in log_.lines) + "\n"
        tmp = tmp_path_factory.mktemp("reader")
        expected = _outcome(lambda p: load_events_named(tmp, text, p), log_.policy)
        assert expected[0] == "log"
        for name, reader in _sources(text, tmp, monkeypatch):
            assert _outcome(reader, log_.policy) == expected, name
        events = _outcome(lambda p: read(list(log_.events), policy=p, name=NAME), log_.policy)
        assert events == expected

    @_SETTINGS
    @given(data=st.data())
    def test_a_malformed_log(
        self, data: Any, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """One malformation: every source names the same class, message, line and field."""
        bad = data.draw(malformed_logs(), label="malformed")
        tmp = tmp_path_factory.mktemp("reader")
        outcomes = {name: _outcome(reader, bad.policy)
                    for name, reader in _sources(bad.text, tmp, monkeypatch)}  # fmt: skip
        first = outcomes["lines"]
        assert first[0] == "error" and first[3] == bad.line, bad
        assert {name: got for name, got in outcomes.items() if got != first} == {}


def load_events_named(tmp: Path, text: str, policy: Policy) -> ParsedLog:
    """The old way in, for reference: a file read by ``load_events``."""
    path = tmp / "reference.jsonl"
    path.write_text(text, encoding="utf-8")
    log = load_events(path, policy=policy)
    assert isinstance(log, ParsedLog)
    return log


GOOD = [
    {"id": "e1", "type": "assert", "ts": "2026-03-01T09:00:00Z", "actor": "w", "tenant": "acme",
     "fact": "F1", "key": "k", "value": "v"},
    {"id": "e2", "type": "assert", "ts": "2026-03-02T09:00:00Z", "actor": "w", "tenant": "acme",
     "fact": "F2", "key": "k", "value": "w", "supersedes": ["F1"]},
    {"id": "e3", "type": "retract", "ts": "2026-03-03T09:00:00Z", "actor": "w", "tenant": "acme",
     "fact": "F2"},
]  # fmt: skip


class TestOtherSources:
    """A store, a partition's numbered lines and a case's decoded objects."""

    def test_a_store_reads_as_its_file(self, tmp_path: Path) -> None:
        lines = [json.dumps(line) for line in GOOD]
        with Store.init(tmp_path / "s.db") as store:
            store.append(lines)
            stored = read(store)
        from_file = read(lines)
        assert list(stored) == list(from_file)
        assert [canonical_event(e) for e in stored] == [canonical_event(e) for e in from_file]
        assert stored.heads == from_file.heads

    def test_numbered_lines_keep_their_numbers(self) -> None:
        rows = [(4, json.dumps(GOOD[0])), (9, json.dumps(GOOD[2]))]  # F2 is not asserted
        with pytest.raises(InputError) as caught:
            read_numbered(rows, policy=Policy(), source="part")
        assert (caught.value.line, caught.value.field, caught.value.source) == (9, "fact", "part")
        good = read_numbered([(4, json.dumps(GOOD[0]))], policy=Policy(), source="part")
        assert isinstance(good, ParsedLog) and list(good) == list(read([json.dumps(GOOD[0])]))

    def test_objects_are_numbered_from_first(self) -> None:
        broken = [GOOD[0], {**GOOD[1], "value": 1.5}]
        with pytest.raises(InputError) as caught:
            read_objects_log(broken, policy=Policy(), first=0)
        assert (caught.value.line, caught.value.field) == (1, "value")
        with pytest.raises(InputError) as caught:
            read_objects_log([GOOD[0], GOOD[0]], policy=Policy(), first=0)
        assert (caught.value.line, caught.value.field) == (1, "id")

    def test_an_empty_file_and_an_empty_batch(self, tmp_path: Path) -> None:
        """A path, bytes or a stream hold a log file, which is never empty; a batch may be."""
        (tmp_path / "empty").write_bytes(b"")
        for source in (tmp_path / "empty", b"", io.BytesIO(b""), io.StringIO("")):
            with pytest.raises(InputError, match="the file is empty"):
                read(source)  # type: ignore[arg-type]
        assert read([]) == ()

    def test_not_utf8_names_the_line(self) -> None:
        with pytest.raises(InputError) as caught:
            read(json.dumps(GOOD[0]).encode() + b"\n\xff\n")
        assert caught.value.line == 2 and "not UTF-8" in caught.value.message


class TestTheResolutionTimeIsAnArgument:
    """``read(..., at=t)`` records the heads of the prefix heard by ``t``; slicing carries none."""

    def test_heads_of_the_prefix_heard_by_at(self) -> None:
        lines = [json.dumps(line) for line in GOOD]
        at = datetime(2026, 3, 2, 12, tzinfo=UTC)
        lean = read(lines, at=at)
        full = read(lines)
        assert list(lean) == list(full)
        assert all(event._canonical is None for event in lean)
        size = len(heard_by(lean, at))
        texts = [canonical_event(e) for e in full[:size]]
        assert lean.heads_of(size) == (head_of(texts), tree_head_of(texts))
        assert lean.heads_of(len(lean)) == full.heads == lean.heads
        assert full.heads_of(size) is None  # read without at: only the whole log's
        prefix = lean[:size]
        assert isinstance(prefix, ParsedLog) and prefix.heads is None  # no side channel
        assert not hasattr(ParsedLog, "cut")


#: The reader and its decoders: the only modules that may call a decoding function.
DECODERS = {
    "gamma/core/reading/reader.py", "gamma/core/reading/events.py", "gamma/core/reading/plain.py",
    "gamma/core/reading/fastpath.py", "gamma/core/reading/strictjson.py",
}  # fmt: skip
#: Modules that may mark a log as validated (``ParsedLog(...)``): the reader's, and the store's
#: full read of rows it validated when they were appended.
MARKERS = DECODERS | {"gamma/core/reading/parsed.py", "gamma/storage/store.py"}
_DECODING = re.compile(
    r"\b(parse_events|parse_lines|load_events|load_for_resolution|load_file|load_bytes"
    r"|batch_objects?|decode_line|event_from_json|plain_line|typed_line|fast_line|fast_event"
    r"|_?with_canonical)\s*\("
)
_MARKING = re.compile(r"\bParsedLog\s*\(")


def test_nothing_but_the_reader_decodes_an_event() -> None:
    """A grep of the package: a decoder called, or a log marked validated, outside the reader."""
    root = Path(__file__).resolve().parent.parent
    found = []
    for path in sorted((root / "gamma").rglob("*.py")):
        name = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), start=1):
            code = line.split("#", 1)[0]
            if name not in DECODERS and _DECODING.search(code) and "def " not in code:
                found.append(f"{name}:{number}: {line.strip()}")
            if name not in MARKERS and _MARKING.search(code) and "class " not in code:
                found.append(f"{name}:{number}: {line.strip()}")
    assert found == []


def test_verify_reads_a_file_with_an_erase(tmp_path: Path) -> None:
    """Verifying a JSONL file reads each line through the reader under no policy: an erase
    event (whose writer's authority is the policy's business) is read, not a crash."""
    salt = "a" * 64
    committed = commit(salt, "v")
    lines = [
        {**GOOD[0], "value": "v", "salt": salt},
        {"id": "e2", "type": "erase", "ts": "2026-03-02T09:00:00Z", "actor": "w",
         "tenant": "acme", "basis": "gdpr", "erased": [{"fact": "F1", "commitment": committed}]},
    ]  # fmt: skip
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    report = verify_file(path)
    assert report.ok and report.events == 2 and report.erase_events == ("e2",)


def test_no_object_setattr_outside_the_owning_class() -> None:
    """Issue 27: a frozen object's slot is written only by a method of its own class, on
    ``self`` (the events' canonical text through ``keep_canonical``), never by a parser."""
    root = Path(__file__).resolve().parent.parent / "gamma"
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owned: set[int] = set()  # the calls inside a method of a class, on its self
        for cls in ast.walk(tree):
            if isinstance(cls, ast.ClassDef):
                for method in cls.body:
                    if isinstance(method, ast.FunctionDef) and method.args.args:
                        me = method.args.args[0].arg
                        owned.update(
                            id(call) for call in ast.walk(method)
                            if isinstance(call, ast.Call) and call.args
                            and isinstance(call.args[0], ast.Name) and call.args[0].id == me
                        )  # fmt: skip
        for call in ast.walk(tree):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "__setattr__"
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "object"
                and id(call) not in owned
            ):
                found.append(f"{path.relative_to(root.parent)}:{call.lineno}")
    assert found == []


def test_the_ignored_codes_and_the_folds_records_are_named_once() -> None:
    """Issue 27: each name below is defined in one module of the package, and the ignored
    codes' strings are bound to a constant once (gamma.core.resolving.phases)."""
    root = Path(__file__).resolve().parent.parent / "gamma"
    where: dict[str, list[str]] = {}
    codes: list[str] = []
    for path in sorted(root.rglob("*.py")):
        module = str(path.relative_to(root.parent))
        for name, node in top_level_definitions(ast.parse(path.read_text(encoding="utf-8"))):
            where.setdefault(name, []).append(module)
            value = getattr(node, "value", None)
            if isinstance(value, ast.Constant) and value.value in (
                "insufficient_authority", "authority_capped"
            ):
                codes.append(f"{module}:{name}")
    for name in ("FactRecord", "FoldedFact", "Access", "_GrantStream"):
        assert len(where.get(name, [])) == 1, (name, where.get(name))
    for name in ("_Access", "_Fact", "_INSUFFICIENT", "_CAPPED"):  # the names of before
        assert not [m for m in where.get(name, []) if m.startswith("gamma/core/")], name
    assert sorted(codes) == [
        "gamma/core/resolving/phases.py:AUTHORITY_CAPPED",
        "gamma/core/resolving/phases.py:INSUFFICIENT_AUTHORITY",
    ]


def test_keep_canonical_sets_and_clears_the_events_own_cache() -> None:
    """The cache initialiser: an event read from a spaced line keeps its canonical text;
    cleared, the text is computed again byte for byte; the event is returned, unchanged in
    equality (the cache is no field of it)."""
    line = '{"type": "assert", "id": "e1", "ts": "2026-01-01T00:00:00+00:00", "actor": "a", ' \
        '"tenant": "t", "fact": "f1", "key": "k", "value": "v\u00e9"}'  # fmt: skip
    event = read([line])[0]
    assert isinstance(event, Assert)
    kept = canonical_event(event)
    assert kept == json.dumps(
        {"type": "assert", "id": "e1", "ts": "2026-01-01T00:00:00Z", "actor": "a",
         "tenant": "t", "fact": "f1", "key": "k", "value": "v\u00e9"},
        sort_keys=True, separators=(",", ":"), ensure_ascii=False,
    )  # fmt: skip
    assert event._canonical == kept  # read once: the reader filled the slot
    assert event.keep_canonical(None) is event
    assert event._canonical is None
    assert canonical_event(event) == kept  # recomputed, the same bytes
    assert event.keep_canonical("x") is event and canonical_event(event) == "x"
    assert event == read([line])[0]


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\r\n", b"{}"]), max_size=40).map(
        b"".join
    ),
    split=st.integers(min_value=1, max_value=9),
)
def test_a_files_bytes_are_split_into_its_lines_a_slice_at_a_time(data: bytes, split: int) -> None:
    """``byte_lines`` splits a slice at a time: at any slice size, the lines of the whole
    (blank ones, a CR kept, the empty last one after a final newline), none lost or joined at
    a slice's edge."""
    original = events_module._SPLIT_BYTES
    events_module._SPLIT_BYTES = split
    try:
        assert list(events_module.byte_lines(data)) == data.split(b"\n")
    finally:
        events_module._SPLIT_BYTES = original
