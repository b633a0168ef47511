"""The event schema is stated once (``gamma.core.terms.model``), and every decoder follows it.

Two kinds of test. First, each table a decoder is built from (``plain``'s structs,
``fastpath``'s checks, ``events``' field tuples) names exactly the model's fields, so a field
added to the model reaches every decoder. Second, a property over generated valid and
malformed logs, written by other encoders (``json.dumps`` defaults, compact ASCII, compact
UTF-8, ``ensure_ascii`` escapes with surrogate pairs, keys in any order, CRLF line ends):
every way in and the strict path alone give the same events, the same canonical bytes and
the same first error (class, message, line, field). A malformed line has a field broken
against its own rule (the bad values chosen by the rule the model declares), a field left
out or unknown, or a key written twice. Last, the comparison is shown to see a rule broken
in one decoder alone.
"""

from __future__ import annotations

import json
import random
from typing import Any, Union

import attrs
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import logs, malformed_logs

from gamma.core.reading import events as events_module
from gamma.core.reading import fastpath as fastpath_module
from gamma.core.reading import plain as plain_module
from gamma.core.reading import schema as schema_module
from gamma.core.reading.events import canonical_event, parse_events
from gamma.core.reading.schema import FAST_RULES, fast_kinds, fields_of, named
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import (
    EVENT_TYPES,
    ErasedValue,
    Rule,
    Visibility,
    rule_of,
)
from gamma.core.terms.policy import Policy

_SETTINGS = settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)

# -- the derived tables name the model's fields ---------------------------------------------


def _model_fields(cls: type) -> tuple[str, ...]:
    return tuple(field.name for field in attrs.fields(cls) if field.init)


def test_every_field_of_the_model_declares_its_rule() -> None:
    for cls in (*EVENT_TYPES.values(), Visibility, ErasedValue):
        for field in attrs.fields(cls):
            if field.init:
                assert isinstance(rule_of(field), Rule), (cls.__name__, field.name)
        assert tuple(slot.name for slot in fields_of(cls)) == _model_fields(cls)


def test_each_decoder_reads_every_rule_the_fast_decoders_read() -> None:
    """A field of any fast rule finds a type in ``plain`` and a check in ``fastpath``."""
    assert set(plain_module._TYPES) | {Rule.ONE_OF, Rule.VISIBILITY} == FAST_RULES
    assert set(fastpath_module._CHECKS) | {Rule.ONE_OF} == FAST_RULES


def _fast_fields(cls: type) -> set[str]:
    return {slot.name for slot in fields_of(cls) if slot.rule in FAST_RULES}


def test_plains_structs_name_exactly_the_models_fields() -> None:
    """Each struct has the model's fast fields as fields, the others as class attributes
    (refused in a line), and every kind the fast decoders read has its struct."""
    assert set(plain_module._MODEL.values()) == set(fast_kinds())
    for struct, model in plain_module._MODEL.items():
        assert set(struct.__struct_fields__) == _fast_fields(model), model
        for name in _model_fields(model):
            assert hasattr(struct, name), (model, name)
        assert struct.__struct_config__.tag == model.TYPE
    visibility = plain_module._VISIBLE_LINE
    assert visibility.__struct_fields__ == _model_fields(Visibility)


def test_fastpaths_table_names_exactly_the_models_fields() -> None:
    assert {kind.model for kind in fastpath_module._FAST_FIELDS.values()} == set(fast_kinds())
    for tag, kind in fastpath_module._FAST_FIELDS.items():
        assert EVENT_TYPES[tag] is kind.model
        assert set(kind.checks) == _fast_fields(kind.model)
        required = {
            f.name for f in attrs.fields(kind.model) if f.init and f.default is attrs.NOTHING
        }
        assert required <= kind.required <= set(kind.checks)
    assert set(fastpath_module._VISIBILITY) == set(_model_fields(Visibility))


