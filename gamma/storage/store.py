"""The append-only event store: one SQLite file, a hash chain, appends validated by index.

Every append runs in one ``BEGIN IMMEDIATE`` transaction, so a batch is
stored whole or not at all and concurrent writers queue for the lock (up to
``BUSY_TIMEOUT`` seconds, then ``StoreBusyError``). The store is the only part
of gamma that reads the clock: an event appended without ``ts`` is stamped
with max(now, the head's ``ts``). Rows keep the canonical body, the head
before and after it (and the keyed head), plus lookup columns so that an
append checks ids and references with indexed queries instead of re-reading
the log. Triggers refuse UPDATE and DELETE on every table.

``Store`` is the one public class; its work lives in private modules beside it:
``_opening`` (the file, the connection, the schema, the write lock, SQLite's errors),
``_keys`` (the chain key and the writer's authority), ``_append`` (a batch's semantics:
stamping, skipping what is stored, the clock-skew bound, the chained rows) and ``_read``
(the integrity checks a reader owes the rows it reads).
"""

from __future__ import annotations

import hmac
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import attrs
from sqlite_utils import Database

from gamma.core.integrity.chain import GENESIS_HEX
from gamma.core.integrity.merkle import TreeBuilder
from gamma.core.reading.logcheck import LogIndex, MemoryIndex, validate_log
from gamma.core.reading.parsed import ParsedLog
from gamma.core.terms.canonical import canonical_json
from gamma.core.terms.errors import DuplicateIdError, InputError, IntegrityError, StoreError
from gamma.core.terms.model import Event
from gamma.core.terms.policy import DEFAULT_POLICY, Policy
from gamma.storage._append import (
    COLUMNS,
    SELECTED,
    Appendable,
    Sealed,
    SqlIndex,
    chain_rows,
    check_extendable,
    check_values,
    new_events,
    parse_batch,
    read_tail,
    value_rows,
)
from gamma.storage._keys import MIN_KEY_BYTES, check_key, read_key_file, writer_key
from gamma.storage._keys import key_check as _key_check
from gamma.storage._opening import (
    BUSY_TIMEOUT,
    SQLITE_HEADER,
    STORE_FORMAT,
    connect,
    create_schema,
    hold,
    is_store,
    query,
    read_meta,
    refuse_nonempty,
    release,
    require_file,
    translate,
    upgrade_schema,
    write,
)
from gamma.storage._read import READ, READ_JOINED, check_stored
from gamma.storage.decisions import redact_decisions
from gamma.storage.erasure import (
    EraseResult,
    Selection,
    check_authority,
    checkpoint,
    derived_steps,
    erase_object,
    scrub,
    select,
    vacuum,
    values_of,
)
from gamma.storage.migrations import LATEST, MIGRATIONS, migrate, schema_rows, ts_micros
from gamma.storage.seal import KEYED_SEAL, STORE_KEYED_SEAL, seal_problem, store_seals
from gamma.storage.tree import StoredTree, TreeHead, tree_rows
from gamma.storage.values import (
    COMMITTED,
    JOINED,
    VALUES,
    ValueCheck,
    check_value_rows,
    is_committed,
    line_of,
)
from gamma.storage.verify import (
    ChainRow,
    LogCheck,
    SqlRowLookup,
    TreeCheck,
    VerifyReport,
    check_head,
    check_rows,
    is_chain_problem,
)

__all__ = [
    "BUSY_TIMEOUT",
    "EraseResult",
    "MIN_KEY_BYTES",
    "SQLITE_HEADER",
    "AppendResult",
    "Store",
    "check_key",
    "check_stored",
    "is_store",
    "read_key_file",
    "KEY_ENV",
]

#: The environment variable that holds a keyed store's chain key when no file names it.
KEY_ENV = "GAMMA_CHAIN_KEY"

_VERIFY_CHUNK = 10_000


@attrs.frozen
class AppendResult:
    """What an append did: events newly stored, events in the store now, and its head."""

    appended: int
    events: int
    head: str

    def to_dict(self) -> dict[str, Any]:
        return {"appended": self.appended, "events": self.events, "head": self.head}


