"""Verifying a log's hash chain: a store's stored links, or a JSONL file against a known head.

A store row keeps its previous head, so the first broken link tells what was
done: a row whose body does not hash to its head was *edited*; a row whose
previous head is nowhere had its predecessor *deleted*; one whose previous
head belongs to a later row was *reordered*; rows that the chain skips over
were *inserted*. A JSONL file keeps no heads, so its head is computed and
compared with one recorded elsewhere (``expect_head`` / ``expect_prefix``).
Without a key, whoever rewrites the log and recomputes the plain chain is
caught only by such a recorded head; the keyed chain (HMAC) is checked only
against a key the auditor brings, never because the store says it is keyed.
A store's rows are then held to what is signed and served from them: the
``tree`` rows against the tree recomputed from the bodies (``check_tree``) and
the bodies read as ``resolve`` reads them, under the log's rules (``check_log``).
Verification checks integrity only: no policy is involved.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol, cast

import attrs
import orjson
from sqlite_utils import Database

from gamma.core.integrity.chain import GENESIS, GENESIS_HEX, keyed_step, step
from gamma.core.integrity.commitment import HEX_DIGEST
from gamma.core.integrity.merkle import CompactRange, leaf_hash
from gamma.core.reading.events import canonical_event
from gamma.core.reading.logcheck import MemoryIndex
from gamma.core.reading.reader import read_bounded, read_each
from gamma.core.terms.canonical import parse_ts
from gamma.core.terms.errors import InputError, IntegrityError
from gamma.core.terms.model import Assert, Erase
from gamma.core.terms.policy import Policy
from gamma.storage._read import check_stored
from gamma.storage.migrations import ts_micros
from gamma.storage.values import ERASURE_KINDS, Problem

__all__ = [
    "ChainRow",
    "RowLookup",
    "SqlRowLookup",
    "VerifyReport",
    "LogCheck",
    "TreeCheck",
    "check_head",
    "check_rows",
    "column_problem",
    "is_chain_problem",
    "verify_bytes",
    "verify_file",
]

_CHAIN = frozenset({"edited", "deleted", "inserted", "reordered", "misnumbered"})
_TAMPERED = _CHAIN | frozenset(ERASURE_KINDS) | {"invalid", "tree"}
_POSITION = re.compile(r"position (\d+)")


@attrs.frozen(kw_only=True)
class VerifyReport:
    """The outcome of one verification; ``kind`` names the first problem, if any.

    ``head`` is the plain head recomputed from the bodies as they now read;
    ``keyed`` says whether a keyed chain was checked (a key was given).
    """

    source: str
    ok: bool
    events: int
    head: str
    keyed: bool = False
    keyed_head: str | None = None
    kind: str | None = None
    position: int | None = None
    event: str | None = None
    detail: str | None = None
    note: str | None = None
    #: for a store verified with a key: whether the store says it is keyed, and whether the
    #: key is the one it was initialised with (None: not known, e.g. a JSONL file)
    store_keyed: bool | None = None
    key_matches: bool | None = None
    #: committed values (SPEC §21): how many are erased, and the ids of the erase events
    erased: int = 0
    erase_events: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """What was found, in plain words (SPEC §9.6): ``intact``, ``grown``, ``not keyed``,
        ``wrong key``, ``truncated or rewritten`` or ``tampered at position N (KIND)``."""
        if self.ok:
            return "intact"
        if self.kind == "not_keyed" and (self.store_keyed is False or (
            self.store_keyed is None and self.position == 1
        )):
            return "not keyed"
        if self.kind == "keyed_mismatch" and (self.key_matches is False or (
            self.key_matches is None and self.position == 1
        )):
            return "wrong key"
        if self.kind in ("not_keyed", "keyed_mismatch"):
            # the plain chain holds but the keyed one breaks later: rewritten without the key
            return f"tampered at position {self.position} (edited)"
        if self.kind in _TAMPERED:
            return f"tampered at position {self.position} ({self.kind})"
        return (self.kind or "tampered").replace("_", " ")

    @property
    def status(self) -> int:
        """The exit status of ``gamma verify`` (SPEC §9.6): 0 intact, 2 not keyed (the key
        cannot be checked), 1 for everything else found."""
        if self.ok:
            return 0
        return 2 if self.verdict == "not keyed" else 1

    @property
    def message(self) -> str:
        if self.ok:
            erased = ""
            if self.erase_events:
                erased = (f", {self.erased} values erased by {len(self.erase_events)} erase"
                          f" event{'s' if len(self.erase_events) != 1 else ''}")
            return f"{self.source}: intact, {self.events} events{erased}, head {self.head}"
        return f"{self.source}: {self.verdict}: {self.detail}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "detail": self.detail,
            "erase_events": list(self.erase_events),
            "erased": self.erased,
            "event": self.event,
            "events": self.events,
            "head": self.head,
            "keyed": self.keyed,
            "keyed_head": self.keyed_head,
            "kind": self.kind,
            "note": self.note,
            "verdict": self.verdict,
            "ok": self.ok,
            "position": self.position,
            "source": self.source,
        }


class ChainRow(NamedTuple):
    """One stored event row, as the store's ``events`` table holds it."""

    position: int
    id: str
    type: str
    tenant: str
    ts_us: int
    fact: str | None
    key: str | None
    experience: str | None
    body: str
    prev_head: str
    head: str
    keyed_head: str | None