def test_the_strict_paths_tables_name_exactly_the_models_fields() -> None:
    for cls in EVENT_TYPES.values():
        fields = _model_fields(cls)
        names = events_module._NAME_FIELDS[cls]
        assert names == tuple(
            n for n in fields if rule_of(attrs.fields_dict(cls)[n]) in (Rule.ID, Rule.NAME)
        )
        stamps = events_module._TIMESTAMP_FIELDS[cls]
        strings = events_module._STRING_FIELDS[cls]
        assert set(strings) | set(stamps) | set(named(cls, Rule.COUNT)) == set(fields)
        assert not set(strings) & set(stamps)
    assert events_module._STRING_FIELDS[Visibility] == _model_fields(Visibility)
    assert schema_module.LISTED == ("roles", "actors")


def test_the_kinds_left_to_the_strict_path_are_those_of_issue_30() -> None:
    """Erase and migrate require a field only the strict path reads; every other kind is
    read by the fast decoders."""
    strict_only = {cls.TYPE for cls in EVENT_TYPES.values()} - {m.TYPE for m in fast_kinds()}
    assert strict_only == {"erase", "migrate"}


# -- the encoders ----------------------------------------------------------------------------

#: (separators, ensure_ascii) of each writer; an ``ensure_ascii`` writer escapes every
#: character past ASCII (one past the BMP as a surrogate pair).
ENCODINGS: dict[str, tuple[tuple[str, str], bool]] = {
    "dumps_defaults": ((", ", ": "), True),
    "compact_ascii": ((",", ":"), True),
    "compact_utf8": ((",", ":"), False),
    "dumps_utf8": ((", ", ": "), False),
}
#: Text added to free strings: a BMP letter, the euro sign, a character past the BMP (a
#: surrogate pair once escaped), a quote and a backslash (escaped by every writer).
ACCENTS = ("", "é", "€", "\U0001f600", '"\\', "日本")


class _Pairs(list):  # type: ignore[type-arg]
    """A decoded object kept as its written pairs (repeated keys included)."""


class _Raw(str):
    """A JSON token kept as written (a float, a long integer, NaN, a broken string)."""


def _dump(item: Any, encoding: str, order: random.Random | None) -> str:
    (comma, colon), ascii_only = ENCODINGS[encoding]
    if isinstance(item, (_Pairs, dict)):
        pairs = list(item) if isinstance(item, _Pairs) else list(item.items())
        if order is not None:
            order.shuffle(pairs)
        return "{" + comma.join(
            json.dumps(k, ensure_ascii=ascii_only) + colon + _dump(v, encoding, order)
            for k, v in pairs
        ) + "}"  # fmt: skip
    if isinstance(item, list):
        return "[" + comma.join(_dump(v, encoding, order) for v in item) + "]"
    if isinstance(item, _Raw):
        return str(item)
    return json.dumps(item, ensure_ascii=ascii_only)


def _rewrite(row: str, encoding: str, order: random.Random | None) -> str:
    """A row re-encoded with all it holds kept; a row that is not JSON stays as it is."""
    try:
        value = json.loads(
            row, object_pairs_hook=_Pairs, parse_float=_Raw, parse_int=_Raw, parse_constant=_Raw
        )
    except ValueError:
        return row
    return _dump(value, encoding, order)


@st.composite
def _writers(draw: st.DrawFn) -> tuple[str, random.Random | None, str]:
    """An encoding, a key order (as written, or shuffled) and a line end."""
    encoding = draw(st.sampled_from(sorted(ENCODINGS)))
    order = draw(st.none() | st.randoms(use_true_random=False))
    return encoding, order, draw(st.sampled_from(("\n", "\r\n")))


def _text(rows: list[str], end: str) -> list[str]:
    return (end.join(rows) + end).split("\n")


def _outcome(lines: list[str], policy: Policy, monkeypatch: Any, *, strict: bool) -> Any:
    """The events, their canonical bytes and the log's heads; or the first error's class,
    message, line and field. ``strict``: the strict path alone (the fast ways never accept)."""
    with monkeypatch.context() as patch:
        if strict:
            patch.setattr(events_module, "plain_line", lambda line, policy, **_: None)
            patch.setattr(events_module, "fast_line", lambda line, policy: None)
            patch.setattr(events_module, "fast_event", lambda obj, policy: None)
        try:
            parsed = parse_events(lines, policy=policy, source="t.jsonl")
        except InputError as exc:
            return (type(exc), exc.message, exc.line, exc.field)
    return (
        [(event, canonical_event(event).encode("utf-8")) for event in parsed],
        getattr(parsed, "heads", None),
    )


