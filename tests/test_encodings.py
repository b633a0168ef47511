"""Every valid encoding of a log is read as the strict path alone reads it (issue 27).

A log is written as other writers write it: Python's ``json.dumps`` defaults, compact ASCII,
compact UTF-8, ``ensure_ascii`` escapes (surrogate pairs too), JSON whitespace of any kind,
any key order, CRLF line ends; with non-ASCII values and names. Read with every way in
(``plain``, ``fastpath``, strict) and with the strict path alone, it gives the same events,
the same canonical text and the same chain and tree heads; broken in one place, the same
first error (class, line, field, message). And the fast ways are no no-op: they take every
line of a valid log that they know (a line of issue 30's fields is the strict path's).
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import logs, malformed_logs

from gamma.core.reading import events as events_module
from gamma.core.reading.events import canonical_event, load_events, parse_events
from gamma.core.reading.fastpath import fast_line
from gamma.core.reading.plain import is_plain, plain_line
from gamma.core.terms.canonical import compact_json
from gamma.core.terms.errors import InputError
from gamma.core.terms.policy import Policy

_SETTINGS = settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)

#: (separators, ensure_ascii) of each writer; ``spaced`` is every kind of JSON whitespace.
ENCODINGS: dict[str, tuple[tuple[str, str], bool]] = {
    "dumps_defaults": ((", ", ": "), True),
    "compact_ascii": ((",", ":"), True),
    "compact_utf8": ((",", ":"), False),
    "dumps_utf8": ((", ", ": "), False),
    "spaced": (("\t, ", " \r:\t"), False),
}
#: Suffixes of a key: printable non-ASCII (a surrogate pair once escaped), and a no-break
#: space, which is no printable character and yet no refused one (the strict path looks twice).
KEY_SUFFIXES = ("", "é", "日本", "\U0001f600", "\u00a0")
#: Fields of issue 30 (committed and erased values) and its event types: the strict path's.
ISSUE_30 = ("salt", "commitment", "subject", "erased", "from_head")


class _Pairs(list):  # type: ignore[type-arg]
    """A decoded object kept as its written pairs (duplicates included)."""


class _Raw(str):
    """A number or constant kept as written."""


def _dump(
    item: Any, separators: tuple[str, str], ensure_ascii: bool, shuffle: random.Random | None
) -> str:
    """``item`` written with these separators and escapes, keys shuffled (nested too)."""
    comma, colon = separators
    if isinstance(item, (_Pairs, dict)):
        pairs = list(item) if isinstance(item, _Pairs) else list(item.items())
        if shuffle is not None:
            shuffle.shuffle(pairs)
        inner = comma.join(
            json.dumps(k, ensure_ascii=ensure_ascii)
            + colon
            + _dump(v, separators, ensure_ascii, shuffle)
            for k, v in pairs
        )
        return "{" + inner + "}"
    if isinstance(item, list):
        return "[" + comma.join(_dump(v, separators, ensure_ascii, shuffle) for v in item) + "]"
    if isinstance(item, _Raw):
        return str(item)
    return json.dumps(item, ensure_ascii=ensure_ascii)


def _rewrite(
    row: str, separators: tuple[str, str], ensure_ascii: bool, shuffle: random.Random | None
) -> str:
    """A written row re-encoded, everything it holds kept (repeated keys, floats, NaN, long
    integers, lone surrogates); a row that is not JSON stays as it is."""
    try:
        value = json.loads(
            row, object_pairs_hook=_Pairs, parse_float=_Raw, parse_int=_Raw, parse_constant=_Raw
        )
    except ValueError:
        return row
    return _dump(value, separators, ensure_ascii, shuffle)


@st.composite
def _writers(draw: st.DrawFn) -> tuple[str, random.Random | None, str]:
    """An encoding, a key order (as written, or shuffled) and a line end."""
    name = draw(st.sampled_from(sorted(ENCODINGS)))
    shuffle = draw(st.none() | st.randoms(use_true_random=False))
    return name, shuffle, draw(st.sampled_from(("\n", "\r\n")))


def _accented(draw: st.DrawFn, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``lines`` with any text added to their free strings and a suffix to every key (where
    no derivation names a key), still a valid log."""
    suffix = draw(st.sampled_from(KEY_SUFFIXES))
    if any("derivation" in line for line in lines):
        suffix = ""
    out = []
    for line in lines:
        line = dict(line)
        committed = any(name in line for name in ISSUE_30)
        for field in ("value", "content", "reason"):
            if isinstance(line.get(field), str) and not committed and "derivation" not in line:
                line[field] += draw(st.text(max_size=4))
        if isinstance(line.get("key"), str) and not committed:
            line["key"] += suffix
        out.append(line)
    return out


@attrs.frozen
class Read:
    """What a reader made of a log: each event with its canonical text, and the chain and
    tree heads of the whole log."""

    events: list[tuple[Any, str]]
    heads: Any