class RowLookup(Protocol):
    """The few store queries needed to name a broken link (run only after one is found)."""

    def position_of_head(self, head: str) -> int | None: ...
    def first_linking(self, prev_head: str, *, after: int) -> tuple[int, str] | None: ...
    def row_after(self, position: int) -> tuple[int, str] | None: ...


class SqlRowLookup:
    """RowLookup over a store's ``events`` table; the queries scan, but run only after a break."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def position_of_head(self, head: str) -> int | None:
        row = self._db.execute("SELECT min(position) FROM events WHERE head = ?", [head]).fetchone()
        return None if row[0] is None else int(row[0])

    def first_linking(self, prev_head: str, *, after: int) -> tuple[int, str] | None:
        row = self._db.execute(
            "SELECT position, id FROM events WHERE prev_head = ? AND position > ?"
            " ORDER BY position LIMIT 1",
            [prev_head, after],
        ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]))

    def row_after(self, position: int) -> tuple[int, str] | None:
        row = self._db.execute(
            "SELECT position, id FROM events WHERE position > ? ORDER BY position LIMIT 1",
            [position],
        ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]))


def check_head(value: str | None, *, field: str) -> str | None:
    """A head given by a caller (``field`` names the parameter): 64 hex digits, in lowercase."""
    if value is None:
        return None
    head = value.strip().lower()
    if not HEX_DIGEST.fullmatch(head):
        raise InputError(f"a head is 64 hex digits, got {value!r}", field=field)
    return head


class _Expectations:
    """Watches the heads go by and judges ``expect_head`` / ``expect_prefix`` at the end."""

    def __init__(self, expect_head: str | None, expect_prefix: str | None) -> None:
        self.wanted = {h for h in (expect_head, expect_prefix) if h is not None}
        self.expect_head = expect_head
        self.expect_prefix = expect_prefix
        # the empty prefix: every log starts from the genesis head
        self.seen: dict[str, tuple[int, str | None]] = {GENESIS_HEX: (0, None)}

    def observe(self, head: str, position: int, event: str) -> None:
        if head in self.wanted and head not in self.seen:
            self.seen[head] = (position, event)

    def judge(self, head: str, events: int) -> Problem | None:
        for wanted, exact in ((self.expect_head, True), (self.expect_prefix, False)):
            if wanted is None or (exact and wanted == head):
                continue
            found = self.seen.get(wanted)
            if found is None:
                return (
                    "truncated_or_rewritten",
                    None,
                    None,
                    (
                        f"the expected head {wanted} is nowhere in the log: it was truncated or"
                        f" rewritten (it now has {events} events, head {head})"
                    ),
                )
            if exact:
                position, event = found
                return (
                    "grown",
                    position,
                    event,
                    (
                        f"the expected head is the head after position {position} of {events}:"
                        " the log has grown since (an expected prefix accepts that)"
                    ),
                )
        return None


def check_rows(
    rows: Iterable[ChainRow],
    *,
    source: str,
    lookup: RowLookup,
    key: bytes | None = None,
    expect_head: str | None = None,
    expect_prefix: str | None = None,
) -> VerifyReport:
    """Check a store's rows in position order in one pass; name the first bad position."""
    expected_prev = GENESIS_HEX
    computed = GENESIS
    keyed = GENESIS
    problem: Problem | None = None
    keyed_problem: Problem | None = None
    expectations = _Expectations(expect_head, expect_prefix)
    count = 0
    previous: ChainRow | None = None
    for row in rows:
        count += 1
        computed = step(computed, row.body)
        head = computed.hex()
        expectations.observe(head, row.position, row.id)
        if key is not None:
            keyed = keyed_step(key, keyed, row.body)
            if keyed_problem is None:
                keyed_problem = _keyed_problem(row, keyed.hex())
        if problem is None:
            if row.prev_head != expected_prev:
                problem = _classify_link(row, previous, lookup)
            elif head != row.head:
                problem = (
                    "edited",
                    row.position,
                    _event_id(row),
                    (
                        f"position {row.position} (event {_event_id(row)}) was edited:"
                        " its body does not hash to its recorded head"
                    ),
                )
            elif row.position != count:
                problem = (
                    "misnumbered",
                    count,
                    row.id,
                    (
                        f"position {count}: the rows are not numbered 1, 2, 3, ...: event"
                        f" {_event_id(row)} is row {count} but is numbered {row.position}"
                    ),
                )
            else:
                problem = column_problem(row)
        expected_prev = row.head
        previous = row
    head = computed.hex()
    found = problem or keyed_problem or expectations.judge(head, count)
    return _report(source, found, count, head, keyed.hex() if key is not None else None)