def _accented(draw: st.DrawFn, line: dict[str, Any]) -> dict[str, Any]:
    """A line with non-ASCII (and escaped) text added to its free strings, still valid (a
    committed or derived value keeps its text: its commitment or derivation covers it)."""
    line = dict(line)
    if any(name in line for name in ("salt", "commitment", "derivation", "erased")):
        return line
    for name in ("value", "content", "reason"):
        if isinstance(line.get(name), str):
            line[name] += draw(st.sampled_from(ACCENTS))
    return line


# -- valid logs --------------------------------------------------------------------------------


@_SETTINGS
@given(data=st.data(), erasure=st.sampled_from((False, False, True)))
def test_a_valid_log_reads_alike_in_every_encoding(
    data: Any, erasure: bool, monkeypatch: Any
) -> None:
    log_ = data.draw(logs(max_size=10, erasure=erasure), label="log")
    encoding, order, end = data.draw(_writers(), label="writer")
    rows = [_dump(_accented(data.draw, line), encoding, order) for line in log_.lines]
    lines = _text(rows, end)
    fast = _outcome(lines, log_.policy, monkeypatch, strict=False)
    assert isinstance(fast, tuple) and isinstance(fast[0], list), fast  # it parses
    assert fast == _outcome(lines, log_.policy, monkeypatch, strict=True)
    # the fast ways are no no-op: a line of a kind they read, with no field they leave to
    # the strict path (a digest of issue 30), is theirs, to the same event and bytes
    for row, (event, data_) in zip(rows, fast[0], strict=True):
        if (
            type(event) in fast_kinds()
            and not any(getattr(event, n) is not None for n in named(type(event), Rule.DIGEST))
            and "\\u003" not in row
            and (getattr(event, "key", None) or "k").isprintable()
        ):
            taken = fastpath_module.fast_line(row, log_.policy)
            assert taken is not None, row
            assert (taken[0], taken[2]) == (event, data_)


# -- malformed logs: one field broken against its own rule ------------------------------------

#: Values each rule refuses (a JSON token kept as written where json.dumps cannot write it).
BAD: dict[Rule, tuple[Any, ...]] = {
    Rule.ID: ("", 1, None, "a\u200b", "a\x00", "a\u00a0", "a\x85", ["x"]),
    Rule.NAME: ("", 2, None, "n\u2028", "n\x1f", "n\u00a0", "n\ufeff", "n\u200b", True),
    Rule.SCOPE: ("a//b", "/a", "", "a b", 3),
    Rule.STAMP: ("2026-02-30T09:00:00Z", "2026-03-01T09:00:60Z", "2026-03-01 09:00", 17, ""),
    Rule.VALUE: (_Raw("1.5"), _Raw("9007199254740992"), None, ["v"], {"v": 1}, _Raw("NaN")),
    Rule.TEXT: (1, None, ["t"], _Raw('"\\ud800"')),
    Rule.LEVEL: ("no-such-level", 4, None),
    Rule.ONE_OF: ("no-such-choice", 5, None),
    Rule.IDS: ("F1", [""], [1], None),
    Rule.NAMES: ([], [""], "r", [1], ["r\u200b"]),
    Rule.VISIBILITY: ([], "public", {"roles": []}, {"colour": "red"}, None),
    Rule.DERIVATION: ("{", 6, "1 +"),
    Rule.DIGEST: ("0" * 63, "G" * 64, 7),
    Rule.COUNT: (-1, _Raw("1.5"), "3"),
    Rule.ERASED: ([], "F1", [{"fact": "F1"}]),
}


