"""Opening a store for reading without changing a byte of it (SPEC §9.6).

Reading commands open the file with SQLite's ``mode=ro``: no write, no
migration and no checkpoint, so a WAL left by a killed writer is read (its
commits count) but never folded into the file. In WAL mode a reader needs the
``-shm`` index beside the file; SQLite creates or refreshes it when the
directory is writable. On read-only media without one, the file is opened
with ``immutable=1`` when no WAL holds commits outside it (then nothing can
change the file); a non-empty WAL that cannot be read there is an error
rather than a silently older log.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from gamma.core.terms.errors import StoreError

__all__ = ["read_only_connection"]


def _uri(path: Path, options: str) -> str:
    return f"file:{quote(str(path.resolve()))}?{options}"


def read_only_connection(path: Path, timeout: float) -> sqlite3.Connection:
    """A connection that cannot write ``path``: ``mode=ro``, else ``immutable=1`` when safe."""
    conn = sqlite3.connect(_uri(path, "mode=ro"), uri=True, timeout=timeout, isolation_level=None)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        reason = str(exc)
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise StoreError(
            f"{path}: cannot be read where it is ({reason}): its WAL ({wal.name}) holds commits"
            " that only a reader able to create its -shm index can see; copy the store with its"
            " -wal file to writable media and read the copy"
        )
    conn = sqlite3.connect(
        _uri(path, "mode=ro&immutable=1"), uri=True, timeout=timeout, isolation_level=None
    )
    return conn