def _outcome(source: list[str] | str, policy: Policy, monkeypatch: Any, *, strict: bool) -> Any:
    """What the reader made of these lines (or of a file holding this text, read as bytes),
    or its error's class, line, field and message; ``strict``: the strict path alone."""
    with monkeypatch.context() as patch, tempfile.TemporaryDirectory() as folder:
        if strict:
            patch.setattr(events_module, "plain_line", lambda line, policy, **_: None)
            patch.setattr(events_module, "fast_line", lambda line, policy: None)
            patch.setattr(events_module, "fast_event", lambda obj, policy: None)
        try:
            if isinstance(source, str):
                path = Path(folder) / "t.jsonl"
                path.write_bytes(source.encode("utf-8"))
                parsed = load_events(path, policy=policy)
            else:
                parsed = parse_events(source, policy=policy, source="t.jsonl")
        except InputError as exc:
            return (type(exc), exc.line, exc.field, exc.message)
    return Read([(event, canonical_event(event)) for event in parsed], parsed.heads)


@_SETTINGS
@given(data=st.data(), erasure=st.sampled_from((False, False, False, True)))
def test_every_encoding_reads_as_the_strict_path_reads_it(
    data: Any, erasure: bool, monkeypatch: Any
) -> None:
    log_ = data.draw(logs(max_size=10, erasure=erasure), label="log")
    name, shuffle, end = data.draw(_writers(), label="writer")
    separators, ensure_ascii = ENCODINGS[name]
    lines = list(log_.lines)
    if data.draw(st.booleans(), label="accented"):
        lines = _accented(data.draw, lines)
    rows = [_dump(line, separators, ensure_ascii, shuffle) for line in lines]
    text = end.join(rows) + end
    fast = _outcome(text.split("\n"), log_.policy, monkeypatch, strict=False)
    assert isinstance(fast, Read), fast  # a valid log, however written, parses
    assert fast == _outcome(text.split("\n"), log_.policy, monkeypatch, strict=True)
    assert fast == _outcome(text, log_.policy, monkeypatch, strict=False)  # bytes lines
    assert fast == _outcome(text, log_.policy, monkeypatch, strict=True)
    # and the fast ways took every line they know, to the same event and text
    for row, (event, canonical) in zip(rows, fast.events, strict=True):
        if any(f'"{field}"' in row for field in ISSUE_30) or "\\u003" in row:
            continue  # the strict path's, by design
        if not (getattr(event, "key", None) or "k").isprintable():
            continue  # a no-break space: the strict path's too
        taken = fast_line(row + end[:-1], log_.policy)
        assert taken is not None, row
        assert taken == (event, canonical, canonical.encode("utf-8"))
        assert canonical == compact_json(json.loads(row))
        plain = plain_line(row.encode("utf-8"), log_.policy)
        assert (plain is not None) == is_plain(row), row
        assert plain is None or plain == (event, taken[2])


@_SETTINGS
@given(malformed=malformed_logs(), writer=_writers())
def test_a_malformed_log_fails_alike_in_every_encoding(
    malformed: Any, writer: Any, monkeypatch: Any
) -> None:
    name, shuffle, end = writer
    separators, ensure_ascii = ENCODINGS[name]
    rows = [_rewrite(row, separators, ensure_ascii, shuffle) for row in malformed.rows]
    lines = (end.join(rows) + end).split("\n")
    fast = _outcome(lines, malformed.policy, monkeypatch, strict=False)
    assert not isinstance(fast, Read)
    assert fast == _outcome(lines, malformed.policy, monkeypatch, strict=True)


def _breaks() -> st.SearchStrategy[tuple[str, Any]]:
    """One way to break a line (applied to its pairs), with what it needs."""
    names = st.sampled_from(("id", "actor", "tenant", "fact", "key", "experience", "role", "scope"))
    bad_chars = st.sampled_from(
        ("\x00", "\x1f", "\t", "\x7f", "\x85", "\u200b", "\u2028", "\u202e", "\ufeff", "\U000e0041")
    )
    return st.one_of(
        st.tuples(st.just("repeat"), st.sampled_from((None, "x", 1))),
        st.tuples(st.just("float"), st.sampled_from(("1.5", "1E2", "-0.0", "1e400", "NaN"))),
        st.tuples(st.just("big"), st.sampled_from(("9007199254740992", "-9007199254740992", "1" * 30))),
        st.tuples(st.just("surrogate"), st.sampled_from(("\\ud800", "\\udfff", "\\ud800\\ud800", "x\\udc00"))),
        st.tuples(st.just("name"), st.tuples(names, bad_chars, st.booleans())),
        st.tuples(st.just("unknown"), st.sampled_from((
            ("colour", "red"), ("subject", "s"), ("salt", "0" * 64), ("commitment", "f" * 64),
            ("_canonical", "{}"), ("scope", None), ("value", None), ("type", "assert"),
        ))),
    )  # fmt: skip