class Store:
    """An open store; use ``Store.init`` or ``Store.open`` (both context managers)."""

    def __init__(self, db: Database, path: Path, *, key: bytes | None, read_only: bool = False) -> None:
        self._db = db
        self.path = path
        self._key = key
        self.read_only = read_only
        self._closed = False
        self._held: tuple[int, int] | None = None  # the file marked open (``_opening.hold``)
        self._meta = read_meta(db, path)
        if self._meta.get("format") != STORE_FORMAT:  # it has a schema: its metadata was changed
            raise IntegrityError(f"{path}: store_meta has no format record {STORE_FORMAT!r}: not a gamma"
                                 " store, or its metadata was changed")
        self._policy: Policy | None = None
        self._sealed: Sealed | None = None  # the metadata this writer checked under its seal

    # -- opening and closing -------------------------------------------------------------

    @classmethod
    def init(
        cls,
        path: str | Path,
        *,
        policy: Policy | None = None,
        key: bytes | None = None,
        busy_timeout: float | None = None,
        commit_values: bool = False,
    ) -> Store:
        """Create a store in a new or empty file, recording its policy, whether it is keyed and
        whether it commits to values (``commit_values``, SPEC §21: the chain then hashes each
        value's commitment, so a value can be erased and every proof stays valid)."""
        path = Path(path)
        key = check_key(key) if key is not None else None
        refuse_nonempty(path)
        policy = policy or DEFAULT_POLICY
        meta = {
            "format": STORE_FORMAT,
            "policy": canonical_json(policy.to_dict()),
            "policy_digest": policy.digest,
            "keyed": "true" if key is not None else "false",
        }
        if key is not None:
            meta["key_check"] = _key_check(key)
        if commit_values:
            meta[VALUES] = COMMITTED
        meta.update(store_seals(meta, [(m.version, m.name) for m in MIGRATIONS], key))
        return cls._start(path, key, busy_timeout, lambda db: create_schema(db, path, meta))

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
        require_file(path)
        return cls._start(
            path,
            key,
            busy_timeout,
            lambda db: upgrade_schema(db, path, read_only=read_only),
            read_only=read_only,
        )

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
        held = None
        try:
            timeout = BUSY_TIMEOUT if timeout is None else timeout  # read here: tests patch it
            db = connect(path, timeout, read_only=read_only)
            held = hold(path)  # never read outside SQLite while this connection is open
            db.execute("PRAGMA synchronous=FULL")
            if not read_only:  # a deleted (erased) value is overwritten, not left in a free page
                db.execute("PRAGMA secure_delete=ON")
            setup(db)
            store = cls(db, path, key=key, read_only=read_only)
            store._held = held
            return store
        except BaseException as exc:
            if db is not None:
                db.close()
            release(held)
            if isinstance(exc, sqlite3.Error):
                raise translate(exc, path) from exc
            raise

    def close(self) -> None:
        """Checkpoint the WAL into the file (a copied .db alone then holds every commit), close."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self.read_only:  # a reader never checkpoints: the file and WAL keep their bytes
                self._db.execute("PRAGMA busy_timeout = 200")
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # best effort: commits are durable in the WAL; the last connection folds it in
        finally:
            self._db.close()
            release(self._held)

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

    @property
    def committed(self) -> bool:
        """Whether the store commits to values (``init(commit_values=True)``): its chain hashes
        commitments, and its values can be erased (SPEC §21)."""
        return is_committed(self._meta)

    @property
    def claims_keyed(self) -> bool:
        """Whether anything in the metadata says the store is keyed (the flag or a key check):
        a reader that must not trust a rechained store asks for the key then."""
        return self.keyed or "key_check" in self._meta

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
        if since != 0 or index is not None:
            return tuple(self.read(since=since, until=until, index=index)[0])
        # read from the start and re-checked as a whole: a valid log (gamma.core.reading.parsed), with
        # the chain head its rows were just checked against and the tree over their bodies
        tree = TreeBuilder()
        events, heads = self.read(until=until, tree=tree)
        log = ParsedLog(events)
        log.heads = (heads[-1].hex() if heads else GENESIS_HEX, tree.head())
        return log

    def changes(self) -> tuple[int, int]:
        """What moves whenever the file is committed to: SQLite's ``data_version`` (another
        connection's commits) and this connection's own ``total_changes``. A reader that
        took what was there when they read equal skips its next read (``Engine.refresh``);
        a commit between this and the read is taken by the read and moves them again."""
        version = int(self._query("PRAGMA data_version").fetchone()[0])
        return version, self._db.conn.total_changes

    def read(
        self,
        *,
        since: int = 0,
        until: datetime | None = None,
        prev: str | None = None,
        index: LogIndex | None = None,
        tree: TreeBuilder | None = None,
    ) -> tuple[list[Event], list[bytes]]:
        """``events`` with the chain head after each; ``prev`` is the head the reader holds
        at ``since`` (by default the stored one), so a rewritten history is caught too.
        Each body is added to ``tree`` when one is given."""
        with self._snapshot():
            if prev is None:
                prev = self._head_at(since)
            if self.committed:  # the values joined back (the chain covers their commitments)
                sql, order = f"SELECT {READ_JOINED} {JOINED} WHERE e.position > ?", " ORDER BY e.position"
                until_sql = " AND e.ts_us <= ?"
            else:
                sql, order = f"SELECT {READ} FROM events WHERE position > ?", " ORDER BY position"
                until_sql = " AND ts_us <= ?"
            args: list[Any] = [since]
            if until is not None:
                sql, args = sql + until_sql, [since, ts_micros(until)]
            rows = self._query(sql + order, args).fetchall()
        if index is None and since == 0:
            index = MemoryIndex()
        return check_stored(
            rows, since=since, prev=prev, index=index, source=str(self.path), tree=tree
        )

    def _head_at(self, position: int) -> str:
        """The stored head after ``position`` (64 zeros for 0)."""
        if position == 0:
            return GENESIS_HEX
        row = self._query("SELECT head FROM events WHERE position = ?", [position]).fetchone()
        if row is None:
            raise IntegrityError(f"{self.path}: position {position} is not in the store")
        return str(row[0])

    def export(self) -> Iterator[str]:
        """Every event's JSONL line, in order, one string per line (no newline): its canonical
        JSON, with a committed value and its salt beside its commitment while they are kept
        (``gamma.core.reading.events.event_line``; its chain bytes are ``bodies``)."""
        for line, _ in self.export_pairs():
            yield line

    def export_pairs(self) -> Iterator[tuple[str, str]]:
        """Every event's JSONL line and its chain bytes, in order: what a reader that both
        parses the lines and hashes the log needs (the two differ for a committed value)."""
        if not self.committed:
            for body in self.bodies():
                yield body, body
            return
        for body, salt, value in self._query(
            f"SELECT e.body, v.salt, v.value {JOINED} ORDER BY e.position"
        ):
            yield line_of(str(body), salt, value), str(body)

    def bodies(self) -> Iterator[str]:
        """Every event's chain bytes (what the chain and the Merkle leaves hash), in order."""
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
        if self.committed:
            select = f"SELECT e.body, v.salt, v.value {JOINED} WHERE 1"
        else:
            select = "SELECT e.body, NULL, NULL FROM events e WHERE 1"
        sql = " AND ".join([select] + [f"e.{test}" for test, _ in where])
        for body, salt, value in self._query(sql + " ORDER BY e.position", [v for _, v in where]):
            yield line_of(str(body), salt, value)

    def verify(
        self,
        *,
        key: bytes | None = None,
        expect_head: str | None = None,
        expect_prefix: str | None = None,
        expect_policy: str | None = None,
    ) -> VerifyReport:
        """Check all that ``resolve``, ``checkpoint`` and ``prove`` rely on (SPEC §9.6): every row's
        links, hash, position and lookup columns (the keyed chain too with a key), the events
        as ``resolve`` reads them by the log's rules, the tree against the one recomputed from
        the events, then the sealed metadata and schema version (gamma.storage.seal), with the
        key when one is given, and with ``expect_policy`` the digest a resolution names."""
        key = check_key(key) if key is not None else self._key
        policy = check_head(expect_policy, field="expect_policy")
        with self._snapshot():
            meta, schema = self._read_meta(), schema_rows(self._db)
            report = self._verify_log(key, expect_head=expect_head, expect_prefix=expect_prefix)
        claims_keyed = meta.get("keyed") == "true" or "key_check" in meta
        found = seal_problem(meta, schema, key)
        if found is None and policy is not None and meta.get("policy_digest") != policy:
            found = ("policy_changed", f"store_meta: the recorded policy is"
                     f" {meta.get('policy_digest')}, not the expected {policy}: the store's"
                     " policy was changed")
        never_keyed = not claims_keyed and STORE_KEYED_SEAL not in meta and report.events == 0
        if found is not None and key is not None and never_keyed:
            found = ("not_keyed", "a key was given but the store keeps no keyed chain or keyed"
                     " seal: it was initialised without a key, or its keyed metadata was removed")
        if report.ok and found is not None:
            report = attrs.evolve(report, ok=False, kind=found[0], detail=found[1])
        if key is None and claims_keyed:
            note = "the store says it is keyed; only a key you bring checks the keyed chain and seal"
            report = attrs.evolve(report, note=note)
        elif key is not None:  # lets the report tell a wrong key from a rewrite
            matches = hmac.compare_digest(_key_check(key), meta.get("key_check", ""))
            report = attrs.evolve(report, store_keyed=claims_keyed, key_matches=matches)
        return report

    def _verify_log(
        self, key: bytes | None, *, expect_head: str | None, expect_prefix: str | None
    ) -> VerifyReport:
        """The rows, then the log's rules and the tree, inside the caller's snapshot: two
        passes over the events, the second in chunks (memory: the index of ids and facts)."""
        report = check_rows(
            (ChainRow(*row) for row in self._query(f"SELECT {SELECTED} FROM events ORDER BY position")),
            source=str(self.path),
            lookup=SqlRowLookup(self._db),
            key=key,
            expect_head=expect_head,
            expect_prefix=expect_prefix,
        )
        if is_chain_problem(report.kind):
            return report
        found = self._check_derived()
        values = ValueCheck()
        if found is None:
            found = check_value_rows(self._db, values, committed=self.committed,
                                     chunk=_VERIFY_CHUNK)
        report = attrs.evolve(report, erased=values.erased, erase_events=tuple(values.erase_events))
        if found is None:
            return report
        kind, position, event, detail = found
        return attrs.evolve(report, ok=False, kind=kind, position=position, event=event, detail=detail)

    def _check_derived(self) -> tuple[str, int | None, str | None, str] | None:
        """The tree rows and the log's rules, against the events (the first problem)."""
        trees: TreeCheck | None = None
        if self._db.table("tree").exists():  # a store read at schema 1 has no tree yet
            stored = self._query("SELECT position, hashes FROM tree ORDER BY position")
            trees = TreeCheck((int(p), h if isinstance(h, bytes) else b"") for p, h in stored)
        logs = LogCheck(str(self.path))
        cursor = self._query("SELECT position, id, body, prev_head, head FROM events ORDER BY position")
        while chunk := cursor.fetchmany(_VERIFY_CHUNK):
            for position, event_id, body, _, _ in chunk:
                found = trees.feed(position, event_id, body) if trees is not None else None
                if found is not None:
                    return found
            found = logs.feed([(p, b, prev, h) for p, _, b, prev, h in chunk])
            if found is not None:
                return found
        return trees.finish() if trees is not None else None

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

        A writer never extends what it cannot check (SPEC §9.4): under the lock it checks the
        seal with its key and the row it extends (link, hash, keyed link, tree row), in O(1)
        queries: an append never re-reads the whole log. A store that fails is an
        IntegrityError and nothing is stored; a tampering further back stays for ``verify``.
        """
        source = source or "<append>"
        if self.read_only:
            raise StoreError(f"{self.path}: the store was opened read-only")
        key = writer_key(
            self.path, self._key, keyed=self.keyed, recorded=self._meta.get("key_check", "")
        )
        if now is not None and now.utcoffset() is None:
            raise InputError("now must carry a time zone", field="now")
        parsed = parse_batch(lines_or_events, self.policy, source, committed=self.committed)
        with write(self._db, self.path):
            tail = read_tail(self._db)
            self._sealed = check_extendable(self._db, self.path, tail, key, checked=self._sealed)
            clock = (now or datetime.now(UTC)).astimezone(UTC)
            pending = new_events(
                self._db, parsed, policy=self.policy, last_ts=tail.ts, clock=clock, source=source
            )
            checked = [(line, event) for line, event, _ in pending]
            validate_log(checked, index=SqlIndex(self._db, tail.ts), source=source)
            if self.committed:
                check_values(pending, source)
            rows, head = chain_rows(tail, pending, key)
            # StoredTree and tree_rows are looked up in this module: benchmarks/store.py stubs
            # them out to time an append without the tree
            if rows:
                self._db.table("events").insert_all(iter([COLUMNS, *rows]), batch_size=500)
                compact = StoredTree(self._db, tail.position).compact()
                grown = tree_rows(compact, (canonical for _, _, canonical in pending))
                self._db.table("tree").insert_all(iter([["position", "hashes"], *grown]), batch_size=500)
                if self.committed:
                    self._store_values(tail.position, pending)
        return AppendResult(appended=len(rows), events=tail.position + len(rows), head=head)

    def _store_values(self, start: int, pending: list[Any]) -> None:
        """The batch's value rows, and an erase's erasures with the deletion of the values it
        names (under ``secure_delete``: the freed bytes are overwritten), in its transaction."""
        values, erasures = value_rows(self._db, start, pending)
        if values:
            self._db.conn.executemany(
                "INSERT INTO event_values (position, salt, value) VALUES (?, ?, ?)", values
            )
        if erasures:
            self._db.conn.executemany(
                "INSERT INTO erasures (position, fact, erase_position) VALUES (?, ?, ?)", erasures
            )
            self._db.conn.executemany("DELETE FROM event_values WHERE position = ?",
                                      [[row[0]] for row in erasures])

    def erase(
        self,
        *,
        tenant: str,
        basis: str,
        actor: str,
        facts: Iterable[str] | None = None,
        key: str | None = None,
        subject: str | None = None,
        all_of_tenant: bool = False,
        event_id: str | None = None,
        now: datetime | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> EraseResult:
        """Destroy committed values of ``tenant`` for good (SPEC §21): the facts named, every
        value of ``key``, of data ``subject``, or ``all_of_tenant`` (exactly one), with the
        legal ``basis``, by ``actor``, who must hold the policy's erasure authority.

        The erase is an event of the log naming each fact and its commitment (never a value);
        its append deletes the values and their salts, and then the bytes are scrubbed from the
        file and its WAL (``gamma.storage.erasure``: the steps ``planned``, ``committed``,
        ``checkpointed`` and ``vacuumed``, ``on_step`` called after each). Heads, tree, every
        checkpoint and proof of the log stay valid. Erasing twice, a fact that is not the
        tenant's, or in a plaintext store: an InputError, and nothing is changed.
        """
        if self.read_only:
            raise StoreError(f"{self.path}: the store was opened read-only")
        step = derived_steps(on_step)
        if not isinstance(basis, str) or not basis.strip():
            raise InputError("state the legal basis of the erasure (a non-empty text)", field="basis")
        check_authority(self.policy, actor)
        selection = Selection(tenant=tenant, facts=None if facts is None else tuple(facts),
                              key=key, subject=subject, all_of_tenant=all_of_tenant)
        with self._snapshot():
            chosen = select(self._db, selection, committed=self.committed)
            position = len(self)
            values = values_of(self._db, (fact for fact, _ in chosen))
        obj = erase_object(chosen, tenant=tenant, actor=actor, basis=basis, event_id=event_id,
                           position=position)
        if self._db.execute("SELECT 1 FROM events WHERE id = ?", [obj["id"]]).fetchone():
            # refused before the decision log is touched (the append would refuse it after)
            raise DuplicateIdError(f"event id {obj['id']!r} is already used", field="id")
        step("planned")
        timeout = self._busy_timeout()
        redact_decisions(self.path, erase_event=str(obj["id"]),
                         facts=[fact for fact, _ in chosen], values=values, busy_timeout=timeout)
        del values
        step("redacted")
        result = self.append([obj], now=now, source="<erase>")
        step("committed")
        checkpoint(self._db, self.path, timeout)
        step("checkpointed")
        vacuum(self._db, self.path, timeout)
        step("vacuumed")
        return EraseResult(erased=tuple(fact for fact, _ in chosen), event=str(obj["id"]),
                           events=result.events, head=result.head)

    def scrub(self) -> None:
        """Checkpoint and truncate the WAL and rebuild the file (``gamma.storage.erasure.scrub``):
        what an erase does after its commit, for a writer to finish one a reader held up."""
        if self.read_only:
            raise StoreError(f"{self.path}: the store was opened read-only")
        scrub(self._db, self.path, self._busy_timeout())

    def seal(self, *, expect_policy: str) -> None:
        """Migrate a keyed store from before schema 4 and write its keyed seal (SPEC §9.2).

        Asked for explicitly (``gamma migrate``), never by a migration or an append: whoever
        seals vouches for the recorded policy, so its digest must be ``expect_policy``, and
        the store must verify with the key in everything but the missing keyed seal.
        """
        if self.read_only:
            raise StoreError(f"{self.path}: the store was opened read-only")
        key = writer_key(
            self.path, self._key, keyed=self.keyed, recorded=self._meta.get("key_check", "")
        )
        policy = check_head(expect_policy, field="expect_policy")
        if key is None:
            raise StoreError(f"{self.path}: the store is not keyed: its migration sealed it")
        with self._snapshot():
            report = self._verify_log(key, expect_head=None, expect_prefix=None)
        if not report.ok:
            raise IntegrityError(f"{self.path}: refusing to seal a store that does not verify:"
                                 f" {report.verdict}: {report.detail}")
        with write(self._db, self.path):  # migrated and sealed at once, or neither
            meta, schema = self._read_meta(), schema_rows(self._db)
            if max((v for v, _ in schema), default=0) != LATEST:
                keyed_seal = KEYED_SEAL in meta or STORE_KEYED_SEAL in meta
                found = seal_problem(meta, schema, key if keyed_seal else None)
                if found is not None:
                    raise IntegrityError(f"{self.path}: refusing to migrate and seal: {found[1]}")
                renewed = STORE_KEYED_SEAL in meta  # checked with the key: renewed for the schema
                migrate(self._db)  # a later schema renews the plain seal and drops the keyed one
                meta, schema = self._read_meta(), schema_rows(self._db)
                if renewed:
                    value = store_seals(meta, schema, key)[STORE_KEYED_SEAL]
                    self._db.table("store_meta").insert({"name": STORE_KEYED_SEAL, "value": value})
                    self._meta = self._read_meta()
                    return
            if STORE_KEYED_SEAL in meta:
                found = seal_problem(meta, schema, key)
                if found is not None:
                    raise IntegrityError(f"{self.path}: {found[1]}")
                return  # sealed already, and the seal verifies
            found = seal_problem(meta, schema, None)
            if found is not None:
                raise IntegrityError(f"{self.path}: refusing to seal: {found[1]}")
            if meta.get("policy_digest") != policy:
                raise IntegrityError(
                    f"{self.path}: refusing to seal: the recorded policy is"
                    f" {meta.get('policy_digest')}, not the expected {policy}"
                )
            value = store_seals(meta, schema, key)[STORE_KEYED_SEAL]
            self._db.table("store_meta").insert({"name": STORE_KEYED_SEAL, "value": value})
            self._meta = self._read_meta()

    # -- plumbing ------------------------------------------------------------------------

    def _busy_timeout(self) -> float:
        return float(self._query("PRAGMA busy_timeout").fetchone()[0]) / 1000

    def _read_meta(self) -> dict[str, str]:
        return read_meta(self._db, self.path)

    def _query(self, sql: str, args: list[Any] | None = None) -> sqlite3.Cursor:
        return query(self._db, self.path, sql, args)

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One read transaction, so every query sees the same log while writers go on."""
        self._query("BEGIN")
        try:
            yield
        finally:
            self._db.rollback()