def _break(draw: st.DrawFn, line: dict[str, Any]) -> dict[str, Any] | _Pairs:
    """``line`` broken in one place: a field set to a value its rule refuses, a required
    field left out, an unknown field, or a key written twice."""
    line = dict(line)
    cls = EVENT_TYPES[line["type"]]
    how = draw(st.sampled_from(("rule", "rule", "rule", "missing", "unknown", "repeat")))
    if how == "rule":
        slot = draw(st.sampled_from(fields_of(cls)))
        line[slot.name] = draw(st.sampled_from(BAD[slot.rule]))
    elif how == "missing":
        required = [slot.name for slot in fields_of(cls) if slot.required] or ["id"]
        line.pop(draw(st.sampled_from(required)), None)
    elif how == "unknown":
        line[draw(st.sampled_from(("colour", "_canonical", "Type")))] = "x"
    else:
        pairs = _Pairs(line.items())
        key, value = draw(st.sampled_from(list(pairs)))
        pairs.insert(
            draw(st.integers(0, len(pairs))), (key, draw(st.sampled_from((value, None, "x"))))
        )
        return pairs
    return line


@st.composite
def _broken_logs(draw: st.DrawFn) -> tuple[list[dict[str, Any] | _Pairs], Policy]:
    """A valid log with one to three of its lines broken (``_break``): whichever comes
    first, every way in must raise it."""
    log_ = draw(logs(min_size=1, max_size=6, erasure=draw(st.booleans())))
    lines: list[dict[str, Any] | _Pairs] = [dict(line) for line in log_.lines]
    for _ in range(draw(st.integers(1, 3))):
        position = draw(st.integers(0, len(lines) - 1))
        line = lines[position]
        if isinstance(line, dict):
            lines[position] = _break(draw, line)
    return lines, log_.policy


@_SETTINGS
@given(broken=_broken_logs(), writer=_writers())
def test_a_field_broken_against_its_rule_fails_alike_in_every_encoding(
    broken: Any, writer: Any, monkeypatch: Any
) -> None:
    lines_, policy = broken
    encoding, order, end = writer
    lines = _text([_dump(line, encoding, order) for line in lines_], end)
    fast = _outcome(lines, policy, monkeypatch, strict=False)
    assert fast == _outcome(lines, policy, monkeypatch, strict=True)


@_SETTINGS
@given(malformed=malformed_logs(), writer=_writers())
def test_a_malformed_log_fails_alike_in_every_encoding(
    malformed: Any, writer: Any, monkeypatch: Any
) -> None:
    encoding, order, end = writer
    lines = _text([_rewrite(row, encoding, order) for row in malformed.rows], end)
    fast = _outcome(lines, malformed.policy, monkeypatch, strict=False)
    assert not isinstance(fast[0], list)
    assert fast == _outcome(lines, malformed.policy, monkeypatch, strict=True)


#: A valid line of each kind the fast decoders read (after ``FIRST``, which asserts F1), every
#: field written but a derivation.
FIRST = {"id": "e1", "ts": "2026-03-01T09:00:00Z", "actor": "w", "tenant": "t", "type": "assert",
         "fact": "F1", "key": "k", "value": 1}  # fmt: skip
