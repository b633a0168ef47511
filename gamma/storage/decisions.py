"""The decision log: every decision and write of ``gamma serve``, in an append-only SQLite file
beside the store (``STORE.decisions``), hash-chained so that an edited, deleted or reordered
row is found by ``verify``, and redactable (issue 30) so that an erased value leaves no byte
of it behind while the chain still verifies.

Format 2 (every new file): each row keeps its entry's canonical JSON and a random 32-byte salt
(``decision_entries``) beside its chain row (``decisions``): the entry's commitment
``c = sha256(salt || entry bytes)``, its outline (endpoint, position, status and, for a write,
the events appended: what replay's coverage needs when the entry is gone) and
``hash = sha256(previous hash || c || outline bytes)`` (32 zero bytes before the first).
``redact`` deletes the entry and salt of every row that names an erased fact or holds an erased
value, records the erase event that did it (``redactions``), and scrubs the file (VACUUM, then a
completed ``wal_checkpoint(TRUNCATE)``): the commitment and outline stay, so the chain verifies,
and ``verify`` counts the redacted rows. Triggers keep every table append-only except that one
deletion. A format-1 file (the entry itself chained: ``hash = sha256(previous || entry bytes)``)
is read and written as it is, never converted; it cannot be redacted.

Several processes (the server's workers) record into one file: a record takes SQLite's write
lock first (``BEGIN IMMEDIATE``), reads the last hash under it, inserts and commits, so the chain
has one order whatever the interleaving. ``record`` returns only once the row is committed
and raises ``DecisionLogFailure`` when it cannot be: the server then fails the request
closed. The file is in WAL mode with ``synchronous=NORMAL`` by default: a committed row
survives the process (a killed or crashed worker loses nothing it returned from); an
operating-system crash or power loss may lose the last rows committed before it, never
reorder or corrupt the chain. ``synchronous="full"`` adds an fsync per record for those too.

The ``decision_meta`` table also keeps the deployment's token key (``token_key``: 32 random
bytes, hex), made once by whichever worker opens the file first and read by every other
worker and every restart, so a freshness token one worker returned is checked by all of
them, and ``gamma replay --decisions`` checks the tokens recorded. Losing the file loses the
key: tokens given out before are then refused as not of this log.

What the chain does not show: rows cut from the end (the chain of what is left is whole)
and a chain recomputed from an edited row on. ``verify`` returns the head (count and last
hash) for an auditor to compare with one kept elsewhere.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import attrs
import orjson

from gamma.core.integrity.chain import GENESIS_HEX
from gamma.core.integrity.commitment import is_hex_digest, new_salt
from gamma.core.resolving.render import inert
from gamma.core.terms.canonical import canonical_bytes, canonical_text
from gamma.core.terms.errors import InputError, IntegrityError, StoreBusyError, StoreError
from gamma.core.terms.model import Value
from gamma.storage._opening import BUSY_TIMEOUT, hold, is_store, release
from gamma.storage.readonly import read_only_connection

__all__ = [
    "DecisionEntry",
    "DecisionLog",
    "DecisionLogFailure",
    "DecisionLogBusy",
    "DecisionLogLocked",
    "PreparedRow",
    "ChainReport",
    "EntryMatcher",
    "Outline",
    "Redaction",
    "decision_log_path",
    "entry_commitment",
    "redact_decisions",
    "DECISIONS_FORMAT",
    "ROWS_PER_STATEMENT",
    "GENESIS_HEX",
    "TOKEN_KEY_BYTES",
    "VERSION",
    "VERSIONS",
]

DECISIONS_FORMAT = "gamma-decisions"
#: The format of every new file: committed entries, redactable (issue 30).
VERSION = "2"
#: The formats this gamma reads and writes: 1 (the entry chained as it is) and 2.
VERSIONS = ("1", "2")
#: The length of the token key, in bytes (``decision_meta`` row ``token_key``, in hex).
TOKEN_KEY_BYTES = 32
_TOKEN_KEY = "token_key"
#: Rows a commit inserts with one statement (more go in one transaction, this many at a time).
ROWS_PER_STATEMENT = 64


def _append_only_triggers(table: str) -> tuple[str, ...]:
    return (
        f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, 'the decision log is append-only: UPDATE refused'); END",
        f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, 'the decision log is append-only: DELETE refused'); END",
    )


_IN_ORDER = (
    "CREATE TRIGGER decisions_in_order BEFORE INSERT ON decisions "
    "WHEN NEW.seq IS NOT coalesce((SELECT max(seq) FROM decisions), 0) + 1 "
    "BEGIN SELECT RAISE(ABORT, 'the decision log is append-only: a row must be the next seq'); END"
)

_SCHEMA = (
    "CREATE TABLE decision_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # the chain: what stays when an entry is redacted
    "CREATE TABLE decisions (seq INTEGER PRIMARY KEY, outline TEXT NOT NULL,"
    " commitment TEXT NOT NULL, hash TEXT NOT NULL)",
    _IN_ORDER,
    *_append_only_triggers("decisions"),
    # the entries and their salts: deleted only by a redaction
    "CREATE TABLE decision_entries (seq INTEGER PRIMARY KEY, salt TEXT NOT NULL, entry TEXT NOT NULL)",
    "CREATE TRIGGER decision_entries_in_order BEFORE INSERT ON decision_entries "
    "WHEN NEW.seq IS NOT (SELECT max(seq) FROM decisions) "
    "OR EXISTS (SELECT 1 FROM decision_entries WHERE seq = NEW.seq) "
    "OR EXISTS (SELECT 1 FROM redactions WHERE seq = NEW.seq) "
    "BEGIN SELECT RAISE(ABORT, 'the decision log is append-only: an entry goes with its new row'); END",
    "CREATE TRIGGER decision_entries_no_update BEFORE UPDATE ON decision_entries "
    "BEGIN SELECT RAISE(ABORT, 'the decision log is append-only: UPDATE refused'); END",
    "CREATE TRIGGER decision_entries_no_delete BEFORE DELETE ON decision_entries "
    "WHEN NOT EXISTS (SELECT 1 FROM redactions WHERE seq = OLD.seq) "
    "BEGIN SELECT RAISE(ABORT, 'the decision log is append-only: only a redacted entry is deleted'); END",
    # every erase event applied to the log (once), and each row it redacted
    "CREATE TABLE applied_erasures (erase_event TEXT PRIMARY KEY)",
    "CREATE TRIGGER applied_erasures_once BEFORE INSERT ON applied_erasures "
    "WHEN EXISTS (SELECT 1 FROM applied_erasures WHERE erase_event = NEW.erase_event) "
    "BEGIN SELECT RAISE(IGNORE); END",
    *_append_only_triggers("applied_erasures"),
    "CREATE TABLE redactions (seq INTEGER PRIMARY KEY, erase_event TEXT NOT NULL)",
    "CREATE TRIGGER redactions_of_entries BEFORE INSERT ON redactions "
    "WHEN NOT EXISTS (SELECT 1 FROM decision_entries WHERE seq = NEW.seq) "
    "OR EXISTS (SELECT 1 FROM redactions WHERE seq = NEW.seq) "
    "OR NOT EXISTS (SELECT 1 FROM applied_erasures WHERE erase_event = NEW.erase_event) "
    "BEGIN SELECT RAISE(ABORT, 'a redaction names a held entry and an applied erase event'); END",
    *_append_only_triggers("redactions"),
)


#: A connection's own (TEMP) view over a format-2 row's two tables, and the trigger that
#: inserts into both: a row is one INSERT, and a group of rows one multi-row INSERT, which
#: in autocommit mode is also the commit (a statement is atomic, triggers included). TEMP
#: objects live in the connection, not the file: the format is unchanged.
_ROWS_VIEW = (
    "CREATE TEMP VIEW decision_rows AS SELECT d.seq AS seq, d.outline AS outline,"
    " d.commitment AS commitment, d.hash AS hash, e.salt AS salt, e.entry AS entry"
    " FROM decisions AS d JOIN decision_entries AS e ON e.seq = d.seq",
    "CREATE TEMP TRIGGER decision_rows_insert INSTEAD OF INSERT ON decision_rows BEGIN"
    " INSERT INTO decisions (seq, outline, commitment, hash)"
    " VALUES (NEW.seq, NEW.outline, NEW.commitment, NEW.hash);"
    " INSERT INTO decision_entries (seq, salt, entry) VALUES (NEW.seq, NEW.salt, NEW.entry); END",
)


#: One INSERT of ``n`` format-2 rows through the connection's ``decision_rows``, by ``n``.
_INSERT_ROWS = tuple(
    "INSERT INTO decision_rows (seq, outline, commitment, hash, salt, entry) VALUES "
    + ", ".join(["(?, ?, ?, ?, ?, ?)"] * n)
    for n in range(ROWS_PER_STATEMENT + 1)
)


def decision_log_path(store: str | Path) -> Path:
    """Where the decision log of the store at ``store`` lives: beside it, ``STORE.decisions``."""
    return Path(f"{store}.decisions")



def _wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put a new log in WAL mode, waiting up to ``timeout`` for writers opening it at once.

    Workers starting together (``gamma serve --workers N``) open a log that does not exist
    yet; switching it to WAL needs the file to themselves, and SQLite answers "database is
    locked" at once, without its busy handler, to all but one of them. A log in WAL mode
    already needs no switch and takes no lock."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)

class DecisionLogFailure(StoreError):
    """The decision log could not be opened or written; a server fails the request (closed)."""


class DecisionLogLocked(DecisionLogFailure, StoreBusyError):
    """A commit asked not to wait (``commit(wait=False)``) found the log's write lock held by
    another connection: nothing was written; the caller may commit again, waiting."""


class DecisionLogBusy(DecisionLogFailure, StoreBusyError):
    """A redaction is committed but readers kept the log's WAL from being folded in and
    truncated within the busy timeout: its bytes may still be in the -wal file."""


@attrs.frozen(kw_only=True)
class DecisionEntry:
    """One decision or write, with what replays it.

    ``caller`` is the credential's label and ``actor`` the authenticated caller's actor
    (``auditor`` whether it may ask on behalf of others); ``on_behalf`` the actor an auditor
    asked for, else None. ``at`` is the time decided at (RFC 3339), ``request`` the body,
    ``position`` and ``root`` the log the decision saw (for a write: the log after it),
    ``token`` the freshness token returned with it (the log's, never the root), ``policy`` the policy digest, ``status`` the HTTP status, ``response`` the body returned,
    ``reasons`` the reason codes of the outcome, ``duration_ms`` the time the handler took.
    """

    endpoint: str
    caller: str
    actor: dict[str, Any]
    on_behalf: dict[str, Any] | None
    at: str
    request: dict[str, Any]
    position: int
    root: str
    token: str
    policy: str
    status: int
    response: dict[str, Any]
    reasons: list[str]
    duration_ms: float
    auditor: bool = False

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=False)

    def canonical(self) -> bytes:
        """The entry's canonical JSON (keys sorted, no whitespace, UTF-8): what a row holds."""
        return canonical_bytes(self.to_dict())

    @classmethod
    def from_dict(cls, obj: object, *, field: str = "entry") -> Self:
        """An entry from its JSON object; every field present and of its type (InputError)."""
        if not isinstance(obj, dict):
            raise InputError("a decision entry is a JSON object", field=field)
        extra = sorted(set(obj) - set(_ENTRY_TYPES))
        missing = sorted(set(_ENTRY_TYPES) - set(obj))
        if extra or missing:
            what = f"unknown {extra}" if extra else f"missing {missing}"
            raise InputError(f"a decision entry's fields: {what}", field=field)
        for name, types in _ENTRY_TYPES.items():
            value = obj[name]
            if isinstance(value, bool) and bool not in types or not isinstance(value, types):
                raise InputError(f"expected {' or '.join(t.__name__ for t in types)},"
                                 f" got {type(value).__name__}", field=f"{field}.{name}")  # fmt: skip
        if not all(isinstance(r, str) for r in obj["reasons"]):
            raise InputError("reasons are strings", field=f"{field}.reasons")
        return cls(**obj)


_ENTRY_TYPES: Mapping[str, tuple[type, ...]] = {
    "endpoint": (str,), "caller": (str,), "actor": (dict,), "on_behalf": (dict, type(None)),
    "at": (str,), "request": (dict,), "position": (int,), "root": (str,), "token": (str,), "policy": (str,),
    "status": (int,), "response": (dict,), "reasons": (list,), "duration_ms": (float, int),
    "auditor": (bool,),
}  # fmt: skip


@attrs.frozen(kw_only=True)
class Outline:
    """What a format-2 row keeps of its entry outside the entry, in the chain: enough for
    replay to place it and to count what a write appended, nothing of a request's data."""

    endpoint: str
    position: int
    status: int
    #: the events a write appended (its response's ``appended``), else None
    appended: int | None = None

    @classmethod
    def of(cls, entry: DecisionEntry) -> Outline:
        appended = entry.response.get("appended")
        if not isinstance(appended, int) or isinstance(appended, bool):
            appended = None
        return cls(endpoint=entry.endpoint, position=entry.position, status=entry.status,
                   appended=appended)  # fmt: skip

    def canonical(self) -> bytes:
        return canonical_bytes(attrs.asdict(self))

    @classmethod
    def parse(cls, text: str) -> Outline | None:
        """The outline a row holds, or None when it is not one in canonical JSON."""
        try:
            obj = orjson.loads(text)
            outline = cls(**obj) if isinstance(obj, dict) else None
        except (orjson.JSONDecodeError, TypeError):
            return None
        if outline is None or outline.canonical() != text.encode("utf-8"):
            return None
        kinds = ((outline.endpoint, str), (outline.position, int), (outline.status, int))
        if any(isinstance(v, bool) or not isinstance(v, t) for v, t in kinds):
            return None
        if outline.appended is not None and (
            isinstance(outline.appended, bool) or not isinstance(outline.appended, int)
        ):
            return None
        return outline


@attrs.frozen(kw_only=True)
class Redaction:
    """A redacted row: its seq, the erase event that redacted it, and its outline."""

    seq: int
    erase_event: str
    outline: Outline


@attrs.frozen
class ChainReport:
    """What ``verify`` found: the rows read, the last row's seq and hash, the first break, and
    (format 2) how many rows are redacted and by which erase events."""

    entries: int
    head: str
    seq: int
    broken: int | None = None
    problem: str | None = None
    redacted: int = 0
    erase_events: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.broken is None

    def to_dict(self) -> dict[str, Any]:
        return {"broken": self.broken, "entries": self.entries, "erase_events": list(self.erase_events),
                "head": self.head, "ok": self.ok, "problem": self.problem,
                "redacted": self.redacted, "seq": self.seq}  # fmt: skip


@attrs.frozen
class PreparedRow:
    """An entry encoded for the log before it has a place in the chain (``DecisionLog.prepare``):
    its canonical JSON and, in format 2, its salt, commitment and outline; ``commit`` chains
    it under the write lock."""

    data: bytes
    salt: str = ""
    commitment: str = ""
    outline: bytes = b""


def chain_step(previous: str, entry: bytes) -> str:
    """Format 1: the hash (hex) of a row, sha256 over the previous row's hash bytes, then the entry."""
    return hashlib.sha256(bytes.fromhex(previous) + entry).hexdigest()


def entry_commitment(salt: str, entry: bytes) -> str:
    """Format 2: the commitment (hex) to an entry, sha256 over the salt's 32 bytes, then the entry."""
    return hashlib.sha256(bytes.fromhex(salt) + entry).hexdigest()


def chain_step_2(previous: str, commitment: str, outline: bytes) -> str:
    """Format 2: the hash (hex) of a row, sha256 over the previous row's hash bytes, the
    commitment's 32 bytes, then the outline's canonical JSON."""
    return hashlib.sha256(bytes.fromhex(previous) + bytes.fromhex(commitment) + outline).hexdigest()


@attrs.frozen(kw_only=True)
class _Row:
    """One row as stored (format 1: no outline, commitment, salt or redaction)."""

    seq: int
    hash: str
    text: str | None
    outline: str | None = None
    commitment: str | None = None
    salt: str | None = None
    erase_event: str | None = None


Synchronous = Literal["normal", "full"]


class DecisionLog:
    """An open decision log; ``DecisionLog.open`` (a context manager). Thread-safe: a lock
    serialises this process's records, SQLite's write lock every process's."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        *,
        read_only: bool,
        token_key: bytes | None,
        version: str = VERSION,
        busy_timeout: float = BUSY_TIMEOUT,
    ) -> None:
        self._conn = conn
        self.path = path
        self.read_only = read_only
        #: the deployment's freshness-token key (None only in a log opened read-only that
        #: no writer has opened since keys were kept)
        self.token_key = token_key
        #: the file's format, "1" or "2" (``VERSIONS``)
        self.version = version
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._closed = False
        self._held: tuple[int, int] | None = None
        #: the last row's (seq, hash) as this connection last wrote or read it under the write
        #: lock, None when unknown: a commit chains from it without reading the table, and
        #: the in-order trigger refuses the rows when another worker has written since
        self._tail: tuple[int, str] | None = None
        self._quick: sqlite3.Connection | None = None  # no busy wait (commit(wait=False))
        self._synchronous = "NORMAL"

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        read_only: bool = False,
        synchronous: Synchronous = "normal",
        busy_timeout: float | None = None,
    ) -> DecisionLog:
        """Open the log at ``path``, creating it (format 2) when missing (or empty) unless
        ``read_only``; an existing file keeps its format.

        A file that is not a decision log is an InputError; SQLite failing is a
        DecisionLogFailure.
        """
        path = Path(path)
        timeout = BUSY_TIMEOUT if busy_timeout is None else busy_timeout
        if synchronous not in ("normal", "full"):
            raise InputError(f"expected 'normal' or 'full', got {synchronous!r}", field="synchronous")
        _check_header(path, read_only=read_only)
        conn: sqlite3.Connection | None = None
        try:
            if read_only:
                conn = read_only_connection(path, timeout)
                version = _check_meta(conn, path)
                key = _read_token_key(conn, path)
            else:
                conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None,
                                       check_same_thread=False)  # fmt: skip
                _wal(conn, timeout)
                conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
                # a deleted entry's bytes zeroed in its page, not left in free space
                conn.execute("PRAGMA secure_delete=ON")
                version = _create_or_check(conn, path)
                key = _token_key(conn, path)
                if version == "2":
                    _rows_view(conn)
            log = cls(conn, path, read_only=read_only, token_key=key, version=version,
                      busy_timeout=timeout)  # fmt: skip
            log._synchronous = synchronous.upper()
            log._held = hold(path)  # see gamma.storage._opening.hold: the WAL's locks
            return log
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.Error):
                raise DecisionLogFailure(f"{path}: cannot open the decision log: {exc}") from exc
            if isinstance(exc, StoreError) and not isinstance(exc, DecisionLogFailure):
                raise DecisionLogFailure(str(exc)) from exc
            raise

    def record(self, entry: DecisionEntry) -> int:
        """Append ``entry`` and commit it; its seq. DecisionLogFailure if it cannot be written."""
        return self.commit([self.prepare(entry)])[0]

    def prepare(self, entry: DecisionEntry) -> PreparedRow:
        """``entry`` encoded (and, format 2, salted and committed to) outside the write lock;
        a DecisionLogFailure when it is not JSON (that entry alone fails)."""
        try:
            data = entry.canonical()
        except (TypeError, orjson.JSONEncodeError) as exc:
            raise DecisionLogFailure(f"{self.path}: the entry is not JSON: {exc}") from exc
        if self.version == "1":
            return PreparedRow(data)
        salt = new_salt()
        return PreparedRow(data, salt, entry_commitment(salt, data), Outline.of(entry).canonical())

    def commit(self, rows: Sequence[PreparedRow], *, wait: bool = True) -> list[int]:
        """Append ``rows`` in order and commit them together; their seqs, once committed.

        Format 2, with the tail known: one INSERT of every row (``ROWS_PER_STATEMENT`` at most)
        in autocommit mode, which is its own transaction; the in-order trigger refuses it when
        another worker wrote since the tail was carried, and then (or with the tail unknown)
        the rows go in under ``BEGIN IMMEDIATE`` after reading the tail. ``wait=False``: the
        write lock held elsewhere is a DecisionLogLocked at once (nothing written) rather than
        a wait of up to the busy timeout. Any other failure is a DecisionLogFailure, nothing
        of ``rows`` committed."""
        if not rows:
            return []
        with self._lock:
            if self._closed or self.read_only:
                raise DecisionLogFailure(f"{self.path}: the decision log is not open for writing")
            conn = self._conn if wait else self._quick_connection()
            tail = self._tail
            self._tail = None  # known again only once these rows are committed
            try:
                if tail is not None and self.version == "2" and len(rows) <= ROWS_PER_STATEMENT:
                    try:
                        new_tail = self._insert_all(conn, tail, rows)
                    except sqlite3.IntegrityError:
                        pass  # another worker wrote since: read the tail under the lock
                    else:
                        self._tail = new_tail
                        return list(range(tail[0] + 1, new_tail[0] + 1))
                conn.execute("BEGIN IMMEDIATE")  # the lock first, then the tail
                try:
                    tail = self._read_tail(conn)
                    new_tail = self._insert_all(conn, tail, rows)
                    conn.execute("COMMIT")
                except BaseException:
                    _rollback(conn)
                    raise
            except sqlite3.Error as exc:
                if not wait and getattr(exc, "sqlite_errorname", "").startswith("SQLITE_BUSY"):
                    raise DecisionLogLocked(f"{self.path}: the write lock is held elsewhere") from exc
                raise DecisionLogFailure(f"{self.path}: cannot record the decision: {exc}") from exc
            self._tail = new_tail
            return list(range(tail[0] + 1, new_tail[0] + 1))

    def _quick_connection(self) -> sqlite3.Connection:
        """A second connection to the log that never waits for its lock (``commit(wait=False)``:
        a thread that must not block, such as an event loop's)."""
        if self._quick is None:
            conn = sqlite3.connect(str(self.path), timeout=0, isolation_level=None,
                                   check_same_thread=False)  # fmt: skip
            try:
                conn.execute(f"PRAGMA synchronous={self._synchronous}")
                conn.execute("PRAGMA secure_delete=ON")
                if self.version == "2":
                    _rows_view(conn)
            except BaseException:
                conn.close()
                raise
            self._quick = conn
        return self._quick

    @staticmethod
    def _read_tail(conn: sqlite3.Connection) -> tuple[int, str]:
        row = conn.execute("SELECT seq, hash FROM decisions ORDER BY seq DESC LIMIT 1").fetchone()
        return (0, GENESIS_HEX) if row is None else (int(row[0]), str(row[1]))

    def _insert_all(self, conn: sqlite3.Connection, tail: tuple[int, str],
                    rows: Sequence[PreparedRow]) -> tuple[int, str]:  # fmt: skip
        """Insert ``rows`` chained after ``tail``; the new tail. Format 2: one statement per
        ``ROWS_PER_STATEMENT`` rows (in autocommit mode, the commit of them)."""
        seq, previous = tail
        if self.version == "1":
            for row in rows:
                seq, previous = seq + 1, chain_step(previous, row.data)
                conn.execute("INSERT INTO decisions (seq, entry, hash) VALUES (?, ?, ?)",
                             (seq, row.data.decode("utf-8"), previous))  # fmt: skip
            return seq, previous
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            chunk = rows[start : start + ROWS_PER_STATEMENT]
            args: list[object] = []
            for row in chunk:
                seq, previous = seq + 1, chain_step_2(previous, row.commitment, row.outline)
                args += (seq, row.outline.decode("utf-8"), row.commitment, previous, row.salt,
                         row.data.decode("utf-8"))  # fmt: skip
            conn.execute(_INSERT_ROWS[len(chunk)], args)
        return seq, previous

    @contextlib.contextmanager
    def writing(self) -> Iterator[Callable[[DecisionEntry], int]]:
        """The log's write lock (``BEGIN IMMEDIATE``) held for the block, which gets a function
        that inserts an entry (its seq); the rows commit as the block ends, or roll back if it
        raises. A write to the store inside the block is made only once its row can be: the
        lock not taken (within the busy timeout) is a DecisionLogFailure before it runs."""
        with self._lock:
            if self._closed or self.read_only:
                raise DecisionLogFailure(f"{self.path}: the decision log is not open for writing")
            conn = self._conn
            self._tail = None
            try:
                conn.execute("BEGIN IMMEDIATE")  # the lock first, then the tail hash
            except sqlite3.Error as exc:
                raise DecisionLogFailure(f"{self.path}: cannot take the write lock: {exc}") from exc
            try:
                # the tail (seq, hash), read at the first insert and carried over to the next:
                # an insert that raises ends the block, so a carried tail is always the table's
                tail: list[tuple[int, str]] = []
                yield functools.partial(self._insert, conn, tail)
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(conn)
                raise DecisionLogFailure(f"{self.path}: cannot record the decision: {exc}") from exc
            except BaseException:
                _rollback(conn)
                raise
            self._tail = tail[0] if tail else None

    def _insert(self, conn: sqlite3.Connection, tail: list[tuple[int, str]], entry: DecisionEntry) -> int:
        """Insert ``entry`` as the next row (inside ``writing``, whose ``tail`` holds the last
        row's seq and hash once an insert has read or written it); its seq."""
        row = self.prepare(entry)
        tail[:] = [self._insert_all(conn, tail[0] if tail else self._read_tail(conn), [row])]
        return tail[0][0]

    def _rows(self) -> Iterator[_Row]:
        """Every row, in seq order, read in one snapshot."""
        if self.version == "1":
            sql = "SELECT seq, hash, entry FROM decisions ORDER BY seq"
        else:
            sql = ("SELECT d.seq, d.hash, e.entry, d.outline, d.commitment, e.salt, r.erase_event"
                   " FROM decisions AS d LEFT JOIN decision_entries AS e ON e.seq = d.seq"
                   " LEFT JOIN redactions AS r ON r.seq = d.seq ORDER BY d.seq")  # fmt: skip
        try:
            cursor = self._conn.execute(sql)
            while batch := cursor.fetchmany(1024):
                for row in batch:
                    yield _Row(seq=int(row[0]), hash=str(row[1]), text=row[2], outline=_opt(row, 3),
                               commitment=_opt(row, 4), salt=_opt(row, 5), erase_event=_opt(row, 6))  # fmt: skip
        except sqlite3.Error as exc:
            raise DecisionLogFailure(f"{self.path}: cannot read the decision log: {exc}") from exc

    def entries(self, *, before: int | None = None) -> Iterator[tuple[int, DecisionEntry]]:
        """Every entry still held, with its seq (those before seq ``before`` when given), in
        seq order (a redacted row has none: ``redactions``); a row that is no entry is an
        IntegrityError. The chain is not checked here: ``verify`` is."""
        for row in self._rows():
            if before is not None and row.seq >= before:
                return
            if row.text is not None:
                yield row.seq, _parsed_entry(row.text, row.seq, self.path)

    def redactions(self, *, before: int | None = None) -> list[Redaction]:
        """The redacted rows (seq before ``before`` when given), in seq order; a row whose
        outline is unreadable is an IntegrityError. Format 1: none."""
        found = []
        for row in self._rows():
            if before is not None and row.seq >= before:
                break
            if row.text is None and row.erase_event is not None:
                outline = Outline.parse(row.outline or "")
                if outline is None:
                    raise IntegrityError(f"{self.path}: decision seq {row.seq}: its outline is unreadable")
                found.append(Redaction(seq=row.seq, erase_event=row.erase_event, outline=outline))
        return found

    def applied_erasures(self) -> frozenset[str]:
        """The erase events applied to this log by ``redact`` (whether or not any row matched)."""
        if self.version == "1":
            return frozenset()
        try:
            rows = self._conn.execute("SELECT erase_event FROM applied_erasures").fetchall()
        except sqlite3.Error as exc:
            raise DecisionLogFailure(f"{self.path}: cannot read the decision log: {exc}") from exc
        return frozenset(str(r[0]) for r in rows)

    def __len__(self) -> int:
        """The rows in the log, redacted ones included (a deleted row is one fewer; ``verify``
        says where)."""
        try:
            return int(self._conn.execute("SELECT count(*) FROM decisions").fetchone()[0])
        except sqlite3.Error as exc:
            raise DecisionLogFailure(f"{self.path}: cannot read the decision log: {exc}") from exc

    def verify(self) -> ChainReport:
        """Walk the chain: seqs 1, 2, … without gaps, each hash the step from the one before,
        each row a canonical entry (format 2: matching its commitment and outline, or redacted,
        its entry and salt gone with a redaction naming the erase event that removed them).
        The first break is reported (rows after it are not read)."""
        previous, count, last, redacted = GENESIS_HEX, 0, 0, 0
        erase_events: set[str] = set()
        for row in self._rows():
            if row.seq != last + 1:
                problem: str | None = f"seq {row.seq} follows seq {last}: rows are missing or out of order"
            elif self.version == "1":
                problem = self._problem_1(row, previous)
            else:
                problem = self._problem_2(row, previous)
            if problem is not None:
                return ChainReport(entries=count, head=previous, seq=last, broken=row.seq,
                                   problem=problem, redacted=redacted,
                                   erase_events=tuple(sorted(erase_events)))  # fmt: skip
            if row.text is None and row.erase_event is not None:
                redacted += 1
                erase_events.add(row.erase_event)
            previous, count, last = row.hash, count + 1, row.seq
        stray = self._stray(last)
        if stray is not None:
            return ChainReport(entries=count, head=previous, seq=last, broken=stray[0],
                               problem=stray[1], redacted=redacted,
                               erase_events=tuple(sorted(erase_events)))  # fmt: skip
        return ChainReport(entries=count, head=previous, seq=last, redacted=redacted,
                           erase_events=tuple(sorted(erase_events)))  # fmt: skip

    def _problem_1(self, row: _Row, previous: str) -> str | None:
        text = row.text or ""
        data = text.encode("utf-8")
        if row.hash != chain_step(previous, data):
            return "the hash does not follow from the previous row and this entry"
        return self._entry_problem(row.seq, text)

    def _problem_2(self, row: _Row, previous: str) -> str | None:
        outline_text, commitment = row.outline or "", row.commitment or ""
        if not is_hex_digest(commitment):
            return "the commitment is not 64 lowercase hex digits"
        if row.hash != chain_step_2(previous, commitment, outline_text.encode("utf-8")):
            return "the hash does not follow from the previous row and this row's commitment"
        outline = Outline.parse(outline_text)
        if outline is None:
            return "the outline is not an outline in canonical JSON"
        if row.text is None:
            if row.erase_event is None:
                return "the entry was deleted without a redaction"
            return None
        if row.erase_event is not None:
            return f"a redaction ({row.erase_event}) names this row, whose entry is still held"
        if not is_hex_digest(row.salt) or entry_commitment(str(row.salt), row.text.encode("utf-8")) != commitment:
            return "the entry and salt do not match the row's commitment"
        problem = self._entry_problem(row.seq, row.text)
        if problem is None and Outline.of(_parsed_entry(row.text, row.seq, self.path)) != outline:
            problem = "the outline does not match the entry"
        return problem

    def _entry_problem(self, seq: int, text: str) -> str | None:
        try:
            if _parsed_entry(text, seq, self.path).canonical() != text.encode("utf-8"):
                return "the entry is not in canonical JSON"
        except IntegrityError as exc:
            return str(exc)
        return None

    def _stray(self, last: int) -> tuple[int, str] | None:
        """Format 2: an entry or a redaction with no chain row (its row cut away), or a
        redaction naming an erase event never applied."""
        if self.version == "1":
            return None
        try:
            for table in ("decision_entries", "redactions"):
                row = self._conn.execute(
                    f"SELECT min(seq) FROM {table} WHERE seq NOT IN (SELECT seq FROM decisions)"  # noqa: S608
                ).fetchone()
                if row[0] is not None:
                    return int(row[0]), f"{table} holds seq {row[0]}, which the chain does not"
            row = self._conn.execute(
                "SELECT min(seq) FROM redactions WHERE erase_event NOT IN"
                " (SELECT erase_event FROM applied_erasures)"
            ).fetchone()
        except sqlite3.Error as exc:
            raise DecisionLogFailure(f"{self.path}: cannot read the decision log: {exc}") from exc
        if row[0] is not None:
            return int(row[0]), "its redaction names an erase event never applied to the log"
        return None

    def head(self) -> tuple[int, str]:
        """The last row's seq and hash (0 and 64 zeros when empty), as stored (not verified)."""
        try:
            row = self._conn.execute(
                "SELECT seq, hash FROM decisions ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        except sqlite3.Error as exc:
            raise DecisionLogFailure(f"{self.path}: cannot read the decision log: {exc}") from exc
        return (0, GENESIS_HEX) if row is None else (int(row[0]), str(row[1]))

    def redact(
        self,
        *,
        erase_event: str,
        facts: Iterable[str],
        values: Iterable[Value] = (),
        dry_run: bool = False,
    ) -> int:
        """Redact every entry that names one of ``facts`` or holds one of ``values``
        (``EntryMatcher``), for the erase event ``erase_event``; the number redacted.

        One write transaction (``BEGIN IMMEDIATE``, ``secure_delete`` on): the erase event is
        recorded as applied, each matching row gets a redaction and loses its entry and salt
        (its commitment and outline stay in the chain). Then, when a row was redacted, VACUUM
        (a page rebalanced before may still hold a copy of an entry in its free space), and in
        every case a ``wal_checkpoint(TRUNCATE)`` that must complete, so no byte of an
        erased entry or its salt is left in the file, its -wal or -shm: a reader holding a read
        transaction past the busy timeout is a DecisionLogBusy (the redaction is committed;
        ``scrub`` or calling again finishes it). Applying an erase event again redacts what
        matches now and scrubs again. ``dry_run``: only count, change nothing. A format-1 log
        cannot be redacted without breaking its chain: one with a match is an InputError,
        one without is left as it is (0).
        """
        if not isinstance(erase_event, str) or not erase_event:
            raise InputError("an erase event's id (a non-empty string)", field="erase_event")
        matcher = EntryMatcher(facts=facts, values=values)
        with self._lock:
            if self._closed or (self.read_only and not dry_run):
                raise DecisionLogFailure(f"{self.path}: the decision log is not open for writing")
            if self.version == "1" or dry_run:
                count = sum(matcher.matches(text) for _, text in self._texts())
                if count and self.version == "1":
                    raise InputError(
                        f"{count} entries of this format-1 decision log name an erased fact or hold"
                        " an erased value, and format 1 chains the entries themselves: it cannot be"
                        " redacted without breaking its chain. Move it aside (kept, its chain still"
                        " checkable) so that gamma serve starts a format-2 log, or keep the values",
                        source=str(self.path),
                    )
                return count
            conn = self._conn
            # searched first without the lock (the server's workers record meanwhile), then
            # under it only the rows recorded since: the lock is held for the deletions only
            seen = self.head()[0]
            hits = [seq for seq, text in self._texts(upto=seen) if matcher.matches(text)]
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    hits = [seq for seq in hits if self._still_held(seq)]  # not redacted meanwhile
                    hits += [seq for seq, text in self._texts(after=seen) if matcher.matches(text)]
                    conn.execute("INSERT INTO applied_erasures (erase_event) VALUES (?)", [erase_event])
                    for seq in hits:
                        conn.execute("INSERT INTO redactions (seq, erase_event) VALUES (?, ?)",
                                     (seq, erase_event))  # fmt: skip
                        conn.execute("DELETE FROM decision_entries WHERE seq = ?", [seq])
                    conn.execute("COMMIT")
                except BaseException:
                    _rollback(conn)
                    raise
                if hits:
                    conn.execute("VACUUM")
            except sqlite3.Error as exc:
                raise DecisionLogFailure(f"{self.path}: cannot redact the decision log: {exc}") from exc
            self._scrub()
            return len(hits)

    def scrub(self) -> None:
        """Fold the WAL into the file and truncate it, waiting for readers up to the busy
        timeout (DecisionLogBusy past it): a redaction's bytes are then in no file."""
        with self._lock:
            if self._closed or self.read_only:
                raise DecisionLogFailure(f"{self.path}: the decision log is not open for writing")
            self._scrub()

    def _scrub(self) -> None:
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.OperationalError:
                busy = 1  # locked by a writer past the busy timeout: as busy
            except sqlite3.Error as exc:
                raise DecisionLogFailure(f"{self.path}: cannot checkpoint the decision log: {exc}") from exc
            if busy == 0:
                return
            if time.monotonic() >= deadline:
                raise DecisionLogBusy(
                    f"{self.path}: another connection holds a read transaction on the decision log,"
                    " so its WAL cannot be folded in and truncated: the redaction is committed but"
                    f" its bytes may remain in {self.path.name}-wal until a checkpoint completes;"
                    " run it again once the readers are done"
                )
            time.sleep(0.02)

    def _still_held(self, seq: int) -> bool:
        row = self._conn.execute("SELECT 1 FROM decision_entries WHERE seq = ?", [seq]).fetchone()
        return row is not None

    def _texts(self, *, after: int = 0, upto: int | None = None) -> Iterator[tuple[int, str]]:
        """Format 2's held entries (format 1's rows) after seq ``after`` (up to ``upto``) as
        (seq, text), in seq order."""
        table = "decisions" if self.version == "1" else "decision_entries"
        last = 2**63 - 1 if upto is None else upto
        try:
            cursor = self._conn.execute(
                f"SELECT seq, entry FROM {table} WHERE seq > ? AND seq <= ? ORDER BY seq",  # noqa: S608
                [after, last],
            )
            while batch := cursor.fetchmany(1024):
                for seq, text in batch:
                    yield int(seq), str(text)
        except sqlite3.Error as exc:
            raise DecisionLogFailure(f"{self.path}: cannot read the decision log: {exc}") from exc

    def close(self) -> None:
        """Fold the WAL into the file when no one else is using it (a copied file alone then
        holds every row; best effort: rows are durable in the WAL anyway), and close."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if not self.read_only:
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass  # another worker has the file open: the last one to close folds it in
            finally:
                if self._quick is not None:
                    self._quick.close()
                self._conn.close()
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


def redact_decisions(
    store: str | Path,
    *,
    erase_event: str,
    facts: Iterable[str],
    values: Iterable[Value] = (),
    dry_run: bool = False,
    busy_timeout: float | None = None,
) -> int:
    """``DecisionLog.redact`` on the decision log beside the store at ``store``
    (``STORE.decisions``); 0, touching nothing, when there is none."""
    path = decision_log_path(store)
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with DecisionLog.open(path, read_only=dry_run, busy_timeout=busy_timeout) as log:
        return log.redact(erase_event=erase_event, facts=facts, values=values, dry_run=dry_run)


#: The characters of a plain word (SPEC §6): an id made of them is written as it is.
_PLAIN_WORD = "A-Za-z0-9_.:/@#-"
#: The top-level fields of an entry that hold its own numbers, never a fact's value.
_OWN_NUMBERS = frozenset({"position", "status", "duration_ms"})


def _escaped(text: str) -> str:
    """What canonical JSON writes between the quotes of ``text``."""
    return canonical_text(text)[1:-1]


class EntryMatcher:
    """Whether an entry's canonical JSON names an erased fact or holds an erased value.

    A fact id is found as a JSON string and as the context block's ``[id]`` tag (SPEC §6) and
    the text view's cell: a plain-word id (``[A-Za-z0-9_.:/@#-]+``) wherever it stands between
    characters that are not plain-word ones; any other id as its JSON-escaped text and as its
    JSON encoding (§6's escapes) inside a string. A string value is found as its raw text, its
    JSON-escaped text and the JSON-escaped text of its §6 encoding (a value in a context block
    held in a string), each once or twice escaped; an empty string is found only through its
    fact. An integer is found as a JSON number anywhere but the entry's own ``position``,
    ``status`` and ``duration_ms``, and inside a string as a number token: not next to a
    digit, letter, ``_``, ``.``, ``:``, ``+`` or ``-`` (so not a digit run of a longer number,
    a time or a token). A boolean is found only through its fact.
    """

    def __init__(self, *, facts: Iterable[str], values: Iterable[Value]) -> None:
        plain: list[str] = []
        texts: set[str] = set()
        numbers: set[int] = set()
        for i, fact in enumerate(facts):
            if not isinstance(fact, str) or not fact:
                raise InputError("a fact id is a non-empty string", field=f"facts[{i}]")
            if re.fullmatch(f"[{_PLAIN_WORD}]+", fact):
                plain.append(re.escape(fact))
            else:
                texts.update((_escaped(fact), _escaped(inert(fact))))
        for i, value in enumerate(values):
            if isinstance(value, bool):
                continue
            if isinstance(value, int):
                numbers.add(value)
            elif isinstance(value, str):
                if value:
                    shown = inert(value)
                    shown = shown[1:-1] if shown != value else value
                    for form in {value, _escaped(value), shown, _escaped(shown)}:
                        texts.update((form, _escaped(form)))
            else:
                raise InputError(f"a value is a string, an integer or a boolean, got"
                                 f" {type(value).__name__}", field=f"values[{i}]")  # fmt: skip
        self._plain = (
            re.compile(f"(?<![{_PLAIN_WORD}])(?:{'|'.join(sorted(plain))})(?![{_PLAIN_WORD}])")
            if plain else None
        )  # fmt: skip
        self._texts = (
            re.compile("|".join(re.escape(t) for t in sorted(texts, key=lambda t: (-len(t), t))))
            if texts else None
        )  # fmt: skip
        self._numbers = frozenset(numbers)
        tokens = "|".join(str(n) for n in sorted(numbers))
        self._number_token = (
            re.compile(f"(?<![0-9A-Za-z_.:+-])(?:{tokens})(?![0-9A-Za-z_:+-]|\\.[0-9])") if numbers else None
        )  # fmt: skip

    def matches(self, text: str) -> bool:
        """Whether the entry (its canonical JSON ``text``) must be redacted."""
        if self._plain is not None and self._plain.search(text):
            return True
        if self._texts is not None and self._texts.search(text):
            return True
        if self._number_token is None or not any(str(n) in text for n in self._numbers):
            return False
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError:
            return True  # not JSON: redact rather than keep what cannot be searched
        if isinstance(obj, dict):
            obj = {k: v for k, v in obj.items() if k not in _OWN_NUMBERS}
        return self._holds_number(obj)

    def _holds_number(self, obj: Any) -> bool:
        assert self._number_token is not None
        stack = [obj]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack.extend(item.keys())
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, str):
                if self._number_token.search(item):
                    return True
            elif isinstance(item, int) and not isinstance(item, bool) and item in self._numbers:
                return True
        return False


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _parsed_entry(text: str, seq: int, path: Path) -> DecisionEntry:
    """The entry a row holds; an IntegrityError naming the seq when it holds none."""
    try:
        return DecisionEntry.from_dict(orjson.loads(text))
    except (orjson.JSONDecodeError, InputError) as exc:
        raise IntegrityError(f"{path}: decision seq {seq}: not a decision entry ({exc})") from None


def _check_header(path: Path, *, read_only: bool) -> None:
    """A missing or empty file is a new log (refused when reading); else it must be SQLite."""
    if path.is_dir():
        raise InputError("a folder, not a decision log", source=str(path))
    if not path.exists() or path.stat().st_size == 0:
        if read_only:
            raise InputError("no such decision log", source=str(path))
        return
    if not is_store(path):  # never opened outside SQLite while this process holds it
        raise InputError("not a decision log (no SQLite header)", source=str(path))


def _create_or_check(conn: sqlite3.Connection, path: Path) -> str:
    """An existing log's metadata checked (no lock: a worker opens while others record); a new
    file's schema made under the write lock (workers may open it at once). Its version."""
    if _tables(conn):
        return _check_meta(conn, path)
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not _tables(conn):
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.executemany("INSERT INTO decision_meta (name, value) VALUES (?, ?)",
                             [("format", DECISIONS_FORMAT), ("version", VERSION)])  # fmt: skip
            version = VERSION
        else:
            version = _check_meta(conn, path)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return version


def _rows_view(conn: sqlite3.Connection) -> None:
    """This connection's ``decision_rows`` (``_ROWS_VIEW``): a format-2 row in one INSERT."""
    for statement in _ROWS_VIEW:
        conn.execute(statement)


def _read_token_key(conn: sqlite3.Connection, path: Path) -> bytes | None:
    row = conn.execute("SELECT value FROM decision_meta WHERE name = ?", [_TOKEN_KEY]).fetchone()
    if row is None:
        return None
    text = str(row[0])
    if re.fullmatch(f"[0-9a-f]{{{2 * TOKEN_KEY_BYTES}}}", text) is None:
        raise IntegrityError(f"{path}: the token key is not {TOKEN_KEY_BYTES} bytes in hex")
    return bytes.fromhex(text)


def _token_key(conn: sqlite3.Connection, path: Path) -> bytes:
    """The log's token key, made by the first opener: workers opening at once all read the
    one row that won (INSERT OR IGNORE, then SELECT, in one write transaction)."""
    key = _read_token_key(conn, path)
    if key is not None:
        return key
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT OR IGNORE INTO decision_meta (name, value) VALUES (?, ?)",
                     [_TOKEN_KEY, secrets.token_bytes(TOKEN_KEY_BYTES).hex()])  # fmt: skip
        key = _read_token_key(conn, path)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    assert key is not None
    return key


def _tables(conn: sqlite3.Connection) -> bool:
    return int(conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]) > 0


def _check_meta(conn: sqlite3.Connection, path: Path) -> str:
    """The file says it is a decision log of a version this gamma reads; that version."""
    try:
        meta = dict(conn.execute("SELECT name, value FROM decision_meta").fetchall())
    except sqlite3.OperationalError:
        raise InputError("not a decision log (no decision_meta table)", source=str(path)) from None
    if meta.get("format") != DECISIONS_FORMAT:
        raise InputError(f"not a decision log (format {meta.get('format')!r})", source=str(path))
    version = meta.get("version")
    if version not in VERSIONS:
        raise InputError(f"decision log version {version!r} is not one of {', '.join(VERSIONS)}:"
                         " upgrade gamma", source=str(path))  # fmt: skip
    return str(version)


def _opt(row: Sequence[Any], i: int) -> str | None:
    """Column ``i`` of a row as text, or None when absent or NULL."""
    return None if len(row) <= i or row[i] is None else str(row[i])