def _break(pairs: _Pairs, how: tuple[str, Any], rng: random.Random) -> _Pairs:
    kind, arg = how
    out = _Pairs(pairs)
    if kind == "repeat":  # a key written again, maybe with another value
        key, value = rng.choice(list(out))
        out.insert(rng.randrange(len(out) + 1), (key, value if arg is None else arg))
    elif kind in ("float", "big"):  # the value, or a field that is not one
        field = "value" if any(k == "value" for k, _ in out) else "from_size"
        out[:] = [(k, v) for k, v in out if k != field] + [(field, _Raw(arg))]
    elif kind == "surrogate":
        key = rng.choice([k for k, v in out if isinstance(v, str) and k != "type"] or ["id"])
        out[:] = [(k, _Raw(json.dumps(v)[:-1] + arg + '"') if k == key else v) for k, v in out]
    elif kind == "name":
        field, char, escaped = arg
        text = json.dumps(char) if escaped else json.dumps(char, ensure_ascii=False)
        if any(k == field for k, _ in out):
            out[:] = [
                (k, _Raw(json.dumps(v)[:-1] + text[1:]) if k == field and isinstance(v, str) else v)
                for k, v in out
            ]
        else:
            out.append((field, _Raw(text)))
    else:
        out.append(arg)
    return out


@_SETTINGS
@given(data=st.data())
def test_a_line_broken_in_one_place_fails_alike_in_every_encoding(
    data: Any, monkeypatch: Any
) -> None:
    """Repeated keys (nulls, the tag), floats, long integers, lone surrogates, control and
    format characters in names (escaped or raw), unknown fields and issue 30's fields."""
    log_ = data.draw(logs(min_size=1, max_size=6), label="log")
    name, shuffle, end = data.draw(_writers(), label="writer")
    separators, ensure_ascii = ENCODINGS[name]
    position = data.draw(st.integers(0, len(log_.lines) - 1), label="position")
    how = data.draw(_breaks(), label="break")
    rng = data.draw(st.randoms(use_true_random=False))
    rows = []
    for index, line in enumerate(log_.lines):
        pairs = _Pairs(line.items())
        if index == position:
            pairs = _break(pairs, how, rng)
        rows.append(_dump(pairs, separators, ensure_ascii, shuffle))
    lines = (end.join(rows) + end).split("\n")
    fast = _outcome(lines, log_.policy, monkeypatch, strict=False)
    assert fast == _outcome(lines, log_.policy, monkeypatch, strict=True)


BASE = '{"id":"e1","ts":"2026-03-01T09:00:00Z","actor":"w","tenant":"t","type":"assert","fact":"F1","key":"k","value":%s}'


@pytest.mark.parametrize(
    "line",
    [
        BASE % '"a:b"',  # the strings' own colons: as many in the canonical text
        BASE.replace('"key":"k"', '"key" :\t"k" ') % '"v"' + "\r",
        BASE.replace('"key":"k"', '"k\\u0065y":"\\u006b"') % '"\\ud83d\\ude00 \\u00e9"',
        BASE % '"\\u0000\\n\\"\\\\ \u20ac \u2028"',  # controls are values' business, not names'
        BASE % "-0",
    ],
)
def test_the_fast_way_takes_any_spelling_of_a_valid_line(line: str) -> None:
    (strict,) = parse_events([line])
    for written in (line, line.encode("utf-8")):
        taken = fast_line(written, Policy())
        assert taken is not None
        assert taken[0] == strict and taken[1] == canonical_event(strict)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        # a repeated key hidden from the colon count by a colon written as an escape
        (BASE % '"\\u003a\\u003a","value":"x"', "value"),
        (BASE % '"x","value":"\\u003a"', "value"),
        (BASE % '"x","value":"\\u003A"', "value"),
        (BASE % '"a:b:c","value":"x"', "value"),  # the dropped value's colons
        (BASE % '"x","key":"k:k"', "key"),
        (
            BASE.replace('"key":"k"', '"key":"k","visibility":{"roles":["r"],"roles":["r"]}') % "1",
            "visibility.roles",
        ),
        (BASE.replace('"key":"k"', '"key":"k\\u200b"') % "1", "key"),  # a format character
        (BASE.replace('"key":"k"', '"key":"k\u200b"') % "1", "key"),
        (BASE.replace('"actor":"w"', '"actor":"w\\u0085"') % "1", "actor"),  # a C1 control
        (BASE % '"\\ud800"', "value"),
        (BASE % '"\ud800"', "value"),  # a lone surrogate in a str handed in from Python
    ],
)
def test_the_fast_way_declines_and_the_strict_path_names_the_field(line: str, field: str) -> None:
    assert fast_line(line, Policy()) is None
    assert plain_line(line, Policy()) is None
    with pytest.raises(InputError) as info:
        parse_events([line], source="t.jsonl")
    assert (info.value.line, info.value.field) == (1, field)


def test_a_name_the_strict_path_looks_at_twice_is_its_own() -> None:
    """A no-break space is not printable, and not refused: the fast way leaves it to the
    strict path, which takes it."""
    line = BASE.replace('"key":"k"', '"key":"k\\u00a0"') % "1"
    assert fast_line(line, Policy()) is None
    (event,) = parse_events([line])
    assert event.key == "k\u00a0"
