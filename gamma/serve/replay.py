"""Replaying a decision log against its store: every decision made again, every write found.

The entries are taken in log-position order and one ``EngineState`` is extended over the
store's events to each entry's position (never folded again from the start), so a log of
many decisions costs one fold of the store plus the decisions. Each entry is checked
against the log it saw: the Merkle root at its position, the freshness token returned (the
deployment's MAC over that root, under the token key the decision log keeps) and the
policy digest; a decision
is run again through its handler, as its recorded caller at its recorded time over exactly
its position's events, and its status and canonical response bytes compared; a write's
events must be in the store at or before its position, as written. The hash chain of the
log is verified first; rows after a break are not replayed.

Erasure (issue 30): a row redacted by an erase event of the store is counted ``erased``, not
replayed (its outline still places it and counts the events a write appended, for coverage);
a redaction naming no erase event of the store is a difference. An entry still held whose
replay differs only where an erasure reaches (it names an erased fact, a fact depending on
one, or a fact or key sharing a key with one: an erased fact withdraws as of every time, so
what it outranked or fed is decided otherwise now) is counted ``changed_by_erasure``, not
different.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson

from gamma.core.incremental.engine import EngineState
from gamma.core.reading.events import event_line, normal_actor
from gamma.core.reading.reader import read_object, read_objects
from gamma.core.terms.canonical import canonical_bytes, canonical_text, parse_at
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import Assert, Erase, Event, Experience
from gamma.serve.endpoints import request_time
from gamma.serve.errors import Forbidden
from gamma.serve.freshness import FreshnessToken
from gamma.serve.types import Caller, Handler
from gamma.storage.decisions import (
    ChainReport,
    DecisionEntry,
    DecisionLog,
    EntryMatcher,
    Outline,
    decision_log_path,
)
from gamma.storage.store import Store

__all__ = ["Difference", "DecisionReplay", "replay_decisions", "APPEND", "SHOWN"]

#: The endpoint name of a write; every other entry names a handler.
APPEND = "append"
#: How many differences a report lists (the first by seq); all are counted.
SHOWN = 20
#: Longest recorded or replayed value a difference shows (canonical JSON, cut).
_SHOWN_CHARS = 200

Refusal = Callable[[InputError | Forbidden], tuple[int, dict[str, Any] | None]]
"""A handler's refusal as the server answered it: the status and the body, or None when the
body is not compared (then only the status is). The server's is ``gamma.serve.service.refusal``."""


Found = tuple[str, Any, Any]
"""A difference before it is shown: the field, the recorded value, the replayed value."""

#: What ``_check_append`` finds for a write whose every event is as stored but one's value,
#: erased since, can no longer be compared: changed by erasure, not different.
_ERASED: Found = ("(erased)", None, None)


@attrs.frozen
class Difference:
    """The first way one entry did not replay: where (``field``, a dotted path) and the two
    values (``redaction``: a redacted row naming no erase event of the store)."""

    seq: int
    endpoint: str
    field: str
    recorded: str
    replayed: str

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class DecisionReplay:
    """What a replay found: counts, the chain's report, and the first differences by seq.

    ``erased`` rows were redacted by an erase event (not replayed); ``changed_by_erasure``
    entries replayed differently only where an erasure reaches. Neither is a difference."""

    entries: int
    decisions: int
    appends: int
    replayed: int
    different: int
    chain: ChainReport
    differences: tuple[Difference, ...]
    erased: int = 0
    changed_by_erasure: int = 0

    @property
    def ok(self) -> bool:
        """The chain whole, every entry replayed or erased, and none different."""
        return (self.chain.ok and self.different == 0
                and self.replayed + self.erased == self.entries)  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "appends": self.appends,
            "chain": self.chain.to_dict(),
            "changed_by_erasure": self.changed_by_erasure,
            "decisions": self.decisions,
            "differences": [d.to_dict() for d in self.differences],
            "different": self.different,
            "entries": self.entries,
            "erased": self.erased,
            "ok": self.ok,
            "replayed": self.replayed,
        }

    def render(self) -> str:
        """A summary for people: one line of counts, the chain, then each difference shown."""
        same = self.replayed - self.different - self.changed_by_erasure
        lines = [f"{self.replayed} of {self.entries} entries replayed ({self.decisions} decisions,"
                 f" {self.appends} writes): {same} same, {self.different} different,"
                 f" {self.changed_by_erasure} changed by erasure; {self.erased} erased"]  # fmt: skip
        chain = self.chain
        lines.append(f"chain: whole, {chain.entries} entries, head {chain.head}" if chain.ok else
                     f"chain: broken at seq {chain.broken}: {chain.problem}")  # fmt: skip
        for d in self.differences:
            lines.append(f"seq {d.seq} {d.endpoint}: {d.field}: recorded {d.recorded}, replayed {d.replayed}")
        if self.different > len(self.differences):
            lines.append(f"… and {self.different - len(self.differences)} more")
        return "\n".join(lines) + "\n"


