"""The append-only event store: one SQLite file, a hash chain, appends validated by index.

Every append runs in one ``BEGIN IMMEDIATE`` transaction, so a batch is
stored whole or not at all and concurrent writers queue for the lock (up to
``BUSY_TIMEOUT`` seconds, then ``StoreBusyError``). The store is the only part
of gamma that reads the clock: an event appended without ``ts`` is stamped
with max(now, the head's ``ts``). Rows keep the canonical body, the head
before and after it (and the keyed head), plus lookup columns so that an
append checks ids and references with indexed queries instead of re-reading
the log. Triggers refuse UPDATE and DELETE on every table.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, Self

import attrs
import cattrs
import orjson
from sqlite_utils import Database

from gamma.core.canonical import canonical_json, format_ts
from gamma.core.chain import GENESIS_HEX, keyed_step, step
from gamma.core.convert import converter
from gamma.core.errors import InputError, IntegrityError, StoreBusyError, StoreError
from gamma.core.events import (
    LogIndex,
    MemoryIndex,
    batch_objects,
    canonical_event,
    event_from_json,
    validate_log,
)
from gamma.core.fastpath import fast_event
from gamma.core.model import EVENT_TYPES, Event, Experience
from gamma.core.parsed import ParsedLog
from gamma.core.policy import DEFAULT_POLICY, Policy
from gamma.storage.migrations import LATEST, current_version, from_micros, migrate, ts_micros
from gamma.storage.readonly import read_only_connection
from gamma.storage.seal import KEYED_SEAL, seal_problem, seal_rows
from gamma.storage.tree import StoredTree, TreeHead, tree_rows
from gamma.storage.verify import ChainRow, SqlRowLookup, VerifyReport, check_head, check_rows

__all__ = ["check_stored", "BUSY_TIMEOUT", "MIN_KEY_BYTES", "SQLITE_HEADER", "AppendResult", "Store", "check_key", "is_store"]

SQLITE_HEADER = b"SQLite format 3\x00"


def is_store(path: str | Path) -> bool:
    """Whether ``path`` is an SQLite file (a store), by its 16-byte header."""
    try:
        with open(path, "rb") as handle:
            return handle.read(16) == SQLITE_HEADER
    except OSError:
        return False

BUSY_TIMEOUT = 10.0
"""Seconds a command waits for another writer's lock before giving up (StoreBusyError, exit 3)."""

MIN_KEY_BYTES = 16
FORMAT = "gamma-store"
_COLUMNS = list(ChainRow._fields)
_SELECT = ", ".join(_COLUMNS)
_READ = "position, body, prev_head, head"
_PLACEHOLDER_TS = "1970-01-01T00:00:00Z"  # stands in for an omitted ts until the store stamps it
_KEY_CHECK = b"gamma store key check"
_LOOKUP_CHUNK = 500

Appendable = str | Mapping[str, Any] | Event


class _Parsed(NamedTuple):
    line: int
    event: Event
    unstamped: dict[str, Any] | None  # the written object, when the store must stamp its ts


@attrs.frozen
class AppendResult:
    """What an append did: events newly stored, events in the store now, and its head."""

    appended: int
    events: int
    head: str

    def to_dict(self) -> dict[str, Any]:
        return {"appended": self.appended, "events": self.events, "head": self.head}


def check_key(key: bytes) -> bytes:
    """A chain key: surrounding whitespace stripped, at least MIN_KEY_BYTES bytes."""
    stripped = key.strip()
    if len(stripped) < MIN_KEY_BYTES:
        raise InputError(
            f"a chain key needs at least {MIN_KEY_BYTES} bytes, got {len(stripped)}", field="key"
        )
    return stripped


def _key_check(key: bytes) -> str:
    return hmac.new(key, _KEY_CHECK, hashlib.sha256).hexdigest()


def _translate(exc: sqlite3.Error, path: Path) -> Exception:
    """Storage errors become gamma errors where they occur."""
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return StoreBusyError(
            f"{path}: another writer held the store's lock for more than the busy timeout ({text})"
        )
    return StoreError(f"{path}: {text}")


