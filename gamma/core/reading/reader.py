"""The one way in: any source of events read into the log that every caller takes.

A path, a log's bytes, a text or byte stream, standard input (``-``), a store, or an
iterable of JSON lines, decoded objects or events: each is a small adapter that hands its
lines or objects to the decoders of ``gamma.core.reading.events`` (each line tried by ``plain``, then
``fastpath``, then the strict ``strictjson`` decoder and the converter), and the log's rules
(``logcheck``) run once over the whole input. The same content gives the same events, the
same canonical bytes and the same first error (message, line, field) whichever way it came
in (``tests/test_reader.py``). Nothing outside this module and its decoders decodes or
validates an event (the same test greps the package for it).

The resolution time is an argument: ``read(..., at=t)`` also hashes the prefix heard by
``t`` and records its heads (``ParsedLog.heads_of``); Γ, given ``t``, asks for them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from io import IOBase
from typing import IO, Any, Protocol, cast, runtime_checkable

import cattrs
import orjson

from gamma.core.reading.convert import converter
from gamma.core.reading.events import (
    EMPTY_FILE,
    as_line,
    batch_object,
    batch_objects,
    check_names,
    decode_line,
    decode_lines,
    event_from_json,
    load_bytes,
    load_file,
    parse_lines,
    read_bounded,
    with_canonical,
)
from gamma.core.reading.fastpath import fast_event
from gamma.core.reading.logcheck import check_events
from gamma.core.reading.parsed import ParsedLog
from gamma.core.reading.plain import plain_line
from gamma.core.reading.strictjson import decode_json
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import EVENT_TYPES, Event
from gamma.core.terms.policy import DEFAULT_POLICY, Policy

__all__ = [
    "EMPTY_FILE",
    "STDIN",
    "STDIN_SOURCE",
    "Item",
    "Source",
    "StoredLog",
    "decode_batch",
    "read",
    "read_bounded",
    "read_each",
    "read_line",
    "read_lines",
    "read_numbered",
    "read_object",
    "read_objects",
    "read_objects_log",
    "read_stored",
]

STDIN = "-"
"""The source name that means standard input."""
STDIN_SOURCE = "<stdin>"
"""How errors name standard input."""

Item = str | bytes | Mapping[str, Any] | Event
"""One item of an iterable source: a JSON line, a decoded object or an event."""


@runtime_checkable
class StoredLog(Protocol):
    """A store as the reader takes it (``gamma.Store``): its events, validated when appended
    under its policy, and that policy."""

    @property
    def policy(self) -> Policy: ...

    def events(self) -> Sequence[Event]: ...


Source = str | os.PathLike[str] | bytes | IO[str] | IO[bytes] | StoredLog | Iterable[Item]
"""Whatever ``read`` takes (``-`` is standard input)."""


def read(
    source: Source,
    *,
    policy: Policy | None = None,
    name: str | None = None,
    at: datetime | None = None,
) -> ParsedLog:
    """The validated log of ``source`` (SPEC §2): a ParsedLog, which Γ takes as it is.

    ``policy`` defaults to a store's own, else the default policy; ``name`` is how errors
    name the source (a path's own name, ``<stdin>``, else none). With ``at`` (a log read
    for one resolution, ``gamma resolve``), the heads of the prefix heard by ``at`` are
    recorded too and the events keep no canonical text (a fifth of a large log's memory).
    A path, bytes and a stream hold a whole log file: empty, they are an error, as an empty
    file is; an iterable is a batch, and may be empty.
    """
    if isinstance(source, StoredLog):
        return _from_store(source, policy, name)
    chosen = policy or DEFAULT_POLICY
    if isinstance(source, str) and source == STDIN:
        return _bytes(read_bounded(sys.stdin.buffer, source=name or STDIN_SOURCE),
                      chosen, name or STDIN_SOURCE, at)  # fmt: skip
    if isinstance(source, (str, os.PathLike)):
        return load_file(os.fspath(source), policy=chosen, resolve_at=at, source=name)  # type: ignore[return-value]
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        _check_utf8(data, name)
        return _bytes(data, chosen, name, at)
    if isinstance(source, IOBase) or hasattr(source, "read"):  # a file object, or alike
        return _stream(cast(IO[Any], source), chosen, name, at)
    return read_lines(source, policy=chosen, name=name, at=at)


def _check_utf8(data: bytes, name: str | None) -> None:
    """Bytes handed in are UTF-8, as a file's are (``read_bounded``): the first line that is
    not is named."""
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            decode_lines(data, source=name)  # raises, naming the line


def _bytes(data: bytes, policy: Policy, name: str | None, at: datetime | None) -> ParsedLog:
    """A log file's bytes, known to be UTF-8 (``read_bounded`` or ``_check_utf8`` checked)."""
    return load_bytes(data, policy=policy, source=name, resolve_at=at)  # type: ignore[return-value]


def _stream(stream: IO[Any], policy: Policy, name: str | None, at: datetime | None) -> ParsedLog:
    """A stream of a log file: bytes read as a file is (no line held past the limit), text
    taken as the lines it holds."""
    name = name or _stream_name(stream)
    first = stream.read(0)
    if isinstance(first, bytes):
        return _bytes(read_bounded(stream, source=name), policy, name, at)
    text = stream.read()
    if not text:
        raise InputError(EMPTY_FILE, source=name)
    return read_lines(text.split("\n"), policy=policy, name=name, at=at)


def _stream_name(stream: IO[Any]) -> str | None:
    """A file's path, or ``<stdin>``; an in-memory stream has no name."""
    label = getattr(stream, "name", None)
    if label in (0, "<stdin>") or stream in (sys.stdin, getattr(sys.stdin, "buffer", None)):
        return STDIN_SOURCE
    return label if isinstance(label, str) else None


def _from_store(store: StoredLog, policy: Policy | None, name: str | None) -> ParsedLog:
    """A store's events, validated when appended under its policy: held to another policy's
    ladders when one is given (positions 1-based)."""
    events = store.events()
    if policy is not None and policy != store.policy:
        check_names(events, policy, source=f"{name or 'store'} (event position)")
    if isinstance(events, ParsedLog):
        return events
    return read_lines(events, policy=policy or store.policy, name=name)


def read_lines(
    items: Iterable[Item],
    *,
    policy: Policy = DEFAULT_POLICY,
    name: str | None = None,
    at: datetime | None = None,
) -> ParsedLog:
    """A log given as JSON lines (str, or bytes that must be UTF-8), decoded objects or
    events, numbered from 1 (a blank line counts and is skipped). An object or an event is
    held to the rules of a JSON line: it is written as one and read back."""
    lines: Iterable[str | bytes]
    if isinstance(items, (list, tuple)) and all(type(item) is str for item in items):
        lines = items
    else:
        lines = (as_line(item, source=name, line=number)
                 for number, item in enumerate(items, start=1))  # fmt: skip
    return parse_lines(lines, policy=policy, index=None, source=name, resolve_at=at)  # type: ignore[return-value]


def decode_batch(
    items: Iterable[Item] | str, *, policy: Policy, source: str | None
) -> list[tuple[int | None, Event]]:
    """Each item of a batch decoded and checked alone, with its line (from 1; blank lines
    count and are skipped), each event keeping its canonical text; the log's rules are the
    caller's (``logcheck.validate_log``, against what it accepted before)."""
    if isinstance(items, str):
        items = items.split("\n")
    decoded: list[tuple[int | None, Event]] = []
    for number, item in enumerate(items, start=1):
        if isinstance(item, str):  # a JSON line: the way a log's lines are read
            found = decode_line(item, policy, source=source, line=number)
            if found is not None:
                decoded.append((number, found[0]))
        elif (obj := batch_object(item, source=source, line=number)) is not None:
            decoded.append((number, read_object(obj, policy=policy, source=source, line=number)))
    return decoded


def read_objects(items: Iterable[Item] | str, *, source: str | None) -> Iterator[tuple[int, Any]]:
    """The JSON objects of a batch given as JSON lines (a str is split into lines), decoded
    objects or events, numbered from 1 (blank lines count and are skipped); an object or an
    event handed in from Python is held to the rules of a JSON line."""
    for number, obj, _ in batch_objects(items, source=source):  # type: ignore[arg-type]
        yield number, obj


def read_object(
    obj: Any, *, policy: Policy, source: str | None, line: int | None, keep_text: bool = True
) -> Event:
    """One decoded object checked as an event (no log rules), keeping its canonical text."""
    event = event_from_json(obj, policy=policy, source=source, line=line)
    return with_canonical(event, obj) if keep_text and isinstance(obj, dict) else event


def read_line(text: str, *, policy: Policy, source: str | None, line: int | None) -> Event:
    """One JSON line checked as an event (no log rules), by the strict decoder."""
    return event_from_json(decode_json(text, source=source, line=line), policy=policy,
                           source=source, line=line)  # fmt: skip


def read_each(
    data: bytes, *, policy: Policy, source: str | None
) -> Iterator[tuple[int, Event]]:
    """Each event of a log's bytes with its line, checked alone and never held together (no
    log rules): what verifying a file's chain reads."""
    if not data:
        raise InputError(EMPTY_FILE, source=source)
    for number, text in enumerate(decode_lines(data, source=source), start=1):
        if text.strip():
            yield number, read_line(text, policy=policy, source=source, line=number)


def read_numbered(
    lines: Iterable[tuple[int, str]], *, policy: Policy, source: str | None
) -> ParsedLog:
    """A valid log's part given as ``(line, JSON line)`` pairs, each error naming the line it
    had in the whole log (one tenant's partition: references never cross tenants). Its heads
    are not hashed: the caller holds the whole log's."""
    numbers: list[int] = []
    texts: list[str] = []
    for number, text in lines:
        numbers.append(number)
        texts.append(text)
    return parse_lines(texts, policy=policy, index=None, source=source, numbers=numbers)  # type: ignore[return-value]


def read_objects_log(
    objects: Sequence[Any], *, policy: Policy, source: str | None = None, first: int = 1
) -> ParsedLog:
    """A log given as objects decoded already (a case file's ``events``), numbered from
    ``first``: each error's line is its object's number. Its heads are computed when asked."""
    events = [event_from_json(obj, policy=policy, source=source, line=first + index)
              for index, obj in enumerate(objects)]  # fmt: skip
    log = ParsedLog(events)
    log.found_erases = check_events(events, range(first, first + len(events)), source=source)
    return log


def read_stored(body: str, joined: dict[str, Any] | None = None) -> Event | None:
    """The event of a store's canonical body, validated when it was appended (no policy checks
    again), keeping the body as its canonical text; ``joined`` is the body's object with a
    committed value and salt put back (structured as it is). None: the body is no event."""
    try:
        if joined is None:
            plain = plain_line(body, None)
            if plain is not None:
                event: Event = plain[0]
            else:
                obj = orjson.loads(body)
                found = fast_event(obj, None)  # the fast structuring; the converter for the rest
                event = found if found is not None else converter.structure(
                    obj, EVENT_TYPES[obj.pop("type")]
                )
        else:
            event = converter.structure(joined, EVENT_TYPES[joined.pop("type")])
    except (ValueError, KeyError, TypeError, AttributeError, cattrs.BaseValidationError):
        return None
    return event.keep_canonical(body)
