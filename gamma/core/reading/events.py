"""The decoders behind ``gamma.core.reading.reader`` (the one way in), and the event log's writer.

Nothing but the reader calls the decoding functions here (``tests/test_reader.py`` greps
the package for it); the old names (``parse_events``, ``load_events``) stay for callers of
``gamma`` and for the tests. Validation is whole-input and names the culprit: the source,
the 1-based physical line and the dotted field. Each line comes in one of three ways
(``plain``, ``fastpath``, or the strict ``strictjson`` decoder and the converter), all
giving the same event or the same error; the log-level rules (``logcheck``) run once over
the whole input. The limits of SPEC §18 (a line's bytes, a string's bytes) are checked at
the door, and a file is read so that no line past the limit is ever held whole.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import attrs
import cattrs
import orjson

from gamma.core.integrity.chain import GENESIS, step_bytes
from gamma.core.integrity.commitment import chain_object, commit, is_hex_digest
from gamma.core.integrity.merkle import TreeBuilder, TreeHead
from gamma.core.reading.convert import check_keys, converter, first_failure
from gamma.core.reading.fastpath import CANONICAL_TS, SCOPE_SYNTAX, fast_event, fast_line
from gamma.core.reading.logcheck import LogIndex, check_events
from gamma.core.reading.parsed import (
    ParsedLog,  # the reader's mark: see gamma.core.reading.handbuilt
)
from gamma.core.reading.plain import is_plain, plain_line
from gamma.core.reading.schema import EVENT_FIELDS, LISTED, fields_of, named
from gamma.core.reading.stated import check_derivation
from gamma.core.reading.strictjson import decode_json
from gamma.core.terms.canonical import canonical_json, compact_json, format_ts, unsafe_character
from gamma.core.terms.errors import (
    ActorError,
    DuplicateIdError,
    InputError,
    JSONSyntaxError,
    LimitError,
    MissingFieldError,
    PolicyError,
    TimestampOrderError,
    UnknownFieldError,
    ValueTypeError,
)
from gamma.core.terms.limits import MAX_LINE_BYTES, MAX_STRING_BYTES
from gamma.core.terms.model import (
    EVENT_TYPES,
    Actor,
    Assert,
    Erase,
    ErasedValue,
    Event,
    Grant,
    Revoke,
    Rule,
    Visibility,
)
from gamma.core.terms.policy import DEFAULT_POLICY, Policy

__all__ = [
    "check_names",
    "event_from_json",
    "event_to_json",
    "canonical_event",
    "event_line",
    "parse_events",
    "parse_lines",
    "load_events",
    "load_for_resolution",
    "load_file",
    "load_bytes",
    "dump_events",
    "parse_actor",
    "normal_actor",
    "check_scope",
    "check_line",
    "check_strings",
    "check_derivation",
    "as_line",
    "batch_object",
    "batch_objects",
    "byte_lines",
    "decode_line",
    "decode_lines",
    "read_bounded",
    "unsafe_character",
    "with_canonical",
    "EMPTY_FILE",
]

#: Per event class, its names (ids and names, held to printable text), in the model's order:
#: the order the strict path checks them in, so the order its first error follows.
_NAME_FIELDS: dict[type[Event], tuple[str, ...]] = {
    cls: named(cls, Rule.ID, Rule.NAME) for cls in EVENT_TYPES.values()
}


# -- one event ---------------------------------------------------------------------------


def event_from_json(
    obj: Any,
    *,
    policy: Policy = DEFAULT_POLICY,
    source: str | None = None,
    line: int | None = None,
    strings_checked: bool = False,
) -> Event:
    """Structure one decoded event, checking fields, types, names and scope grammar, and its
    strings against the limit unless the caller does (``strings_checked``: it knows the size
    of the line the object came from)."""

    def fail(cls: type[InputError], message: str, field: str | None) -> InputError:
        return cls(message, source=source, line=line, field=field)

    if not isinstance(obj, dict):
        raise fail(JSONSyntaxError, "an event must be a JSON object", None)
    if "type" not in obj:
        raise fail(MissingFieldError, "missing required field", "type")
    kind = obj["type"]
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        known = ", ".join(sorted(EVENT_TYPES))
        raise fail(UnknownFieldError, f"unknown event type {kind!r} (known: {known})", "type")
    event = fast_event(obj, policy)
    if event is None:
        event = _strict_event(obj, cls, fail)
        _check_semantics(event, policy, fail)
        if isinstance(event, Assert):
            if event.derivation is not None:
                check_derivation(event, source=source, line=line)
            if event.salt is not None and event.commitment is None and event.value is not None:
                # every committed assert in memory carries its commitment (the log rules
                # and erasure read it)
                event = attrs.evolve(event, commitment=commit(event.salt, event.value))
    if not strings_checked and _may_be_long(obj):
        check_strings(event, source=source, line=line)
    return event


def _may_be_long(obj: dict[str, Any]) -> bool:
    """Whether a string of a decoded event may be past MAX_STRING_BYTES: its JSON (orjson, a
    tenth of the check's cost) is at least as long as any of its strings in UTF-8."""
    try:
        return len(orjson.dumps(obj)) > MAX_STRING_BYTES
    except TypeError:  # JSONEncodeError too (a lone surrogate, deep nesting): check them all
        return True


def _strict_event(obj: dict[str, Any], cls: type[Event], fail: Any) -> Event:
    """Structure through the converter: what the fast path is not sure of, with its errors."""
    body = {k: v for k, v in obj.items() if k != "type"}
    check_keys(body, cls, fail, prefix="")
    for slot in fields_of(cls):  # the rules the converter's hooks do not see, in field order
        if slot.rule is Rule.VALUE:
            _check_value_form(body, fail)
        elif slot.name not in body:
            continue
        elif slot.rule is Rule.ERASED:
            _check_erased_items(body[slot.name], fail)
        elif slot.rule is Rule.COUNT and (type(body[slot.name]) is not int or body[slot.name] < 0):
            raise fail(ValueTypeError, "expected an integer >= 0 (the old log's size)", slot.name)
        elif slot.rule is Rule.VISIBILITY and isinstance(body[slot.name], dict):
            check_keys(body[slot.name], Visibility, fail, prefix=f"{slot.name}.")
    try:
        event: Event = converter.structure(body, cls)
    except cattrs.BaseValidationError as exc:
        field, message = first_failure(exc)
        raise fail(ValueTypeError, message, field) from None
    except (TypeError, ValueError) as exc:
        raise fail(ValueTypeError, str(exc), None) from None
    return event


def _check_value_form(body: dict[str, Any], fail: Any) -> None:
    """An assert's value comes in one of three forms (SPEC §21): plaintext (``value``),
    committed (``value`` and ``salt``, maybe ``commitment``) or erased (``commitment`` alone).
    Checked before any field's type, where a missing ``value`` always was."""
    if "value" in body:
        if "commitment" in body and "salt" not in body:
            raise fail(MissingFieldError, "a committed value needs its salt (or leave out"
                       " 'value': an erased value keeps only its commitment)", "salt")
        return
    if "salt" in body:
        raise fail(MissingFieldError, "a salt needs the value it commits to", "value")
    if "commitment" not in body:
        raise fail(MissingFieldError, "missing required field", "value")


def _check_erased_items(items: Any, fail: Any) -> None:
    """``erased`` is a non-empty list of ``{"fact", "commitment"}`` objects."""
    if not isinstance(items, list) or not items:
        raise fail(ValueTypeError, "expected a non-empty list of {fact, commitment} objects",
                   "erased")
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise fail(ValueTypeError, "expected an object {fact, commitment}", f"erased[{index}]")
        check_keys(item, ErasedValue, fail, prefix=f"erased[{index}].")


def _check_commitment(event: Assert, fail: Any) -> None:
    """A commitment given with its value and salt is theirs (each is 64 hex digits)."""
    if (
        event.salt is not None
        and event.commitment is not None
        and event.value is not None
        and commit(event.salt, event.value) != event.commitment
    ):
        raise fail(ValueTypeError, "does not match the value and salt (SHA-256 of salt || value)",
                   "commitment")


def _check_erase(event: Erase, policy: Policy, fail: Any) -> None:
    """Each erased value named once by a valid fact id and a 64-hex commitment, and the
    writer holding the policy's erasure authority."""
    seen: set[str] = set()
    for index, item in enumerate(event.erased):
        _check_id_text(item.fact, fail, f"erased[{index}].fact")
        if not is_hex_digest(item.commitment):
            raise fail(ValueTypeError, "expected 64 lowercase hex digits",
                       f"erased[{index}].commitment")
        if item.fact in seen:
            raise fail(DuplicateIdError, f"fact {item.fact!r} is named twice in one erase",
                       f"erased[{index}].fact")
        seen.add(item.fact)
    if not policy.may_erase(event.actor):
        held = policy.authority_ladder[policy.writer_rank(event.actor)]
        needed = policy.authority_ladder[policy.erasure_rank()]
        raise fail(ValueTypeError, f"writer {event.actor!r} holds {held!r} authority; erasing"
                   f" needs {needed!r} (the policy's [erasure] authority)", "actor")


def check_strings(event: Event, *, source: str | None = None, line: int | None = None) -> None:
    """Refuse a string of ``event`` past MAX_STRING_BYTES (SPEC §18), naming its field."""
    for name in _STRING_FIELDS[type(event)]:
        value = getattr(event, name)
        if isinstance(value, Visibility):
            for inner in _STRING_FIELDS[Visibility]:
                _check_size(getattr(value, inner), f"{name}.{inner}", source, line)
        elif isinstance(value, tuple) and value and isinstance(value[0], ErasedValue):
            for index, item in enumerate(value):
                for inner in _STRING_FIELDS[ErasedValue]:
                    _check_size(getattr(item, inner), f"{name}[{index}].{inner}", source, line)
        else:
            _check_size(value, name, source, line)


#: Per class, the fields that hold strings (or tuples of them, a Visibility, erased values):
#: every rule but a timestamp's and a count's.
_STRING_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(slot.name for slot in slots if slot.rule not in (Rule.STAMP, Rule.COUNT))
    for cls, slots in EVENT_FIELDS.items()
}