class _SqlIndex:
    """The LogIndex of gamma.core.events answered by indexed queries on the events table."""

    def __init__(self, db: Database, last_ts: datetime | None) -> None:
        self._db = db
        self._last_ts = last_ts

    def has_event(self, event_id: str) -> bool:
        return (
            self._db.execute("SELECT 1 FROM events WHERE id = ?", [event_id]).fetchone() is not None
        )

    def fact_tenant(self, fact_id: str) -> str | None:
        row = self._db.execute(
            "SELECT tenant FROM events WHERE type = 'assert' AND fact = ?", [fact_id]
        ).fetchone()
        return None if row is None else str(row[0])

    def has_experience(self, experience_id: str) -> bool:
        query = "SELECT 1 FROM events WHERE type = 'experience' AND experience = ?"
        return self._db.execute(query, [experience_id]).fetchone() is not None

    def last_ts(self) -> datetime | None:
        return self._last_ts


class Store:
    """An open store; use ``Store.init`` or ``Store.open`` (both context managers)."""

    def __init__(self, db: Database, path: Path, *, key: bytes | None, read_only: bool = False) -> None:
        self._db = db
        self.path = path
        self._key = key
        self.read_only = read_only
        self._closed = False
        try:
            rows = db.execute("SELECT name, value FROM store_meta").fetchall()
        except sqlite3.Error as exc:
            raise _translate(exc, path) from exc
        self._meta = {str(name): str(value) for name, value in rows}
        if self._meta.get("format") != FORMAT:
            raise StoreError(f"{path}: not a gamma store (no format record)")
        self._policy: Policy | None = None

    # -- opening and closing -------------------------------------------------------------

    @classmethod
    def init(
        cls,
        path: str | Path,
        *,
        policy: Policy | None = None,
        key: bytes | None = None,
        busy_timeout: float | None = None,
    ) -> Store:
        """Create a store in a new or empty file, recording its policy and whether it is keyed."""
        path = Path(path)
        key = check_key(key) if key is not None else None
        for candidate in (path, Path(f"{path}-wal")):
            if candidate.exists() and (candidate.is_dir() or candidate.stat().st_size > 0):
                raise InputError(
                    "refusing to initialise: the file exists and is not empty",
                    source=str(candidate),
                )
        policy = policy or DEFAULT_POLICY
        meta = {
            "format": FORMAT,
            "policy": canonical_json(policy.to_dict()),
            "policy_digest": policy.digest,
            "keyed": "true" if key is not None else "false",
        }
        if key is not None:
            meta["key_check"] = _key_check(key)
        meta.update(seal_rows(meta, key))

        def create(db: Database) -> None:
            db.enable_wal()
            with _write(db, path):
                if current_version(db) != 0:
                    raise InputError("refusing to initialise: already a store", source=str(path))
                migrate(db)
                rows = [{"name": k, "value": v} for k, v in sorted(meta.items())]
                db.table("store_meta").insert_all(rows)

        return cls._start(path, key, busy_timeout, create)

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        key: bytes | None = None,
        busy_timeout: float | None = None,
        read_only: bool = False,
    ) -> Store:
        """Open an existing store, applying pending schema migrations.

        ``read_only`` is for reading commands (SPEC §9.6): the file is opened with SQLite's
        ``mode=ro`` (``immutable=1`` on read-only media when no WAL is beside it), nothing is
        migrated or checkpointed, and the store file and its WAL keep their bytes.
        """
        path = Path(path)
        key = check_key(key) if key is not None else None
        if not path.is_file():
            raise InputError("no such store", source=str(path))
        if not is_store(path):
            raise InputError("not a gamma store (no SQLite header)", source=str(path))

        def upgrade(db: Database) -> None:
            version = current_version(db)
            if version == 0:
                raise StoreError(f"{path}: not a gamma store (no schema)")
            if read_only:
                if version > LATEST:
                    raise StoreError(f"{path}: store schema version {version} is newer than this"
                                     f" gamma knows ({LATEST}): upgrade gamma")
                return  # an older schema is read as it is; the next writer migrates it
            if version != LATEST:
                with _write(db, path):
                    migrate(db)
            if db.journal_mode != "wal":
                db.enable_wal()

        return cls._start(path, key, busy_timeout, upgrade, read_only=read_only)

    @classmethod
    def _start(
        cls,
        path: Path,
        key: bytes | None,
        timeout: float | None,
        setup: Callable[[Database], None],
        *,
        read_only: bool = False,
    ) -> Store:
        """Connect (WAL, synchronous=FULL, busy timeout), run ``setup``, close on any failure."""
        db: Database | None = None
        try:
            timeout = BUSY_TIMEOUT if timeout is None else timeout
            if read_only:
                conn = read_only_connection(path, timeout)
            else:
                conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None)
            db = Database(conn, recursive_triggers=False, execute_plugins=False)
            db.execute("PRAGMA synchronous=FULL")
            setup(db)
            return cls(db, path, key=key, read_only=read_only)
        except BaseException as exc:
            if db is not None:
                db.close()
            if isinstance(exc, sqlite3.Error):
                raise _translate(exc, path) from exc
            raise

    def close(self) -> None:
        """Checkpoint the WAL into the file (a copied .db alone then holds every commit), close."""
        if self._closed:
            return
        self._closed = True
        if self.read_only:  # a reader never checkpoints: the file and its WAL keep their bytes
            self._db.close()
            return
        try:
            self._db.execute("PRAGMA busy_timeout = 200")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # best effort: commits are durable in the WAL; the last connection folds it in
        finally:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- what the store holds ------------------------------------------------------------

    @property
    def policy(self) -> Policy:
        """The policy recorded at ``init``; appends are validated against it."""
        if self._policy is None:
            try:
                self._policy = Policy.from_dict(json.loads(self._meta["policy"]), source=str(self.path))
            except (KeyError, TypeError, ValueError) as exc:
                raise StoreError(
                    f"{self.path}: the recorded policy is unreadable ({exc})"
                ) from None
        return self._policy

    @property
    def keyed(self) -> bool:
        """Whether the store says it keeps a keyed chain (verify never relies on this)."""
        return self._meta.get("keyed") == "true"

    def head(self) -> str:
        """The plain chain head after the last event (64 zeros when empty)."""
        row = self._query("SELECT head FROM events ORDER BY position DESC LIMIT 1").fetchone()
        return GENESIS_HEX if row is None else str(row[0])

    def tree(self, size: int | None = None) -> StoredTree:
        """The Merkle tree of the first ``size`` events (all of them by default), read lazily."""
        total = len(self)
        size = total if size is None else size
        if not 0 <= size <= total:
            raise InputError(f"no tree of size {size}: the store has {total} events", field="size")
        return StoredTree(self._db, size)

    def tree_head(self, size: int | None = None) -> TreeHead:
        """The Merkle tree head ``(size, root)`` of the first ``size`` events."""
        return self.tree(size).head()

    def position_of(self, event_id: str) -> int | None:
        """The 1-based position of the event with id ``event_id``, if stored."""
        row = self._query("SELECT position FROM events WHERE id = ?", [event_id]).fetchone()
        return None if row is None else int(row[0])

    def __len__(self) -> int:
        row = self._query("SELECT coalesce(max(position), 0) FROM events").fetchone()
        return int(row[0])

    def events(
        self,
        *,
        since: int = 0,
        until: datetime | None = None,
        index: LogIndex | None = None,
    ) -> tuple[Event, ...]:
        """The stored events after position ``since``, in order (those with ``ts <= until`` when given).

        Rows were validated when appended, so they are not validated or
        re-serialised again: each event keeps its stored canonical body. What
        a reader relies on is re-checked cheaply (``check_stored``): positions
        without gaps, each row's link to the one before and its body hashing
        to its head, and ids and references against ``index`` (a fresh one
        when reading from the start). A failure is an IntegrityError naming
        the position.
        """
        events, _ = self.read(since=since, until=until, index=index)
        # read from the start and re-checked as a whole: a valid log (gamma.core.parsed)
        return ParsedLog(events) if since == 0 and index is None else tuple(events)

    def read(
        self,
        *,
        since: int = 0,
        until: datetime | None = None,
        prev: str | None = None,
        index: LogIndex | None = None,
    ) -> tuple[list[Event], list[bytes]]:
        """``events`` with the chain head after each; ``prev`` is the head the reader holds
        at ``since`` (by default the stored one), so a rewritten history is caught too."""
        with self._snapshot():
            if prev is None:
                prev = self._head_at(since)
            sql, args = f"SELECT {_READ} FROM events WHERE position > ?", [since]
            if until is not None:
                sql, args = sql + " AND ts_us <= ?", [since, ts_micros(until)]
            rows = self._query(sql + " ORDER BY position", args).fetchall()
        if index is None and since == 0:
            index = MemoryIndex()
        return check_stored(rows, since=since, prev=prev, index=index, source=str(self.path))

    def _head_at(self, position: int) -> str:
        """The stored head after ``position`` (64 zeros for 0)."""
        if position == 0:
            return GENESIS_HEX
        row = self._query("SELECT head FROM events WHERE position = ?", [position]).fetchone()
        if row is None:
            raise IntegrityError(f"{self.path}: position {position} is not in the store")
        return str(row[0])

    def export(self) -> Iterator[str]:
        """The canonical JSON of every event, in order, one string per line (no newline)."""
        for (body,) in self._query("SELECT body FROM events ORDER BY position"):
            yield str(body)

    def slice(
        self,
        *,
        tenant: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Iterator[str]:
        """Canonical lines of one tenant and/or a ``ts`` range (both bounds inclusive)."""
        bounds = [
            ("tenant = ?", tenant),
            ("ts_us >= ?", None if since is None else ts_micros(since)),
            ("ts_us <= ?", None if until is None else ts_micros(until)),
        ]
        where = [(test, value) for test, value in bounds if value is not None]
        sql = " AND ".join(["SELECT body FROM events WHERE 1"] + [test for test, _ in where])
        for (body,) in self._query(sql + " ORDER BY position", [value for _, value in where]):
            yield str(body)

    def verify(
        self,
        *,
        key: bytes | None = None,
        expect_head: str | None = None,
        expect_prefix: str | None = None,
        expect_policy: str | None = None,
    ) -> VerifyReport:
        """Check every row's links and hashes (and the keyed chain when a key is given), then the
        sealed metadata (gamma.storage.seal): the policy's digest, its seal, its keyed seal
        with a key, and with ``expect_policy`` the digest a resolution or record names."""
        key = check_key(key) if key is not None else self._key
        policy = check_head(expect_policy, field="expect_policy")
        with self._snapshot():
            meta = self._read_meta()
            rows = (
                ChainRow(*row)
                for row in self._query(f"SELECT {_SELECT} FROM events ORDER BY position")
            )
            report = check_rows(
                rows,
                source=str(self.path),
                lookup=SqlRowLookup(self._db),
                key=key,
                expect_head=expect_head,
                expect_prefix=expect_prefix,
            )
        sealed = seal_problem(meta, key)
        if sealed is None and policy is not None and meta.get("policy_digest") != policy:
            sealed = (f"the recorded policy is {meta.get('policy_digest')}, not the expected"
                      f" {policy}: the store's policy was changed")
        if report.ok and sealed is not None:
            report = attrs.evolve(report, ok=False, kind="policy_changed", detail=sealed)
        if key is None and self.keyed:
            note = "the store says it is keyed; only a key you bring checks the keyed chain"
            report = attrs.evolve(report, note=note)
        elif key is not None:  # lets the report tell a wrong key from a rewrite
            matches = hmac.compare_digest(_key_check(key), self._meta.get("key_check", ""))
            report = attrs.evolve(report, store_keyed=self.keyed, key_matches=matches)
        return report

    # -- appending -----------------------------------------------------------------------

    def append(
        self,
        lines_or_events: Iterable[Appendable] | str,
        *,
        now: datetime | None = None,
        source: str | None = None,
    ) -> AppendResult:
        """Validate and store a batch: all of it or none of it.

        Items are JSONL lines (a str is split into lines), decoded objects or
        events. An event byte-identical to a stored one is skipped (an event
        without ``ts`` is compared with the stored one's ``ts`` filled in), so
        a writer that died after commit can retry; the same id with other
        content is a DuplicateIdError (field ``id``). ``now`` stands in for the
        clock in tests. Errors name the first bad line of ``source``.
        """
        source = source or "<append>"
        if self.read_only:
            raise StoreError(f"{self.path}: the store was opened read-only")
        key = self._append_key()
        if now is not None and now.utcoffset() is None:
            raise InputError("now must carry a time zone", field="now")
        parsed = self._parse(lines_or_events, source)
        with _write(self._db, self.path):
            last = self._db.execute(
                "SELECT position, head, keyed_head, ts_us FROM events ORDER BY position DESC LIMIT 1"
            ).fetchone()
            position, head, keyed_head, last_ts = (
                (0, GENESIS_HEX, GENESIS_HEX, None)
                if last is None
                else (int(last[0]), str(last[1]), str(last[2] or GENESIS_HEX), from_micros(last[3]))
            )
            clock = (now or datetime.now(UTC)).astimezone(UTC)
            pending = self._new_events(parsed, last_ts, clock, source)
            checked = [(line, event) for line, event, _ in pending]
            validate_log(checked, index=_SqlIndex(self._db, last_ts), source=source)
            self._seal_keyed(key)
            rows: list[list[Any]] = []
            prev, keyed_prev = bytes.fromhex(head), bytes.fromhex(keyed_head)
            for _, event, canonical in pending:
                position += 1
                current = step(prev, canonical)
                keyed_now = keyed_step(key, keyed_prev, canonical) if key is not None else None
                rows.append(_row(position, event, canonical, prev.hex(), current.hex(), keyed_now))
                prev, keyed_prev = current, keyed_now or keyed_prev
            if rows:
                self._db.table("events").insert_all(iter([_COLUMNS, *rows]), batch_size=500)
                compact = StoredTree(self._db, position - len(rows)).compact()
                grown = tree_rows(compact, (canonical for _, _, canonical in pending))
                self._db.table("tree").insert_all(iter([["position", "hashes"], *grown]), batch_size=500)
        return AppendResult(appended=len(rows), events=position, head=prev.hex())

    def _read_meta(self) -> dict[str, str]:
        rows = self._query("SELECT name, value FROM store_meta").fetchall()
        return {str(name): str(value) for name, value in rows}

    def _seal_keyed(self, key: bytes | None) -> None:
        """A keyed store migrated from before the seal gets its keyed seal from the first keyed
        append (the migration had no key); inside the append's write transaction."""
        if key is None or KEYED_SEAL in self._meta:
            return
        meta = self._read_meta()
        if KEYED_SEAL not in meta and seal_problem(meta, None) is None:
            meta[KEYED_SEAL] = seal_rows(meta, key)[KEYED_SEAL]
            self._db.table("store_meta").insert({"name": KEYED_SEAL, "value": meta[KEYED_SEAL]})
        self._meta = meta

    def _append_key(self) -> bytes | None:
        """The key that extends the keyed chain; a wrong or missing key is refused up front."""
        if not self.keyed:
            if self._key is not None:
                raise StoreError(
                    f"{self.path}: a key was given but the store was initialised without one"
                )
            return None
        if self._key is None:
            raise StoreError(
                f"{self.path}: the store is keyed: give its key"
            )
        if not hmac.compare_digest(_key_check(self._key), self._meta.get("key_check", "")):
            raise StoreError(f"{self.path}: the key is not the one this store was initialised with")
        return self._key

    def _parse(self, items: Iterable[Appendable] | str, source: str) -> list[_Parsed]:
        """Decode and check each item; an object without ts is kept for the store to stamp."""
        policy = self.policy
        parsed = []
        for number, obj, _ in batch_objects(items, source=source):
            unstamped = obj if isinstance(obj, dict) and "ts" not in obj else None
            if unstamped is not None:  # checked now with a stand-in ts, stamped under the lock
                obj = {**obj, "ts": _PLACEHOLDER_TS}
            event = event_from_json(obj, policy=policy, source=source, line=number)
            parsed.append(_Parsed(number, event, unstamped))
        return parsed

    def _new_events(
        self, parsed: list[_Parsed], last_ts: datetime | None, clock: datetime, source: str
    ) -> list[tuple[int | None, Event, str]]:
        """Stamp missing ts and drop events identical to stored (or earlier) ones.

        An id reused with other content stays in the batch, so that
        validate_log reports it in line order with every other error.
        """
        stored = self._stored({item.event.id for item in parsed})
        pending: list[tuple[int | None, Event, str]] = []
        floor = last_ts
        horizon = clock + timedelta(seconds=self.policy.clock_skew_seconds)
        for line, event, unstamped in parsed:
            # only a stored event is skipped: a batch repeating one of its own events is
            # refused (validate_log: duplicate id), as a JSONL file repeating a line is
            earlier = stored.get(event.id)
            if unstamped is not None:
                if earlier:
                    ts = earlier[1]
                elif floor is not None and floor > clock:
                    raise InputError(
                        f"the log's last event is stamped {format_ts(floor)}, ahead of the"
                        f" store's clock ({format_ts(clock)}): an event is never stamped ahead"
                        " of the clock; give its ts",
                        source=source, line=line, field="ts",
                    )
                else:
                    ts = clock if floor is None else max(clock, floor)
                stamped = {**unstamped, "ts": format_ts(ts)}
                event = event_from_json(stamped, policy=self.policy, source=source, line=line)
            canonical = canonical_event(event)
            if earlier is not None and canonical == earlier[0]:
                continue
            if event.ts > horizon:
                raise InputError(
                    f"ts {format_ts(event.ts)} is more than {self.policy.clock_skew_seconds} s"
                    f" ahead of the store's clock ({format_ts(clock)})",
                    source=source, line=line, field="ts",
                )
            pending.append((line, event, canonical))
            floor = event.ts
        return pending

    def _stored(self, ids: set[str]) -> dict[str, tuple[str, datetime]]:
        """Bodies and ts of the stored events among ``ids``, in a few indexed queries."""
        found: dict[str, tuple[str, datetime]] = {}
        wanted = sorted(ids)
        for start in range(0, len(wanted), _LOOKUP_CHUNK):
            chunk = wanted[start : start + _LOOKUP_CHUNK]
            marks = ",".join("?" * len(chunk))
            for event_id, body, ts_us in self._db.execute(
                f"SELECT id, body, ts_us FROM events WHERE id IN ({marks})", chunk
            ):
                found[str(event_id)] = (str(body), from_micros(ts_us))
        return found

    # -- plumbing ------------------------------------------------------------------------

    def _query(self, sql: str, args: list[Any] | None = None) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, args or [])
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One read transaction, so every query sees the same log while writers go on."""
        self._query("BEGIN")
        try:
            yield
        finally:
            self._db.rollback()


def check_stored(
    rows: Iterable[Sequence[Any]],
    *,
    since: int,
    prev: str,
    index: LogIndex | None,
    source: str,
) -> tuple[list[Event], list[bytes]]:
    """Events from stored ``(position, body, prev_head, head)`` rows, and the head after each.

    The cheap checks a reader owes the rows it relies on: consecutive
    positions from ``since + 1``, each row linked to the head before it and
    its body hashing to its head, a body that is an event, and (with
    ``index``, what was read before) unique ids, known references and ``ts``
    order. The first failure is an IntegrityError naming its position.
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
        current = step(previous, body)
        if current.hex() != head:
            raise broken("its body does not hash to its head (edited)")
        events.append(_stored_event(body, broken))
        heads.append(current)
        previous = current
        expected += 1
    if index is not None:
        try:
            validate_log(((since + 1 + i, e) for i, e in enumerate(events)), index=index)
        except InputError as exc:
            raise IntegrityError(
                f"{source}: position {exc.line}: a stored event breaks the log ({exc.message})"
            ) from None
    return events, heads


def _stored_event(body: str, broken: Callable[[str], IntegrityError]) -> Event:
    """The event of a stored canonical body, keeping the body as its canonical text."""
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


def _row(
    position: int, event: Event, canonical: str, prev: str, head: str, keyed: bytes | None
) -> list[Any]:
    return [
        position,
        event.id,
        event.TYPE,
        event.tenant,
        ts_micros(event.ts),
        getattr(event, "fact", None),
        getattr(event, "key", None),
        event.experience if isinstance(event, Experience) else None,
        canonical,
        prev,
        head,
        keyed.hex() if keyed is not None else None,
    ]


@contextmanager
def _write(db: Database, path: Path) -> Iterator[None]:
    """One write transaction taken with BEGIN IMMEDIATE: the lock first, then the reads."""
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise _translate(exc, path) from exc
    try:
        yield
        db.execute("COMMIT")
    except sqlite3.Error as exc:
        db.rollback()
        raise _translate(exc, path) from exc
    except BaseException:
        db.rollback()
        raise