def statuses_only(exc: InputError | Forbidden) -> tuple[int, dict[str, Any] | None]:
    """A refusal's status (403 forbidden, 400 an input error), its body not compared."""
    return (exc.status if isinstance(exc, Forbidden) else 400), None


def replay_decisions(
    store_path: str | Path,
    log_path: str | Path | None = None,
    *,
    handlers: Mapping[str, Handler],
    key: bytes | None = None,
    refusal: Refusal = statuses_only,
) -> DecisionReplay:
    """Replay the decision log at ``log_path`` (default ``STORE.decisions``) against the store.

    ``handlers`` maps each decision endpoint to its handler (``gamma.serve.endpoints.HANDLERS``),
    ``key`` is a keyed store's chain key, ``refusal`` maps a handler's refusal to the status
    (and body) the server answered it with. The time is the recorded one, read again through
    the request as the server reads it (``endpoints.request_time``), so a request whose own
    time was refused is refused again.
    """
    log_path = decision_log_path(store_path) if log_path is None else Path(log_path)
    with DecisionLog.open(log_path, read_only=True) as log:
        chain = log.verify()
        # the rows verify read, not those recorded since (a live log grows while it is
        # replayed); read before the store, so every erase event a redaction names is in it
        before = chain.broken or chain.seq + 1
        entries = list(log.entries(before=before))
        redactions = log.redactions(before=before)
        total = chain.entries if chain.ok else len(log)
        token_key = log.token_key
    with Store.open(store_path, key=key, read_only=True) as store:
        events: Sequence[Event] = store.events()
        state = EngineState(store.policy)
    found = _Differences(limit=SHOWN)
    erase_events = {event.id for event in events if isinstance(event, Erase)}
    for redaction in redactions:
        outline = redaction.outline
        if redaction.erase_event not in erase_events:
            found.add(redaction.seq, outline.endpoint, "redaction", redaction.erase_event,
                      "no erase event of the store by that id")  # fmt: skip
        elif outline.position > len(events):
            found.add(redaction.seq, outline.endpoint, "position", outline.position,
                      f"the store holds {len(events)} events")  # fmt: skip
    reach: EntryMatcher | None = None  # what an erasure reaches, built at the first difference
    changed = 0
    appends = 0
    ids: dict[str, int] | None = None  # event id -> 1-based position, built at the first write
    for seq, entry in sorted(entries, key=lambda e: (e[1].position, e[0])):
        if entry.endpoint == APPEND:
            appends += 1
        if not 0 <= entry.position <= len(events):
            found.add(seq, entry.endpoint, "position", entry.position, f"the store holds {len(events)} events")
            continue
        state.extend(events[len(state) : entry.position])
        difference = _check_log(state, entry, token_key)
        if difference is None and entry.endpoint == APPEND:
            if ids is None:
                ids = {event.id: i for i, event in enumerate(events, start=1)}
            difference = _check_append(entry, events, ids, state)
            if difference is _ERASED:
                changed, difference = changed + 1, None
        elif difference is None:
            difference = _check_decision(state, entry, handlers, refusal)
            if difference is not None and erase_events:
                reach = _erasure_reach(events) if reach is None else reach
                if reach.matches(entry.canonical().decode("utf-8")):
                    changed, difference = changed + 1, None
        if difference is not None:
            found.add(seq, entry.endpoint, *difference)
    outlines = [(seq, Outline.of(entry)) for seq, entry in entries]
    outlines += [(r.seq, r.outline) for r in redactions]
    _check_coverage(sorted(outlines, key=lambda o: o[0]), events, found)
    return DecisionReplay(
        entries=total,
        decisions=len(entries) - appends,
        appends=appends,
        replayed=len(entries),
        different=found.count,
        chain=chain,
        differences=tuple(found.shown),
        erased=len(redactions),
        changed_by_erasure=changed,
    )