def _check_size(value: object, field: str, source: str | None, line: int | None) -> None:
    if isinstance(value, tuple):
        for index, item in enumerate(value):
            _check_size(item, f"{field}[{index}]", source, line)
    elif isinstance(value, str) and len(value) * 4 > MAX_STRING_BYTES:
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > MAX_STRING_BYTES:
            raise LimitError(
                f"a string of {size} bytes: at most {MAX_STRING_BYTES}", source=source, line=line,
                field=field,
            )


def check_line(text: str | bytes, *, source: str | None, line: int) -> None:
    """Refuse a line past MAX_LINE_BYTES (SPEC §18) before anything decodes it."""
    size = len(text)
    if isinstance(text, str) and size * 4 > MAX_LINE_BYTES:
        size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_LINE_BYTES:
        raise LimitError(
            f"a line of more than {MAX_LINE_BYTES} bytes", source=source, line=line,
        )


#: Lines up to this length (characters or bytes) cannot break a limit: the check is skipped.
_SHORT = MAX_STRING_BYTES // 4


def _check_id_text(value: str, fail: Any, field: str) -> None:
    if value and value.isprintable():  # the common case, decided without a call
        return
    if not value:
        raise fail(ValueTypeError, "must be a non-empty string", field)
    bad = unsafe_character(value)
    if bad is not None:
        raise fail(
            ValueTypeError,
            f"{value!r} holds the control or invisible format character {bad}",
            field,
        )


