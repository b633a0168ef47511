"""Opening a store's file: its SQLite header, the connection, the schema created or migrated,
the write lock and SQLite's errors turned into gamma's where they occur.

A write takes the lock first (``BEGIN IMMEDIATE``) and only then reads, so two writers queue
for the lock instead of both reading the same head. ``gamma.storage.store`` builds the
``Store`` on these.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from gamma.core.terms.errors import InputError, StoreBusyError, StoreError
from gamma.storage import SQLITE_HEADER
from gamma.storage.migrations import LATEST, current_version, migrate
from gamma.storage.readonly import read_only_connection

__all__ = [
    "BUSY_TIMEOUT",
    "SQLITE_HEADER",
    "STORE_FORMAT",
    "claims_keyed",
    "connect",
    "create_schema",
    "hold",
    "is_store",
    "query",
    "read_meta",
    "refuse_nonempty",
    "release",
    "require_file",
    "translate",
    "upgrade_schema",
    "write",
]

STORE_FORMAT = "gamma-store"
BUSY_TIMEOUT = 10.0
"""Seconds a command waits for another writer's lock before giving up (StoreBusyError, exit 3)."""


# POSIX releases every fcntl lock a process holds on a file when the process closes *any*
# descriptor of that file, and SQLite's locks are fcntl locks. Reading a store's header with
# open() while this process holds a connection to it would drop the shared lock that keeps
# another process from checkpointing and deleting the live WAL: commits acknowledged after
# that would live in an unlinked file and vanish with the process. SQLite's own connections
# share their locks per file and never do this; so the files this process holds connections
# to are never opened outside SQLite (``hold`` on connecting, ``release`` on closing).
_HELD: Counter[tuple[int, int]] = Counter()
_HELD_LOCK = threading.Lock()


def _identity(path: str | Path) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return None
    return found.st_dev, found.st_ino


def hold(path: str | Path) -> tuple[int, int] | None:
    """Mark ``path`` as held by a connection of this process until ``release``."""
    identity = _identity(path)
    if identity is not None:
        with _HELD_LOCK:
            _HELD[identity] += 1
    return identity


def release(identity: tuple[int, int] | None) -> None:
    """The connection ``hold`` marked is closed."""
    if identity is None:
        return
    with _HELD_LOCK:
        _HELD[identity] -= 1
        if _HELD[identity] <= 0:
            del _HELD[identity]


def is_store(path: str | Path) -> bool:
    """Whether ``path`` is an SQLite file (a store), by its 16-byte header; a file this
    process holds a connection to is one, and is not opened again (see ``hold``)."""
    identity = _identity(path)
    if identity is None:
        return False
    with _HELD_LOCK:  # held across the read, so no connection opens while the file is open here
        if identity in _HELD:
            return True
        try:
            with open(path, "rb") as handle:
                return handle.read(16) == SQLITE_HEADER
        except OSError:
            return False


def refuse_nonempty(path: Path) -> None:
    """``init`` writes only a new or empty file (and no WAL left beside it)."""
    for candidate in (path, Path(f"{path}-wal")):
        if candidate.exists() and (candidate.is_dir() or candidate.stat().st_size > 0):
            raise InputError(
                "refusing to initialise: the file exists and is not empty",
                source=str(candidate),
            )


def require_file(path: Path) -> None:
    """``open`` needs an existing SQLite file."""
    if not path.is_file():
        raise InputError("no such store", source=str(path))
    if not is_store(path):
        raise InputError("not a gamma store (no SQLite header)", source=str(path))


def translate(exc: sqlite3.Error, path: Path) -> Exception:
    """Storage errors become gamma errors where they occur."""
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return StoreBusyError(
            f"{path}: another writer held the store's lock for more than the busy timeout ({text})"
        )
    return StoreError(f"{path}: {text}")


def connect(path: Path, timeout: float, *, read_only: bool) -> Database:
    """A connection in autocommit mode (transactions are explicit), read-only when asked."""
    if read_only:
        conn = read_only_connection(path, timeout)
    else:
        conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None)
    return Database(conn, recursive_triggers=False, execute_plugins=False)


def query(db: Database, path: Path, sql: str, args: list[Any] | None = None) -> sqlite3.Cursor:
    """``sql`` run on ``db``, its SQLite error translated."""
    try:
        return db.execute(sql, args or [])
    except sqlite3.Error as exc:
        raise translate(exc, path) from exc


def read_meta(db: Database, path: Path) -> dict[str, str]:
    """The ``store_meta`` rows as a dict of name to value."""
    rows = query(db, path, "SELECT name, value FROM store_meta").fetchall()
    return {str(name): str(value) for name, value in rows}


def claims_keyed(db: Database, path: Path) -> bool:
    """Whether the metadata says the store is keyed (the flag or a key check): its writer
    must then bring the key before anything is written, a migration included."""
    meta = read_meta(db, path)
    return meta.get("keyed") == "true" or "key_check" in meta


@contextmanager
def write(db: Database, path: Path) -> Iterator[None]:
    """One write transaction taken with BEGIN IMMEDIATE: the lock first, then the reads."""
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise translate(exc, path) from exc
    try:
        yield
        db.execute("COMMIT")
    except sqlite3.Error as exc:
        db.rollback()
        raise translate(exc, path) from exc
    except BaseException:
        db.rollback()
        raise


def create_schema(db: Database, path: Path, meta: Mapping[str, str]) -> None:
    """A new store: WAL mode, every migration and the metadata rows, in one transaction."""
    db.enable_wal()
    with write(db, path):
        if current_version(db) != 0:
            raise InputError("refusing to initialise: already a store", source=str(path))
        migrate(db)
        rows = [{"name": k, "value": v} for k, v in sorted(meta.items())]
        db.table("store_meta").insert_all(rows)


def upgrade_schema(db: Database, path: Path, *, read_only: bool) -> None:
    """An existing store brought to the latest schema; a reader reads an older one as it is.

    A store that says it is keyed is left as it is: it is migrated in the transaction that
    seals it with the key (``Store.seal``, ``gamma migrate``), so a writer without the key,
    or whose append is refused, leaves every byte of it unchanged (SPEC §9.2)."""
    version = current_version(db)
    if version == 0:
        raise StoreError(f"{path}: not a gamma store (no schema)")
    if read_only:
        if version > LATEST:
            raise StoreError(f"{path}: store schema version {version} is newer than this"
                             f" gamma knows ({LATEST}): upgrade gamma")
        return  # an older schema is read as it is; the next writer migrates it
    if version != LATEST:
        with write(db, path):
            if not claims_keyed(db, path):  # a keyed store migrates only with its key (Store.seal)
                migrate(db)
    if db.journal_mode != "wal":
        db.enable_wal()