def _erasure_reach(events: Sequence[Event]) -> EntryMatcher:
    """The facts, experiences and keys an erasure of the log reaches: each erased fact (named
    by an erase event, or asserted with no value), and, to a fixed point, each fact depending
    on one reached, each fact of a key reached (an erased fact no longer outranks or
    supersedes in precedence) and each experience using a fact reached."""
    erased = {item.fact for event in events if isinstance(event, Erase) for item in event.erased}
    asserts = [event for event in events if isinstance(event, Assert)]
    facts = erased | {a.fact for a in asserts if a.value is None}
    keys: set[str] = set()
    grown = True
    while grown:
        size = len(facts) + len(keys)
        for a in asserts:
            if a.fact in facts or a.key in keys or any(f in facts for f in a.depends_on or ()):
                facts.add(a.fact)
                keys.add(a.key)
        grown = len(facts) + len(keys) != size
    uses = {e.experience for e in events if isinstance(e, Experience) and facts.intersection(e.uses or ())}
    return EntryMatcher(facts=sorted(facts | keys | uses), values=())


class _Differences:
    """Every difference counted, the first ``limit`` by seq kept."""

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self.shown: list[Difference] = []

    def add(self, seq: int, endpoint: str, field: str, recorded: Any, replayed: Any) -> None:
        self.count += 1
        if len(self.shown) == self.limit and seq > self.shown[-1].seq:
            return
        item = Difference(seq=seq, endpoint=endpoint, field=field,
                          recorded=_show(recorded), replayed=_show(replayed))  # fmt: skip
        bisect.insort(self.shown, item, key=lambda d: d.seq)
        del self.shown[self.limit :]


def _check_log(state: EngineState, entry: DecisionEntry, key: bytes | None) -> Found | None:
    """The log the entry saw is the store's prefix: same root at its position, the token
    returned made from it (when the log keeps its token key), same policy."""
    root = state.tree_head.root
    if entry.root != root:
        return "root", entry.root, root
    if key is not None:
        token = FreshnessToken.make(key, entry.position, root).encode()
        if entry.token != token:
            return "token", entry.token, token
    if entry.policy != state.policy.digest:
        return "policy", entry.policy, state.policy.digest
    return None


def _check_decision(
    state: EngineState, entry: DecisionEntry, handlers: Mapping[str, Handler], refusal: Refusal
) -> Found | None:
    """The handler run again as the recorded caller at the recorded time: same status and body."""
    handler = handlers.get(entry.endpoint)
    if handler is None:
        return "endpoint", entry.endpoint, "no handler of that name"
    try:
        caller = Caller(name=entry.caller, actor=normal_actor(entry.actor, state.policy),
                        auditor=entry.auditor)  # fmt: skip
        recorded_at = parse_at(entry.at)
    except InputError as exc:
        return (exc.field or "actor"), "", f"unreadable: {exc}"
    body: dict[str, Any] | None
    try:
        at = request_time(entry.endpoint, caller, entry.request, recorded_at)
        status, body = 200, handler(state, caller, at, entry.request)
    except (InputError, Forbidden) as exc:
        status, body = refusal(exc)
    except Exception as exc:  # noqa: BLE001 - a handler's failure is this entry's difference
        return "status", entry.status, f"{type(exc).__name__}: {exc}"
    if status != entry.status:
        return "status", entry.status, status
    if body is None:
        return None
    return _first_difference(entry.response, body, "response")