def _check_semantics(event: Event, policy: Policy, fail: Any) -> None:
    for name in _NAME_FIELDS[type(event)]:
        value = getattr(event, name)
        if value is not None and isinstance(value, str):
            _check_id_text(value, fail, name)
    rules = _RULED[type(event)]
    for name in rules.scopes:
        scope = getattr(event, name)
        if scope is not None:
            _check_id_text(scope, fail, name)
    for outer in rules.visibilities:
        visibility = getattr(event, outer)
        if visibility is None:
            continue
        for list_name in LISTED:
            names = getattr(visibility, list_name)
            if names is None:
                continue
            if not names:
                raise fail(
                    ValueTypeError,
                    f"an empty list restricts nothing: leave the field out (no {outer!r}"
                    " means public)",
                    f"{outer}.{list_name}",
                )
            for index, item in enumerate(names):
                _check_id_text(item, fail, f"{outer}.{list_name}[{index}]")
    authority = getattr(event, "authority", None)
    if (
        authority is not None
        and policy.over_claim == "refuse"
        and policy.knows_authority(authority)
        and policy.over_claims(authority, event.actor)
    ):
        held = policy.authority_ladder[policy.writer_rank(event.actor)]
        raise fail(
            ValueTypeError,
            f"writer {event.actor!r} holds at most {held!r} authority; the event claims"
            f" {authority!r}",
            "authority",
        )
    unknown = unknown_level(event, policy)
    if unknown is not None:
        raise fail(ValueTypeError, unknown[1], unknown[0])
    for name in rules.digests:
        found = getattr(event, name)
        if found is not None and not is_hex_digest(found):
            raise fail(ValueTypeError, "expected 64 lowercase hex digits", name)
    if isinstance(event, Assert):
        _check_commitment(event, fail)
        for name in rules.scopes:
            scope = getattr(event, name)
            if scope is not None:
                _scope_or_fail(scope, fail, name)
        if (
            event.valid_from is not None
            and event.valid_until is not None
            and event.valid_until <= event.valid_from
        ):
            raise fail(TimestampOrderError, "valid_until must be after valid_from", "valid_until")
    if isinstance(event, (Grant, Revoke)):
        for one, other in event.PAIRS:
            if (getattr(event, one) is None) == (getattr(event, other) is None):
                cls = MissingFieldError if getattr(event, one) is None else ValueTypeError
                raise fail(cls, f"give exactly one of {one!r} and {other!r}", one)
    if isinstance(event, Erase):
        _check_erase(event, policy, fail)


