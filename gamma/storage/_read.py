"""The read path's integrity checks: stored rows turned back into events, trusting what was
validated at append but re-checking cheaply what a reader relies on (positions without gaps,
each row's link and hash, and with an index the log's rules against what was read before).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import cattrs
import orjson

from gamma.core.chain import step_bytes
from gamma.core.convert import converter
from gamma.core.errors import InputError, IntegrityError
from gamma.core.fastpath import fast_event
from gamma.core.logcheck import LogIndex, check_events
from gamma.core.merkle import TreeBuilder
from gamma.core.model import EVENT_TYPES, Event
from gamma.core.plain import plain_line

__all__ = ["READ", "check_stored"]

READ = "position, body, prev_head, head"
"""The columns of a row ``check_stored`` reads."""


def check_stored(
    rows: Iterable[Sequence[Any]],
    *,
    since: int,
    prev: str,
    index: LogIndex | None,
    source: str,
    tree: TreeBuilder | None = None,
) -> tuple[list[Event], list[bytes]]:
    """Events from stored ``(position, body, prev_head, head)`` rows, and the head after each.

    The cheap checks a reader owes the rows it relies on: consecutive
    positions from ``since + 1``, each row linked to the head before it and
    its body hashing to its head, a body that is an event, and (with
    ``index``, what was read before) unique ids, known references and ``ts``
    order. The first failure is an IntegrityError naming its position.
    Each body's bytes are also added to ``tree`` when one is given.
    """
    events: list[Event] = []
    heads: list[bytes] = []
    previous = bytes.fromhex(prev)
    expected = since + 1
    for position, body, prev_head, head in rows:

        def broken(detail: str, position: int = position) -> IntegrityError:
            return IntegrityError(f"{source}: position {position}: {detail}")

        if position != expected:
            raise IntegrityError(
                f"{source}: position {expected}: missing (the next row is position {position})"
            )
        if prev_head != previous.hex():
            raise broken(f"its previous head is not the head of position {position - 1}")
        data = body.encode("utf-8")
        current = step_bytes(previous, data)  # the bytes are kept for the tree
        if tree is not None:
            tree.add(data)
        if current.hex() != head:
            raise broken("its body does not hash to its head (edited)")
        events.append(_stored_event(body, broken))
        heads.append(current)
        previous = current
        expected += 1
    if index is not None:
        try:
            check_events(events, range(since + 1, since + 1 + len(events)), index=index)
        except InputError as exc:
            raise IntegrityError(
                f"{source}: position {exc.line}: a stored event breaks the log ({exc.message})"
            ) from None
    return events, heads


def _stored_event(body: str, broken: Callable[[str], IntegrityError]) -> Event:
    """The event of a stored canonical body, keeping the body as its canonical text."""
    plain = plain_line(body, None)  # validated at append: no policy checks again
    if plain is not None:
        object.__setattr__(plain[0], "_canonical", body)  # a cache slot of a new object
        return plain[0]
    try:
        obj = orjson.loads(body)
        fast = fast_event(obj, None)  # the fast structuring; the converter for what it defers
        if fast is not None:
            object.__setattr__(fast, "_canonical", body)
            return fast
        cls = EVENT_TYPES[obj.pop("type")]
        event: Event = converter.structure(obj, cls)
    except (ValueError, KeyError, TypeError, AttributeError, cattrs.BaseValidationError):
        raise broken("its body is not an event") from None
    # initialising a cache slot of an object built a moment ago, before anyone else sees it
    object.__setattr__(event, "_canonical", body)
    return event