def _check_append(
    entry: DecisionEntry, events: Sequence[Event], ids: Mapping[str, int], state: EngineState
) -> Found | None:
    """A write the server took (2xx) stored each of its events at or before its position, each
    as written: a field the request left out (``ts``, stamped by the store; a committed
    value's ``salt``) is the stored one. Events are compared as lines (``event_line``: a
    committed value with its salt); an erased value cannot be compared, the rest of its
    event is (``_ERASED`` when that is all that differs)."""
    if not 200 <= entry.status < 300:
        return None  # a refused write: the status is what was answered; nothing was stored
    items = entry.request.get("events")
    if not isinstance(items, list):
        return "request.events", items, "not a list of events"
    try:
        objects = [obj for _, obj in read_objects(items, source="request.events")]
    except InputError as exc:
        return "request.events", "", f"unreadable: {exc}"
    assigned = entry.response.get("assigned")
    if isinstance(assigned, list) and len(assigned) == len(objects):
        objects = [{**obj, **ids} if isinstance(ids, dict) else obj
                   for obj, ids in zip(objects, assigned, strict=True)]
    erased = False
    for i, obj in enumerate(objects):
        where = f"request.events[{i}]"
        event_id = obj.get("id") if isinstance(obj, dict) else None
        position = ids.get(event_id) if isinstance(event_id, str) else None
        if position is None or position > entry.position:
            return where, event_id, f"not stored by position {entry.position}"
        stored_text = event_line(events[position - 1])
        stored = orjson.loads(stored_text)
        merged = {**stored, **obj}
        if "commitment" in stored and "value" not in stored:  # erased since: all but the value
            erased = True
            merged = {name: item for name, item in merged.items() if name not in ("value", "salt")}
        elif "salt" in merged:
            merged.pop("commitment", None)  # made again from the value written and the salt
        try:
            written = event_line(read_object(merged, policy=state.policy, source=None, line=None,
                                             keep_text=False))
        except InputError as exc:
            return where, obj, f"unreadable: {exc}"
        if written != stored_text:
            mine, theirs = ({name: item for name, item in orjson.loads(text).items() if name != "commitment"}
                            for text in (written, stored_text))  # fmt: skip
            return _first_difference(mine, theirs, where) or (where, written, stored_text)
    return _ERASED if erased else None


def _check_coverage(
    rows: Sequence[tuple[int, Outline]], events: Sequence[Event], found: _Differences
) -> None:
    """Every event the store holds after the log's first recorded position, up to its last,
    was appended by exactly one write the server took (a redacted one by its outline): one
    stored another way (or by a write whose row was lost) is a difference, reported at the
    first row that saw it. An erase event is the host's (``gamma erase``), never a write of
    the server's: unclaimed, it is no difference."""
    if not rows:
        return
    ranges: list[tuple[int, int, int]] = []  # a write's seq, first and last position appended
    start = min(outline.position for _, outline in rows)
    for seq, outline in rows:
        appended = outline.appended
        if outline.endpoint == APPEND and 200 <= outline.status < 300 and appended is not None:
            ranges.append((seq, outline.position - appended + 1, outline.position))
            start = min(start, outline.position - appended)
    end = min(len(events), max(outline.position for _, outline in rows))
    counts = [0] * (end + 1)
    writer = [0] * (end + 1)  # the seq of the last write row that covered each position
    for seq, first, last in ranges:
        for position in range(max(first, 1), min(last, end) + 1):
            counts[position] += 1
            writer[position] = max(writer[position], seq)
    by_position = sorted(rows, key=lambda r: (r[1].position, r[0]))
    seen = [outline.position for _, outline in by_position]
    by_seq = dict(rows)
    for position in range(max(start, 0) + 1, end + 1):
        if counts[position] == 1 or not counts[position] and isinstance(events[position - 1], Erase):
            continue
        if counts[position]:  # a second row claims it: reported at the last claimant
            seq, outline = writer[position], by_seq[writer[position]]
        else:
            seq, outline = by_position[bisect.bisect_left(seen, position)]
        found.add(seq, outline.endpoint, "coverage", f"{counts[position]} write rows",
                  f"event {position} ({events[position - 1].id}) is stored")


def _first_difference(recorded: Any, replayed: Any, path: str) -> Found | None:
    """The first place (a dotted path, ``[i]`` for list items) where two JSON values differ."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for name in sorted(set(recorded) | set(replayed)):
            if name not in recorded or name not in replayed:
                return f"{path}.{name}", recorded.get(name, "(absent)"), replayed.get(name, "(absent)")
            found = _first_difference(recorded[name], replayed[name], f"{path}.{name}")
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(replayed, list):
        for i, (a, b) in enumerate(zip(recorded, replayed, strict=False)):
            found = _first_difference(a, b, f"{path}[{i}]")
            if found is not None:
                return found
        if len(recorded) != len(replayed):
            return f"{path}.length", len(recorded), len(replayed)
        return None
    if canonical_bytes(recorded) != canonical_bytes(replayed):
        return path, recorded, replayed
    return None


def _show(value: Any) -> str:
    """A value as canonical JSON, cut to a readable length (a str as it is)."""
    text = value if isinstance(value, str) else canonical_text(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"