@attrs.frozen
class _Ruled:
    """Per event class, the fields of the rules ``_check_semantics`` checks by name."""

    scopes: tuple[str, ...]
    visibilities: tuple[str, ...]
    digests: tuple[str, ...]


_RULED = {
    cls: _Ruled(named(cls, Rule.SCOPE), named(cls, Rule.VISIBILITY), named(cls, Rule.DIGEST))
    for cls in EVENT_TYPES.values()
}


def _scope_or_fail(scope: str, fail: Any, field: str) -> None:
    if scope != "global" and not SCOPE_SYNTAX.fullmatch(scope):
        raise fail(
            ValueTypeError,
            f"invalid scope {scope!r}: 'global' or '/'-separated segments of letters, digits, _.:-",
            field,
        )


def check_scope(scope: str) -> bool:
    """True when ``scope`` is ``global`` or a valid path of segments."""
    return scope == "global" or bool(SCOPE_SYNTAX.fullmatch(scope))


def event_to_json(event: Event) -> dict[str, Any]:
    """The event as written: its fields plus ``type``, unwritten optionals left out."""
    body: dict[str, Any] = converter.unstructure(event)
    body["type"] = event.TYPE
    return body


def batch_objects(
    batch: Iterable[str | Mapping[str, Any] | Event] | str, *, source: str | None
) -> Iterator[tuple[int, Any, bool]]:
    """The JSON objects of a batch given as JSON lines, objects or parsed events, numbered from
    1 (blank lines count and are skipped); the flag says the object was decoded from text."""
    if isinstance(batch, str):
        batch = batch.split("\n")
    for number, item in enumerate(batch, start=1):
        obj = batch_object(item, source=source, line=number)
        if obj is not None:
            yield number, obj, True


def batch_object(item: object, *, source: str | None, line: int) -> Any:
    """One item of a batch (a JSON line, an object or an Event) as its JSON object, held to
    the rules of a JSON line; None for a blank line."""
    if isinstance(item, (bytes, bytearray)) or not isinstance(item, (str, Mapping, Event)):
        raise _not_an_item(item, source, line)
    text = as_line(item, source=source, line=line)
    if len(text) > _SHORT:
        check_line(text, source=source, line=line)
    return decode_json(text, source=source, line=line) if text.strip() else None


def _not_an_item(item: object, source: str | None, line: int) -> InputError:
    return InputError(
        f"an event must be a JSON line, an object or an Event, not {type(item).__name__}",
        source=source, line=line,
    )


