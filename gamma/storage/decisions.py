"""The decision log: every decision and write of ``gamma serve``, in an append-only SQLite file
beside the store (``STORE.decisions``), hash-chained so that an edited, deleted or reordered
row is found by ``verify``.

One row per entry: its sequence number (1, 2, … without gaps), the entry's canonical JSON,
and ``hash = sha256(previous hash || entry bytes)`` (32 zero bytes before the first). Several
processes (the server's workers) record into one file: a record takes SQLite's write lock
first (``BEGIN IMMEDIATE``), reads the last hash under it, inserts and commits, so the chain
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
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import attrs
import orjson

from gamma.core.canonical import canonical_bytes
from gamma.core.errors import InputError, IntegrityError, StoreError
from gamma.storage._opening import hold, is_store, release
from gamma.storage.readonly import read_only_connection

__all__ = [
    "DecisionEntry",
    "DecisionLog",
    "DecisionLogFailure",
    "ChainReport",
    "decision_log_path",
    "FORMAT",
    "GENESIS_HEX",
    "TOKEN_KEY_BYTES",
]

FORMAT = "gamma-decisions"
VERSION = "1"
#: The hash before the first row: 32 zero bytes.
GENESIS_HEX = bytes(32).hex()
#: The length of the token key, in bytes (``decision_meta`` row ``token_key``, in hex).
TOKEN_KEY_BYTES = 32
_TOKEN_KEY = "token_key"
#: Seconds a record waits for another worker's write lock before it fails (closed).
BUSY_TIMEOUT = 10.0

_SCHEMA = (
    "CREATE TABLE decision_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE decisions (seq INTEGER PRIMARY KEY, entry TEXT NOT NULL, hash TEXT NOT NULL)",
    "CREATE TRIGGER decisions_in_order BEFORE INSERT ON decisions "
    "WHEN NEW.seq IS NOT coalesce((SELECT max(seq) FROM decisions), 0) + 1 "
    "BEGIN SELECT RAISE(ABORT, 'the decision log is append-only: a row must be the next seq'); END",
    "CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions "
    "BEGIN SELECT RAISE(ABORT, 'the decision log is append-only: UPDATE refused'); END",
    "CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions "
    "BEGIN SELECT RAISE(ABORT, 'the decision log is append-only: DELETE refused'); END",
)


def decision_log_path(store: str | Path) -> Path:
    """Where the decision log of the store at ``store`` lives: beside it, ``STORE.decisions``."""
    return Path(f"{store}.decisions")


class DecisionLogFailure(StoreError):
    """The decision log could not be opened or written; a server fails the request (closed)."""


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
        extra = sorted(set(obj) - set(_TYPES))
        missing = sorted(set(_TYPES) - set(obj))
        if extra or missing:
            what = f"unknown {extra}" if extra else f"missing {missing}"
            raise InputError(f"a decision entry's fields: {what}", field=field)
        for name, types in _TYPES.items():
            value = obj[name]
            if isinstance(value, bool) and bool not in types or not isinstance(value, types):
                raise InputError(f"expected {' or '.join(t.__name__ for t in types)},"
                                 f" got {type(value).__name__}", field=f"{field}.{name}")  # fmt: skip
        if not all(isinstance(r, str) for r in obj["reasons"]):
            raise InputError("reasons are strings", field=f"{field}.reasons")
        return cls(**obj)


_TYPES: Mapping[str, tuple[type, ...]] = {
    "endpoint": (str,), "caller": (str,), "actor": (dict,), "on_behalf": (dict, type(None)),
    "at": (str,), "request": (dict,), "position": (int,), "root": (str,), "token": (str,), "policy": (str,),
    "status": (int,), "response": (dict,), "reasons": (list,), "duration_ms": (float, int),
    "auditor": (bool,),
}  # fmt: skip


@attrs.frozen
class ChainReport:
    """What ``verify`` found: the rows read, the last row's seq and hash, and the first break."""

    entries: int
    head: str
    seq: int
    broken: int | None = None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.broken is None

    def to_dict(self) -> dict[str, Any]:
        return {"broken": self.broken, "entries": self.entries, "head": self.head, "ok": self.ok,
                "problem": self.problem, "seq": self.seq}  # fmt: skip


def chain_step(previous: str, entry: bytes) -> str:
    """The hash (hex) of a row: sha256 over the previous row's hash bytes, then the entry."""
    return hashlib.sha256(bytes.fromhex(previous) + entry).hexdigest()


Synchronous = Literal["normal", "full"]


