"""Validating events gamma did not read itself, before Γ relies on them.

A caller of ``gamma.resolve`` may build ``Assert``/``Retract``… objects by
hand, or cut and join logs it read. Γ's fold assumes a valid log (every
reference known, ids unique, ``ts`` in order), so such a sequence is put
through the very rules the reader applies (SPEC §2): each event is written
as its canonical JSON and read back by the reader (``gamma.core.reading.reader.read_lines``),
which also catches what an object can hold and a line cannot (floats, unsafe integers,
a naive datetime). Errors are InputErrors naming the event (``events[3] (id 'e4')``)
and the field. A ``ParsedLog`` (the reader's own output) is returned as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from gamma.core.reading.events import event_to_json
from gamma.core.reading.parsed import ParsedLog
from gamma.core.reading.reader import read_lines
from gamma.core.reading.schema import STAMPED
from gamma.core.terms.canonical import canonical_json
from gamma.core.terms.errors import InputError, ValueTypeError
from gamma.core.terms.model import Event
from gamma.core.terms.policy import Policy

__all__ = ["checked_log"]


def checked_log(events: Iterable[Event], policy: Policy) -> tuple[Event, ...]:
    """``events`` as a validated log: a ParsedLog as it is, anything else checked first.

    The events returned are the ones read back from their canonical text, so
    what Γ folds is exactly what the log's head and tree hash.
    """
    if isinstance(events, ParsedLog):
        return events
    items = tuple(events)
    names = [_name(index, event) for index, event in enumerate(items)]
    lines = [_handbuilt_line(event, name) for event, name in zip(items, names, strict=True)]
    try:
        return read_lines(lines, policy=policy, name="<events>")
    except InputError as exc:
        where = names[exc.line - 1] if exc.line is not None else None
        raise type(exc)(exc.message, source=where, field=exc.field) from None


def _name(index: int, event: object) -> str:
    """How an error names the event: its place in the sequence and its id when it has one."""
    event_id = getattr(event, "id", None)
    return f"events[{index}]" + (f" (id {event_id!r})" if isinstance(event_id, str) else "")


def _handbuilt_line(event: object, name: str) -> str:
    """The event's canonical JSON line; what cannot be written as JSON is an input error."""
    if not isinstance(event, Event):
        raise ValueTypeError(f"not an event but {type(event).__name__}", source=name)
    for field in STAMPED:
        value = getattr(event, field, None)
        if value is None:
            continue
        if not isinstance(value, datetime):
            raise ValueTypeError(f"expected a datetime, got {value!r}", source=name, field=field)
        if value.utcoffset() is None:
            raise ValueTypeError("a datetime without a time zone is no instant", source=name, field=field)
    try:
        obj = event_to_json(event)
    except Exception as exc:  # whatever a hand-built field holds, the caller gets an input error
        raise ValueTypeError(f"cannot be written as a JSON event ({exc})", source=name) from None
    for field in sorted(obj):
        try:
            canonical_json(obj[field])
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise ValueTypeError(f"not a JSON value ({exc})", source=name, field=field) from None
    return canonical_json(obj)