def as_line(item: str | bytes | Mapping[str, Any] | Event, *, source: str | None, line: int) -> str:
    """An item of a batch as a JSON line: a line as it is (bytes must be UTF-8), an object or
    an Event handed in from Python written out, so that it is held to the rules of a JSON
    line (an integer past 2^53, a float, NaN, a lone surrogate, a value JSON has no form for
    is the same input error, naming the field, whichever way the event arrived)."""
    if isinstance(item, str):
        return item
    if isinstance(item, (bytes, bytearray)):
        try:
            return bytes(item).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONSyntaxError(
                f"not UTF-8: {exc.reason} at byte {exc.start}", source=source, line=line
            ) from None
    if not isinstance(item, (Mapping, Event)):
        raise _not_an_item(item, source, line)
    obj = dict(item) if isinstance(item, Mapping) else event_to_json(item)
    try:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"))  # \u-escaped: surrogates show
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueTypeError(f"not a JSON event ({exc})", source=source, line=line) from None


def canonical_event(event: Event) -> str:
    """The canonical JSON text of an event, the bytes the hash chain and the Merkle leaf cover:
    for a committed assert its chain form (``commitment`` in place of ``value`` and ``salt``,
    SPEC §21), so erasing the value changes none of them."""
    cached = event._canonical
    if cached is not None:
        return cached
    obj = event_to_json(event)
    if isinstance(event, Assert) and event.salt is not None:
        obj = chain_object(obj)
    return canonical_json(obj)


def event_line(event: Event) -> str:
    """The event as a JSONL line (export, ``dump_events``): its chain bytes plus ``value`` and
    ``salt`` while the value is there (SPEC §21), so a reader recomputes and checks the
    commitment; every other event (plaintext, erased) is its chain bytes."""
    if not isinstance(event, Assert) or event.salt is None or event.value is None:
        return canonical_event(event)
    obj = event_to_json(event)
    obj["commitment"] = commit(event.salt, event.value)
    return canonical_json(obj)


#: Per event class, its timestamps.
_TIMESTAMP_FIELDS: dict[type[Event], tuple[str, ...]] = {
    cls: named(cls, Rule.STAMP) for cls in EVENT_TYPES.values()
}


def with_canonical(event: Event, obj: dict[str, Any]) -> Event:
    """Keep the canonical text of a just-parsed event: its decoded object with UTC timestamps.

    Equal to ``canonical_json(event_to_json(event))`` (a property test checks it),
    at a fraction of the cost, since the object is already plain JSON.
    """
    body = dict(obj)
    for name in _TIMESTAMP_FIELDS[type(event)]:
        if name in body and not CANONICAL_TS.fullmatch(body[name]):
            body[name] = format_ts(getattr(event, name))
    if "salt" in body:  # a committed assert: its chain form (SPEC §21)
        body = chain_object(body)
    return event.keep_canonical(compact_json(body))


# -- the log -----------------------------------------------------------------------------


def parse_events(
    lines: Iterable[str],
    *,
    policy: Policy = DEFAULT_POLICY,
    index: LogIndex | None = None,
    source: str | None = None,
) -> tuple[Event, ...]:
    """Parse and validate JSON Lines text (blank lines skipped) into events (the decoder
    behind ``gamma.core.reading.reader.read_lines``)."""
    return parse_lines(lines, policy=policy, index=index, source=source)


_PLAIN_CHUNK = 4096  # lines joined for one scan: bounded copies, few calls


def _all_plain(lines: Sequence[str | bytes]) -> bool:
    """Whether every line of a list is plain, scanned a chunk at a time: a few scans in C per
    4,096 lines instead of three calls per line (a tenth of the parse at 100k events), and no
    copy of the whole input. Plainness is a property of each character, so a chunk is plain
    exactly when each of its lines is."""
    for start in range(0, len(lines), _PLAIN_CHUNK):
        try:
            joined = "".join(lines[start : start + _PLAIN_CHUNK])  # type: ignore[arg-type]
        except TypeError:  # not all text (bytes, off the type): each line is scanned alone
            return False
        if not is_plain(joined):
            return False
    return True