class DecisionLog:
    """An open decision log; ``DecisionLog.open`` (a context manager). Thread-safe: a lock
    serialises this process's records, SQLite's write lock every process's."""

    def __init__(
        self, conn: sqlite3.Connection, path: Path, *, read_only: bool, token_key: bytes | None
    ) -> None:
        self._conn = conn
        self.path = path
        self.read_only = read_only
        #: the deployment's freshness-token key (None only in a log opened read-only that
        #: no writer has opened since keys were kept)
        self.token_key = token_key
        self._lock = threading.Lock()
        self._closed = False
        self._held: tuple[int, int] | None = None

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        read_only: bool = False,
        synchronous: Synchronous = "normal",
        busy_timeout: float | None = None,
    ) -> DecisionLog:
        """Open the log at ``path``, creating it when missing (or empty) unless ``read_only``.

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
                _check_meta(conn, path)
                key = _read_token_key(conn, path)
            else:
                conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None,
                                       check_same_thread=False)  # fmt: skip
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
                _create_or_check(conn, path)
                key = _token_key(conn, path)
            log = cls(conn, path, read_only=read_only, token_key=key)
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
        with self.writing() as insert:
            return insert(entry)

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
            try:
                conn.execute("BEGIN IMMEDIATE")  # the lock first, then the tail hash
            except sqlite3.Error as exc:
                raise DecisionLogFailure(f"{self.path}: cannot take the write lock: {exc}") from exc
            try:
                yield functools.partial(self._insert, conn)
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(conn)
                raise DecisionLogFailure(f"{self.path}: cannot record the decision: {exc}") from exc
            except BaseException:
                _rollback(conn)
                raise

    def _insert(self, conn: sqlite3.Connection, entry: DecisionEntry) -> int:
        """Insert ``entry`` as the next row (inside ``writing``); its seq."""
        try:
            data = entry.canonical()
        except (TypeError, orjson.JSONEncodeError) as exc:
            raise DecisionLogFailure(f"{self.path}: the entry is not JSON: {exc}") from exc
        row = conn.execute("SELECT seq, hash FROM decisions ORDER BY seq DESC LIMIT 1").fetchone()
        seq, previous = (0, GENESIS_HEX) if row is None else (int(row[0]), str(row[1]))
        conn.execute(
            "INSERT INTO decisions (seq, entry, hash) VALUES (?, ?, ?)",
            (seq + 1, data.decode("utf-8"), chain_step(previous, data)),
        )
        return seq + 1

    def _rows(self) -> Iterator[tuple[int, str, str]]:
        """Every row as (seq, entry text, hash), in seq order, read in one snapshot."""
        try:
            cursor = self._conn.execute("SELECT seq, entry, hash FROM decisions ORDER BY seq")
            while batch := cursor.fetchmany(1024):
                for seq, text, digest in batch:
                    yield int(seq), str(text), str(digest)
        except sqlite3.Error as exc:
            raise DecisionLogFailure(f"{self.path}: cannot read the decision log: {exc}") from exc

    def entries(self, *, before: int | None = None) -> Iterator[tuple[int, DecisionEntry]]:
        """Every entry with its seq (those before seq ``before`` when given), in seq order; a
        row that is no entry is an IntegrityError. The chain is not checked here: ``verify`` is."""
        for seq, text, _ in self._rows():
            if before is not None and seq >= before:
                return
            yield seq, _entry(text, seq, self.path)

    def __len__(self) -> int:
        """The rows in the log (a deleted row is one fewer; ``verify`` says where)."""
        try:
            return int(self._conn.execute("SELECT count(*) FROM decisions").fetchone()[0])
        except sqlite3.Error as exc:
            raise DecisionLogFailure(f"{self.path}: cannot read the decision log: {exc}") from exc

    def verify(self) -> ChainReport:
        """Walk the chain: seqs 1, 2, … without gaps, each hash the step from the one before,
        each row a canonical entry. The first break is reported (rows after it are not read)."""
        previous, count, last = GENESIS_HEX, 0, 0
        for seq, text, digest in self._rows():
            problem = None
            data = text.encode("utf-8")
            if seq != last + 1:
                problem = f"seq {seq} follows seq {last}: rows are missing or out of order"
            elif digest != chain_step(previous, data):
                problem = "the hash does not follow from the previous row and this entry"
            else:
                try:
                    if _entry(text, seq, self.path).canonical() != data:
                        problem = "the entry is not in canonical JSON"
                except IntegrityError as exc:
                    problem = str(exc)
            if problem is not None:
                return ChainReport(entries=count, head=previous, seq=last, broken=seq,
                                   problem=problem)  # fmt: skip
            previous, count, last = digest, count + 1, seq
        return ChainReport(entries=count, head=previous, seq=last)

    def head(self) -> tuple[int, str]:
        """The last row's seq and hash (0 and 64 zeros when empty), as stored (not verified)."""
        try:
            row = self._conn.execute(
                "SELECT seq, hash FROM decisions ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        except sqlite3.Error as exc:
            raise DecisionLogFailure(f"{self.path}: cannot read the decision log: {exc}") from exc
        return (0, GENESIS_HEX) if row is None else (int(row[0]), str(row[1]))

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


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _entry(text: str, seq: int, path: Path) -> DecisionEntry:
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


def _create_or_check(conn: sqlite3.Connection, path: Path) -> None:
    """An existing log's metadata checked (no lock: a worker opens while others record); a new
    file's schema made under the write lock (workers may open it at once)."""
    if _tables(conn):
        _check_meta(conn, path)
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not _tables(conn):
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.executemany("INSERT INTO decision_meta (name, value) VALUES (?, ?)",
                             [("format", FORMAT), ("version", VERSION)])  # fmt: skip
        else:
            _check_meta(conn, path)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


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


def _check_meta(conn: sqlite3.Connection, path: Path) -> None:
    """The file says it is a decision log of a version this gamma reads."""
    try:
        meta = dict(conn.execute("SELECT name, value FROM decision_meta").fetchall())
    except sqlite3.OperationalError:
        raise InputError("not a decision log (no decision_meta table)", source=str(path)) from None
    if meta.get("format") != FORMAT:
        raise InputError(f"not a decision log (format {meta.get('format')!r})", source=str(path))
    if meta.get("version") != VERSION:
        raise InputError(f"decision log version {meta.get('version')!r} is not {VERSION!r}:"
                         " upgrade gamma", source=str(path))  # fmt: skip