def is_chain_problem(kind: str | None) -> bool:
    """Whether ``kind`` is a broken link, hash, position or lookup column of a row."""
    return kind in _CHAIN


class TreeCheck:
    """The ``tree`` rows against the tree recomputed from the events, fed in position order:
    what ``checkpoint`` signs and ``prove`` serves must be the events' own tree."""

    def __init__(self, stored: Iterable[tuple[int, bytes]]) -> None:
        self._compact = CompactRange()
        self._stored = iter(stored)

    def feed(self, position: int, event_id: str, body: str) -> Problem | None:
        expected = b"".join(self._compact.append(leaf_hash(body.encode("utf-8"))))
        row = next(self._stored, None)
        if row is None or row[0] != position or bytes(row[1]) != expected:
            return (
                "tree",
                position,
                event_id,
                (
                    f"tree row {position} (event {event_id}) is not the tree recomputed from the"
                    " events: a checkpoint or proof from it would not be of this log"
                ),
            )
        return None

    def finish(self) -> Problem | None:
        extra = next(self._stored, None)
        if extra is not None:
            return ("tree", int(extra[0]), None, f"tree row {extra[0]} has no event: the tree was changed")
        return None


class LogCheck:
    """The stored ``(position, body, prev_head, head)`` rows read as ``resolve`` reads them
    (gamma.storage._read) under the log's rules (gamma.core.reading.logcheck), a chunk at a time:
    what is held between chunks is the index of ids and facts, not the events."""

    def __init__(self, source: str) -> None:
        self._source = source
        self._index = MemoryIndex()
        self._since = 0
        self._prev = GENESIS_HEX

    def feed(self, rows: Sequence[tuple[int, str, str, str]]) -> Problem | None:
        try:
            events, heads = check_stored(
                rows, since=self._since, prev=self._prev, index=self._index, source=self._source
            )
        except IntegrityError as exc:
            match = _POSITION.search(str(exc).removeprefix(self._source))
            position = int(match.group(1)) if match else None
            found = [row for row in rows if row[0] == position]
            event = _body_id(found[0][1]) if found else None
            return "invalid", position, event, f"{exc} (event {event}; resolve refuses this store)"
        for accepted in events:
            self._index.add(accepted)
        self._since += len(events)
        if heads:
            self._prev = heads[-1].hex()
        return None


def _report(
    source: str, found: Problem | None, count: int, head: str, keyed_head: str | None
) -> VerifyReport:
    """The report of a finished pass: ok, or the first problem found."""
    kind, position, event, detail = found if found else (None, None, None, None)
    return VerifyReport(
        source=source,
        ok=found is None,
        events=count,
        head=head,
        keyed=keyed_head is not None,
        keyed_head=keyed_head,
        kind=kind,
        position=position,
        event=event,
        detail=detail,
    )


def _keyed_problem(row: ChainRow, keyed_hex: str) -> Problem | None:
    if row.keyed_head is None:
        return (
            "not_keyed",
            row.position,
            row.id,
            (
                f"a key was given but position {row.position} (event {row.id}) has no keyed head:"
                " the store keeps no keyed chain (verify it without a key), or its keyed"
                " chain was removed"
            ),
        )
    if row.keyed_head != keyed_hex:
        return (
            "keyed_mismatch",
            row.position,
            row.id,
            (
                f"position {row.position} (event {row.id}): the keyed chain does not match:"
                " the key is not this store's, or the log was rewritten without the key"
            ),
        )
    return None


def _classify_link(row: ChainRow, previous: ChainRow | None, lookup: RowLookup) -> Problem:
    """Tell a deletion, an insertion and a reordering apart from where the link points."""
    pos, event = row.position, _event_id(row)
    expected_prev = GENESIS_HEX if previous is None else previous.head
    target = 0 if row.prev_head == GENESIS_HEX else lookup.position_of_head(row.prev_head)
    if target is not None and target > pos:
        return (
            "reordered",
            pos,
            event,
            (
                f"position {pos} (event {event}) is out of order:"
                f" it follows the event now at position {target}"
            ),
        )
    if target is not None and target < pos:
        first = lookup.row_after(target) or (pos, event)
        return (
            "inserted",
            first[0],
            first[1],
            (
                f"position {first[0]} (event {first[1]}) was inserted: the chain goes from"
                f" position {target} straight to position {pos}"
            ),
        )
    resumes = lookup.first_linking(expected_prev, after=pos)
    if resumes is not None:
        return (
            "inserted",
            pos,
            event,
            (
                f"position {pos} (event {event}) was inserted: the chain resumes at"
                f" position {resumes[0]} (event {resumes[1]})"
            ),
        )
    if previous is None:
        where, other = "at the start of the log", ""
    else:
        where = f"after position {previous.position}"
        other = (
            f"; or position {previous.position} (event {_event_id(previous)}) was rewritten"
            " and its head recomputed"
        )
    return (
        "deleted",
        pos,
        event,
        (
            f"events were deleted {where}: the event after the gap is {event} at position {pos},"
            f" whose recorded previous head is nowhere in the store{other}"
        ),
    )