def decode_line(
    text: str | bytes, policy: Policy, *, source: str | None, line: int,
    known_plain: bool = False, keep_text: bool = True, tried: bool = False,
) -> tuple[Event, bytes] | None:
    """One JSON line as an event and its canonical text as UTF-8 bytes (what the chain and
    the tree hash), or None for a blank line: decoded once, by ``plain`` for a plain line,
    else ``fastpath``, else the strict decoder and the converter, which name line and field
    (the three give the same event, bytes and first error: ``tests/test_schema.py``). The
    event keeps its canonical text unless ``keep_text`` is False. A caller that has had
    ``plain_line`` decline the line already says so (``tried``)."""
    long = len(text) > _SHORT
    if long:
        check_line(text, source=source, line=line)
    plain = None if tried else plain_line(text, policy, known_plain=known_plain)
    if plain is not None:
        event, data = plain
        if keep_text:
            event.keep_canonical(data.decode("ascii"))
    elif (fast := fast_line(text, policy)) is not None:
        event, canonical, data = fast
        if keep_text:
            event.keep_canonical(canonical)
    else:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if not text.strip():
            return None
        obj = decode_json(text, source=source, line=line)
        event = with_canonical(event_from_json(obj, policy=policy, source=source,
                                               line=line, strings_checked=True), obj)
        data = canonical_event(event).encode("utf-8")
        if not keep_text:
            event.keep_canonical(None)
    if long:
        check_strings(event, source=source, line=line)
    return event, data


def parse_lines(
    lines: Iterable[str | bytes],
    *,
    policy: Policy,
    index: LogIndex | None,
    source: str | None,
    plain_input: bool | None = None,
    resolve_at: datetime | None = None,
    numbers: Sequence[int] | None = None,
) -> tuple[Event, ...]:
    """Each line decoded once (``plain`` for a plain line, else ``fastpath``; the strict path
    for what neither is sure of), then the whole log validated. ``bytes`` lines are known to
    be UTF-8 (the reader checked), and with ``plain_input`` to be plain as a whole (None: a
    list or tuple of lines is scanned for it). Lines are numbered from 1, or by ``numbers``
    (a log's part, whose lines keep the numbers they had in the whole log).

    A whole log (no ``index``, no ``numbers``) is hashed as it is read, from the canonical
    bytes at hand: its chain head and tree head ride on the ParsedLog, so that Γ over all of
    it need not hash every event again to record them and to check a head it is given. A log
    read for one resolution (``resolve_at``) also records the heads of the prefix heard by
    then (``ParsedLog.heads_of``: Γ asks for them by that prefix's size), and its events keep
    no canonical text."""
    if plain_input is None:
        plain_input = isinstance(lines, list | tuple) and _all_plain(lines)
    events: list[Event] = []
    append = events.append
    lines_of: list[int | None] | None = None  # each event's line, once a blank line shifts them
    chain = GENESIS
    tree = TreeBuilder()
    add_leaf = tree.add
    hashing = index is None and numbers is None
    keep_text = resolve_at is None
    cut: tuple[int, tuple[str, TreeHead]] | None = None  # the heads of the prefix heard by then
    numbered: Iterable[tuple[int, str | bytes]] = (
        enumerate(lines, start=1) if numbers is None else zip(numbers, lines, strict=True)
    )
    if numbers is not None:
        lines_of = []
    for number, text in numbered:
        # a short line (no limit to check) tried as plain here, the first rung of
        # ``decode_line``'s ladder; the rest, and a line plain declines, by ``decode_line``
        short = len(text) <= _SHORT
        found = plain_line(text, policy, known_plain=plain_input) if short else None
        if found is not None:
            event, data = found
            if keep_text:
                event.keep_canonical(data.decode("ascii"))
        else:
            found = decode_line(text, policy, source=source, line=number, known_plain=plain_input,
                                keep_text=keep_text, tried=short)  # fmt: skip
            if found is None:  # a blank line: it counts, and the lines are numbered from now on
                if lines_of is None:
                    lines_of = list(range(1, len(events) + 1))
                continue
            event, data = found
        if resolve_at is not None and cut is None and event.ts > resolve_at:
            cut = (len(events), (chain.hex(), tree.head()))  # before this event is hashed
        append(event)
        if lines_of is not None:
            lines_of.append(number)
        if hashing:
            chain = step_bytes(chain, data)
            add_leaf(data)
    erases = check_events(events, lines_of, index=index, source=source)
    if index is not None:
        return tuple(events)  # with an index: not a whole log
    log = ParsedLog(events)
    log.found_erases = erases
    del events  # the list (the tuple holds its events), before the heads are built
    if hashing:
        log.heads = (chain.hex(), tree.head())
        if cut is not None:
            log.record(cut[0], cut[1])
    return log