_AT = {"id": "e2", "ts": "2026-03-01T09:00:01Z", "actor": "w", "tenant": "t"}
TEMPLATES: dict[str, dict[str, Any]] = {
    "assert": {**_AT, "type": "assert", "fact": "F2", "key": "k", "value": "v", "scope": "a/b",
               "status": "draft", "authority": "peer", "kind": "fact", "priority": "soft",
               "visibility": {"roles": ["r"], "actors": ["a"], "clearance": "internal"},
               "valid_from": "2026-03-01T09:00:00Z", "valid_until": "2026-03-02T09:00:00Z",
               "depends_on": ["F1"], "supersedes": ["F1"], "subject": "s"},
    "retract": {**_AT, "type": "retract", "fact": "F1", "authority": "peer", "reason": "r"},
    "promote": {**_AT, "type": "promote", "fact": "F1", "authority": "peer"},
    "grant": {**_AT, "type": "grant", "fact": "F1", "role": "r", "authority": "peer"},
    "revoke": {**_AT, "type": "revoke", "key": "k", "to_actor": "a", "authority": "peer"},
    "experience": {**_AT, "type": "experience", "experience": "X1", "content": "c",
                   "uses": ["F1"], "applicability": "adaptable"},
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(TEMPLATES))
def test_every_field_broken_against_its_rule_fails_alike(kind: str, monkeypatch: Any) -> None:
    """Each field of a kind, set to each value its rule refuses, in each encoding: every way
    in raises the strict path's first error (the property above, exhaustively on one line)."""
    assert {t["type"] for t in TEMPLATES.values()} == {m.TYPE for m in fast_kinds()}
    template = TEMPLATES[kind]
    assert set(template) - {"type"} <= set(_fast_fields(EVENT_TYPES[kind]))
    first = [_dump(FIRST, "compact_ascii", None)]
    assert isinstance(
        _outcome(
            [*first, _dump(template, "compact_ascii", None)], Policy(), monkeypatch, strict=False
        )[0],
        list,
    )
    for slot in fields_of(EVENT_TYPES[kind]):
        for bad in BAD[slot.rule]:
            for encoding in ENCODINGS:
                lines = [*first, _dump({**template, slot.name: bad}, encoding, None)]
                fast = _outcome(lines, Policy(), monkeypatch, strict=False)
                assert fast == _outcome(lines, Policy(), monkeypatch, strict=True), (slot, bad)


# -- the comparison sees a rule broken in one decoder only -------------------------------------

RETRACT = (
    '{"id": "e1", "ts": "2026-03-01T09:00:00Z", "actor": "w", "tenant": "t", "type": "retract",'
    ' "fact": %s, "reason": %s}'
)


def _loosened(kind: str, field: str, rule: Rule) -> Any:
    """``kind``'s slots with ``field`` held to another rule."""
    return tuple(
        attrs.evolve(slot, rule=rule) if slot.name == field else slot
        for slot in fast_kinds()[EVENT_TYPES[kind]]
    )


def test_a_rule_broken_in_plain_alone_is_seen(monkeypatch: Any) -> None:
    """A retract's ``fact`` (rule ID: non-empty) held by plain's struct to TEXT (any string):
    the comparison tells plain's outcome from the strict path's."""
    lines = [RETRACT % ('""', '"r"')]
    same = _outcome(lines, Policy(), monkeypatch, strict=False)
    assert same == _outcome(lines, Policy(), monkeypatch, strict=True)
    assert not isinstance(same[0], list) and same[3] == "fact"
    retract = next(s for s, m in plain_module._MODEL.items() if m.TYPE == "retract")
    loose = plain_module._struct(
        EVENT_TYPES["retract"], plain_module._PlainLine, _loosened("retract", "fact", Rule.TEXT),
        tag="retract",
    )  # fmt: skip
    doors = {(loose if s is retract else s): door for s, door in plain_module._DOORS.items()}
    with monkeypatch.context() as patch:
        patch.setattr(plain_module, "_DOORS", doors)
        decode = msgspec.json.Decoder(Union[tuple(doors)]).decode  # noqa: UP007
        patch.setattr(plain_module, "_decode_plain", decode)
        broken = _outcome(lines, Policy(), monkeypatch, strict=False)
    assert broken != same  # another error, or none


def test_a_rule_broken_in_fastpath_alone_is_seen(monkeypatch: Any) -> None:
    """A retract's ``reason`` (rule TEXT) let through as any value by ``fast_event``, the
    fast structuring of a decoded object (what the strict path's decoder hands it): the
    comparison tells the outcomes apart."""
    lines = [RETRACT % ('"F1"', "5")]
    same = _outcome(lines, Policy(), monkeypatch, strict=False)
    assert same == _outcome(lines, Policy(), monkeypatch, strict=True)
    assert not isinstance(same[0], list) and same[3] == "reason"
    kinds = dict(fastpath_module._FAST_FIELDS)
    kinds["retract"] = attrs.evolve(
        kinds["retract"], checks={**kinds["retract"].checks, "reason": lambda value: value}
    )
    with monkeypatch.context() as patch:
        patch.setattr(fastpath_module, "_FAST_FIELDS", kinds)
        broken = _outcome(lines, Policy(), monkeypatch, strict=False)
    assert broken != same  # another error, or none
