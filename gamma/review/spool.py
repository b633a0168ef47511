"""The partitioning pass: the log streamed once, each tenant's events spooled to its own file.

The parent never holds the parsed log. Each line is decoded, its canonical text
computed (the bytes the chain covers) and spooled as ``POSITION LINE CANONICAL``, in
chunks of one tenant each, to one spool file; the whole log's chain and tree heads are taken at the
positions the jobs need. The checks that span tenants (``ts`` order, unique event,
fact and experience ids) run here; everything else is checked by the worker that
parses the partition (``gamma.review.tasks``), naming the same source and line. Every
tenant's every line is spooled, also those no job resolves (a tenant with nothing to
review, events after the review's time), so the whole log is held to SPEC §2 as
``gamma resolve`` holds it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

import attrs

from gamma.core.integrity.commitment import chain_object
from gamma.core.integrity.heads import Heads
from gamma.core.integrity.merkle import TreeHead
from gamma.core.reading.events import EMPTY_FILE, canonical_event, event_line
from gamma.core.reading.reader import read_line
from gamma.core.reading.schema import STAMPED
from gamma.core.terms.canonical import compact_json, format_ts, parse_ts
from gamma.core.terms.errors import (
    DuplicateIdError,
    InputError,
    IntegrityError,
    JSONSyntaxError,
    LimitError,
    TimestampOrderError,
)
from gamma.core.terms.limits import MAX_LINE_BYTES
from gamma.core.terms.model import Event
from gamma.core.terms.policy import DEFAULT_POLICY, Policy
from gamma.storage.store import Store, is_store

__all__ = ["Split", "split", "Log", "LogLike", "open_source", "tenant_file"]

#: a path (a JSONL file or a store), or the log itself as JSON lines or events
LogLike = str | Path | Iterable[str | Event]
_FLUSH_BYTES = 16 << 20  # spool buffers are written out past this many bytes


class _Line(NamedTuple):
    """One event as the pass sees it: where it is, the little it needs of it, and its text."""

    line: int
    id: str
    tenant: str
    ts: datetime
    canonical: str
    kind: str | None
    unique: str | None  # the fact id of an assert, the experience id of an experience
    text: str  # what the worker parses: the line as written (or the canonical text)


@attrs.frozen
class Log:
    """A log to stream: its lines, the policy to read it under, and (a store) its heads."""

    lines: Iterator[_Line]
    policy: Policy
    source: str | None
    store: Store | None = None
    store_policy: Policy | None = None


def tenant_file(tenant: str) -> str:
    """A tenant's file name (percent-encoded, so any tenant name is one safe name)."""
    return quote(tenant, safe="") + ".jsonl"


def _instant(value: Any) -> tuple[datetime, str]:
    """A timestamp and its canonical text; the common canonical whole-second form
    (``YYYY-MM-DDTHH:MM:SSZ``) without the general parser, which gives the same instant."""
    if isinstance(value, str) and len(value) == 20 and value[19] == "Z" and value[10] == "T":
        if value[4] == value[7] == "-" and value[13] == value[16] == ":" and value.isascii():
            try:
                return datetime.fromisoformat(value), value
            except ValueError:
                pass
    instant = parse_ts(value)
    return instant, format_ts(instant)


def _from_object(
    text: str, line: int, policy: Policy, source: str | None, *, chain: str | None = None
) -> _Line:
    """The pass's view of one line (strict decoding and every per-event check are the
    worker's); a line this cannot read is decoded and parsed in full for its error.
    ``chain``: the event's chain bytes, known already (a store's body); else they are the
    line's canonical JSON, for a committed value without its value and salt (SPEC §21)."""
    try:
        body = json.loads(text)
        ts = None
        for name in STAMPED:
            if name in body:
                instant, body[name] = _instant(body[name])
                ts = instant if name == "ts" else ts
        event_id, tenant, kind = body["id"], body["tenant"], body.get("type")
        if ts is None or not (isinstance(event_id, str) and isinstance(tenant, str)):
            raise TypeError
        unique = body.get("fact") if kind == "assert" else body.get("experience")
        if chain is None:
            chain = compact_json(chain_object(body) if kind == "assert" else body)
        return _Line(line, event_id, tenant, ts, chain,
                     kind if isinstance(kind, str) else None,
                     unique if isinstance(unique, str) else None, text)  # fmt: skip
    except (TypeError, ValueError, KeyError, AttributeError):
        event = read_line(text, policy=policy, source=source, line=line)  # raises the error
        return _from_event(event, line)


def _from_event(event: Event, line: int) -> _Line:
    kind = type(event).__name__.lower()
    unique = getattr(event, "fact", None) if kind == "assert" else getattr(event, "experience", None)
    return _Line(line, event.id, event.tenant, event.ts, canonical_event(event), kind, unique,
                 event_line(event))


def _file_lines(path: Path, policy: Policy, source: str) -> Iterator[_Line]:
    with open(path, "rb") as handle:
        # one line at a time, none read past the limit (an endless line fails, SPEC §18)
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise LimitError(f"a line of more than {MAX_LINE_BYTES} bytes", source=source,
                                 line=number)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise JSONSyntaxError(f"not UTF-8: {exc.reason} at byte {exc.start}",
                                      source=source, line=number) from None  # fmt: skip
            if text.strip():
                yield _from_object(text.rstrip("\r\n"), number, policy, source)


def _store_lines(store: Store) -> Iterator[_Line]:
    for position, (line, body) in enumerate(store.export_pairs(), start=1):
        yield _from_object(line, position, store.policy, str(store.path), chain=body)