EMPTY_FILE = "the file is empty (zero bytes): neither a store nor an event log"


def load_events(path: str | Path, *, policy: Policy = DEFAULT_POLICY) -> tuple[Event, ...]:
    """Read and validate a JSONL event log file (``gamma.core.reading.reader.read`` of a path)."""
    return load_file(path, policy=policy)


def load_for_resolution(
    path: str | Path, at: datetime, *, policy: Policy = DEFAULT_POLICY
) -> tuple[Event, ...]:
    """``load_events`` for one resolution at ``at`` (``gamma.core.reading.reader.read(path, at=at)``):
    the log also records the heads of the prefix heard by ``at``, so Γ hashes nothing, and its
    events keep no canonical text (a fifth of a large log's memory; ``canonical_event`` would
    re-serialise one)."""
    return load_file(path, policy=policy, resolve_at=at)


def load_file(
    path: str | Path,
    *,
    policy: Policy,
    resolve_at: datetime | None = None,
    source: str | None = None,
) -> tuple[Event, ...]:
    """A JSONL log file read whole (no line held past the limit) and decoded."""
    label = source or str(path)
    try:
        with Path(path).open("rb") as stream:
            data = read_bounded(stream, source=label)
    except OSError as exc:
        raise InputError(f"cannot read log: {exc.strerror}", source=label) from None
    return load_bytes(data, policy=policy, source=label, resolve_at=resolve_at)


def load_bytes(
    data: bytes, *, policy: Policy, source: str | None, resolve_at: datetime | None = None
) -> tuple[Event, ...]:
    """A log file's bytes, known to be UTF-8 (``read_bounded`` checked), decoded."""
    if not data:
        raise InputError(EMPTY_FILE, source=source)
    return parse_lines(
        byte_lines(data), policy=policy, index=None, source=source, plain_input=is_plain(data),
        resolve_at=resolve_at,
    )  # fmt: skip


def read_bounded(stream: IO[bytes], *, source: str | None = None) -> bytes:
    """All of a log's bytes, read so that no line is held past MAX_LINE_BYTES + 1 bytes (an
    endless line, ``/dev/zero``, fails after that many) and checked as UTF-8 as they come (a
    stream of random bytes fails at its first line not UTF-8, as a file of them does).

    Each read takes at most what the current line may still hold plus one byte, so every line
    read whole is within the limit and the limit is seen the moment a line passes it.
    """
    chunks: list[bytes] = []
    pending = 0  # bytes of the current, unfinished line read so far
    utf8 = codecs.getincrementaldecoder("utf-8")()
    while True:
        chunk = stream.read(MAX_LINE_BYTES + 1 - pending)
        if not chunk:
            break
        chunks.append(chunk)
        if not chunk.isascii() or utf8.getstate()[0]:
            try:
                utf8.decode(chunk)
            except UnicodeDecodeError as exc:
                decode_lines(b"".join(chunks), source=source)  # raises, naming the line
                raise JSONSyntaxError(f"not UTF-8: {exc.reason}", source=source) from None
        cut = chunk.rfind(b"\n")
        pending = pending + len(chunk) if cut < 0 else len(chunk) - cut - 1
        if pending > MAX_LINE_BYTES:
            line = 1 + sum(part.count(b"\n") for part in chunks)
            raise LimitError(
                f"a line of more than {MAX_LINE_BYTES} bytes", source=source, line=line
            )
    data = b"".join(chunks)
    del chunks
    if utf8.getstate()[0]:  # the file ends inside a character
        decode_lines(data, source=source)
    return data


#: Bytes of a log split into lines at once: a list of a few thousand lines at a time.
_SPLIT_BYTES = 1 << 20