def column_problem(row: ChainRow) -> Problem | None:
    """The lookup columns must say what the body says (appends trust them; the body is read
    with orjson, a decoder bounded in depth)."""
    try:
        body = orjson.loads(row.body)
        ts_us = ts_micros(parse_ts(body["ts"]))
    except (ValueError, KeyError, TypeError):
        body, ts_us = None, None
    if not isinstance(body, dict):
        return (
            "edited",
            row.position,
            row.id,
            f"position {row.position} (event {row.id}) was edited: its body is not a JSON event",
        )
    expected = {
        "id": body.get("id"),
        "type": body.get("type"),
        "tenant": body.get("tenant"),
        "ts_us": ts_us,
        "fact": body.get("fact"),
        "key": body.get("key"),
        "experience": body.get("experience"),
    }
    for column, value in expected.items():
        if getattr(row, column) != value:
            return (
                "edited",
                row.position,
                str(body.get("id", row.id)),
                (
                    f"position {row.position} (event {body.get('id', row.id)}) was edited:"
                    f" its {column} column disagrees with its body"
                ),
            )
    return None


def _body_id(body: str) -> str | None:
    try:
        found = orjson.loads(body)
    except ValueError:
        return None
    value = found.get("id") if isinstance(found, dict) else None
    return value if isinstance(value, str) else None


def _event_id(row: ChainRow) -> str:
    try:
        body = orjson.loads(row.body)  # a C decoder bounded in depth: a hostile body is a ValueError
    except ValueError:
        return row.id
    found = body.get("id") if isinstance(body, dict) else None
    return found if isinstance(found, str) else row.id


# -- JSONL files -------------------------------------------------------------------------


class _AnyNames:
    """Accepts every authority and clearance name: verification does not need the policy."""

    authority_ladder: tuple[str, ...] = ()
    clearance_ladder: tuple[str, ...] = ()
    over_claim = "cap"  # writers' bounds are the resolver's business, not the chain's

    def knows_authority(self, name: str) -> bool:
        return True

    def knows_clearance(self, name: str) -> bool:
        return True

    def may_erase(self, writer: str) -> bool:
        return True  # who may erase is the policy's business too, not the chain's


_ANY_NAMES = cast(Policy, _AnyNames())


def verify_file(
    path: str | Path,
    *,
    key: bytes | None = None,
    expect_head: str | None = None,
    expect_prefix: str | None = None,
) -> VerifyReport:
    """Compute a JSONL log's head (and keyed head) and compare it with the expected head.

    Each line is parsed and canonicalised as an event; an unparsable line is an
    input error (unreadable), not tampering.
    """
    path = Path(path)
    source = str(path)
    try:
        with path.open("rb") as stream:
            raw = read_bounded(stream, source=source)  # never more than one line past the limit
    except OSError as exc:
        raise InputError(f"cannot read log: {exc.strerror}", source=source) from None
    return verify_bytes(
        raw, source=source, key=key, expect_head=expect_head, expect_prefix=expect_prefix
    )


def verify_bytes(
    raw: bytes,
    *,
    source: str,
    key: bytes | None = None,
    expect_head: str | None = None,
    expect_prefix: str | None = None,
) -> VerifyReport:
    """:func:`verify_file` over a JSONL log's bytes (e.g. read from standard input)."""
    computed = GENESIS
    keyed = GENESIS
    expectations = _Expectations(expect_head, expect_prefix)
    count = 0
    erased, erase_events = 0, []
    for _, event in read_each(raw, policy=_ANY_NAMES, source=source):
        canonical = canonical_event(event)
        count += 1
        if isinstance(event, Assert) and event.value is None:
            erased += 1
        elif isinstance(event, Erase):
            erase_events.append(event.id)
        computed = step(computed, canonical)
        if key is not None:
            keyed = keyed_step(key, keyed, canonical)
        expectations.observe(computed.hex(), count, event.id)
    head = computed.hex()
    found = expectations.judge(head, count)
    report = _report(source, found, count, head, keyed.hex() if key is not None else None)
    return attrs.evolve(report, erased=erased, erase_events=tuple(erase_events))