def _given_lines(items: Iterable[str | Event], policy: Policy) -> Iterator[_Line]:
    for number, item in enumerate(items, start=1):
        if isinstance(item, Event):
            yield _from_event(item, number)
        elif item.strip():
            yield _from_object(item.rstrip("\r\n"), number, policy, None)


def open_source(log: LogLike, policy: Policy | None) -> Log:
    """A path (file or store) or given lines/events, and the policy: the one given, else a
    store's own, else the default. A store must be closed by the caller (``Log.store``)."""
    if not isinstance(log, (str, Path)):
        chosen = policy or DEFAULT_POLICY
        return Log(_given_lines(log, chosen), chosen, None)
    path = Path(log)
    if not path.exists():
        raise InputError("no such file", source=str(path))
    if is_store(path):
        store = Store.open(path)
        return Log(_store_lines(store), policy or store.policy, str(path), store, store.policy)
    if path.stat().st_size == 0:
        raise InputError(EMPTY_FILE, source=str(path))
    chosen = policy or DEFAULT_POLICY
    return Log(_file_lines(path, chosen, str(path)), chosen, str(path))


@attrs.frozen
class Split:
    """What the pass found: where each tenant's events lie in the spool, the log's length
    and heads."""

    path: Path
    chunks: dict[str, list[tuple[int, int]]]
    spooled: dict[str, int]
    total: int
    heads: dict[int, tuple[str, TreeHead]]
    upto: dict[datetime, int]


class _Spool:
    """One file; per-tenant buffers appended to it as one chunk each when they grow past a
    bound, so a tenant's events lie in a few ``(offset, length)`` chunks, in log order."""

    def __init__(self, path: Path) -> None:
        self.handle = open(path, "wb")  # noqa: SIM115 (closed by close(), after the pass)
        self.buffers: dict[str, list[str]] = {}
        self.chunks: dict[str, list[tuple[int, int]]] = {}
        self.counts: dict[str, int] = {}
        self.size = 0

    def add(self, tenant: str, text: str) -> None:
        buffer = self.buffers.get(tenant)
        if buffer is None:
            buffer = self.buffers[tenant] = []
            self.chunks[tenant], self.counts[tenant] = [], 0
        buffer.append(text)
        self.counts[tenant] += 1
        self.size += len(text)
        if self.size > _FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        for tenant, buffer in self.buffers.items():
            if buffer:
                data = "".join(buffer).encode("utf-8")
                self.chunks[tenant].append((self.handle.tell(), len(data)))
                self.handle.write(data)
                buffer.clear()
        self.size = 0

    def close(self) -> None:
        self.flush()
        self.handle.close()


def split(
    log: Log,
    root: Path,
    *,
    times: Sequence[datetime] = (),
    counts: Iterable[int] = (),
) -> Split:
    """Stream ``log`` once: spool (in ``root``) every tenant's events; keep the whole log's
    heads after each of ``counts`` and after the events with ``ts <=`` each of ``times``
    (``upto``). Cross-tenant checks raise InputError naming the line.
    """
    path = root / "partitions.spool"
    spool = _Spool(path)
    pending = sorted(set(times))
    wanted = set(counts)
    running = Heads()
    heads: dict[int, tuple[str, TreeHead]] = {}
    upto: dict[datetime, int] = {}
    seen: set[str] = set()
    facts: set[str] = set()
    experiences: set[str] = set()
    last: datetime | None = None
    position = 0

    def keep() -> None:
        heads[position] = (running.log, running.tree)

    if 0 in wanted:
        keep()
    try:
        for item in log.lines:
            if last is not None and item.ts < last:
                raise TimestampOrderError("ts goes backwards along the log", source=log.source,
                                          line=item.line, field="ts")  # fmt: skip
            if item.id in seen:
                raise DuplicateIdError(f"event id {item.id!r} is already used", source=log.source,
                                       line=item.line, field="id")  # fmt: skip
            if item.unique is not None and item.kind in ("assert", "experience"):
                field, ids = ("fact", facts) if item.kind == "assert" else ("experience", experiences)
                if item.unique in ids:
                    done = "asserted" if field == "fact" else "used"
                    raise DuplicateIdError(f"{field} id {item.unique!r} is already {done}",
                                           source=log.source, line=item.line, field=field)  # fmt: skip
                ids.add(item.unique)
            seen.add(item.id)
            last = item.ts
            while pending and item.ts > pending[0]:
                upto[pending.pop(0)] = position
                if position not in heads:
                    keep()
            running.add(item.canonical)
            position += 1
            if position in wanted:
                keep()
            spool.add(item.tenant, f"{position} {item.line} {item.text}\n")
        for time in pending:
            upto[time] = position
            keep()
    finally:
        spool.close()
    if log.store is not None:
        _check_store(log.store, position, running)
    for count in wanted:  # counts past the end of the log have no heads: their jobs say so
        heads.setdefault(count, heads.get(min(count, position), (running.log, running.tree)))
    return Split(path, spool.chunks, spool.counts, position, heads, upto)


def _check_store(store: Store, count: int, running: Heads) -> None:
    """The bodies the pass hashed are the ones the store's chain and tree cover."""
    if count and (store.head() != running.log or store.tree_head() != running.tree):
        raise IntegrityError(
            f"{store.path}: the stored bodies hash to {running.log}, the store's head is"
            f" {store.head()}: run gamma verify"
        )