def byte_lines(data: bytes) -> Iterator[bytes]:
    """The physical lines of ``data``, as ``data.split(b"\\n")`` gives them, split a megabyte
    at a time (no list of a million lines at once; one split in C per few thousand lines
    rather than a find and a slice per line)."""
    start, find = 0, data.find
    while True:
        end = find(b"\n", start + _SPLIT_BYTES)
        if end < 0:
            yield from data[start:].split(b"\n")
            return
        yield from data[start:end].split(b"\n")
        start = end + 1


def decode_lines(data: bytes, *, source: str | None = None) -> list[str]:
    """Split bytes into physical lines and decode each as UTF-8, naming the line that is not."""
    try:
        return data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        pass
    lines = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise JSONSyntaxError(
                f"not UTF-8: {exc.reason} at byte {exc.start}", source=source, line=number
            ) from None
    return lines


def check_names(events: Iterable[Event], policy: Policy, *, source: str | None = None) -> None:
    """Every authority and clearance name is on the policy's ladders (for events read from a store
    under another policy than the one that validated them); positions are 1-based."""
    for position, event in enumerate(events, start=1):
        unknown = unknown_level(event, policy)
        if unknown is not None:
            field, message = unknown
            raise PolicyError(f"event {event.id!r}: {message}", source=source, line=position, field=field)


def unknown_level(event: Event, policy: Policy) -> tuple[str, str] | None:
    """The field and message of an authority or clearance name not on the policy's ladders."""
    authority = getattr(event, "authority", None)
    if authority is not None and not policy.knows_authority(authority):
        ladder = ", ".join(policy.authority_ladder)
        return "authority", f"unknown authority level {authority!r} (ladder: {ladder})"
    if isinstance(event, Assert) and event.visibility and event.visibility.clearance is not None:
        clearance = event.visibility.clearance
        if not policy.knows_clearance(clearance):
            ladder = ", ".join(policy.clearance_ladder)
            return "visibility.clearance", f"unknown clearance level {clearance!r} (ladder: {ladder})"
    return None


def dump_events(events: Iterable[Event], out: IO[str]) -> None:
    """Write events as canonical JSON Lines (``event_line``: a committed value with its salt)."""
    for event in events:
        out.write(event_line(event) + "\n")


# -- the actor ---------------------------------------------------------------------------


def normal_actor(actor: Actor | Mapping[str, Any], policy: Policy) -> Actor:
    """The actor as a resolution echoes it: parsed from an object, or a hand-built ``Actor``
    with its clearance filled in and its roles sorted and de-duplicated."""
    if isinstance(actor, Mapping):
        return parse_actor(dict(actor), policy=policy)
    if actor.clearance is None or list(actor.roles) != sorted(set(actor.roles)):
        return attrs.evolve(actor, clearance=actor.clearance or policy.clearance_default,
                            roles=tuple(sorted(set(actor.roles))))
    return actor


def parse_actor(obj: Any, *, policy: Policy = DEFAULT_POLICY, source: str = "<actor>") -> Actor:
    """Validate an actor object and normalise it (clearance filled in, roles sorted, unique)."""

    def fail(cls: type[InputError], message: str, field: str | None) -> InputError:
        return ActorError(message, source=source, field=field)

    if not isinstance(obj, dict):
        raise fail(ActorError, "the actor must be a JSON object", None)
    check_keys(obj, Actor, fail, prefix="")
    try:
        actor = converter.structure(obj, Actor)
    except cattrs.BaseValidationError as exc:
        field, message = first_failure(exc)
        raise fail(ActorError, message, field) from None
    for name in ("id", "tenant"):
        _check_id_text(getattr(actor, name), fail, name)
    for index, role in enumerate(actor.roles):
        _check_id_text(role, fail, f"roles[{index}]")
    _check_id_text(actor.scope, fail, "scope")
    _scope_or_fail(actor.scope, fail, "scope")
    clearance = actor.clearance if actor.clearance is not None else policy.clearance_default
    if not policy.knows_clearance(clearance):
        raise fail(ActorError, f"unknown clearance level {clearance!r}", "clearance")
    return Actor(
        id=actor.id,
        tenant=actor.tenant,
        roles=tuple(sorted(set(actor.roles))),
        clearance=clearance,
        scope=actor.scope,
    )



