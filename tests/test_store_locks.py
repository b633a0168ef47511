"""A store held open by this process keeps its WAL while anything else looks at the file.

POSIX drops every fcntl lock a process holds on a file when the process closes any
descriptor of it. Before the fix, ``is_store`` (and every read-only open, which calls it)
read the header with ``open()``: the engine's shared lock went with it, and the next process
to close a connection found itself the last one, checkpointed and deleted the live WAL.
Commits acknowledged afterwards went to an unlinked file and were lost with the process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import A, jsonl, ts

from gamma.storage.store import Store, is_store

OTHER_PROCESS = "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM sqlite_master').connection.close()"


def test_looking_at_an_open_store_keeps_its_wal_for_this_process(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    wal = Path(f"{path}-wal")
    with Store.init(path) as store:
        store.append(jsonl(A("F1", "k", 1)))
        assert wal.exists()
        assert is_store(path)  # this process's own look at the file
        Store.open(path, read_only=True).close()
        for _ in range(2):  # another process connects and closes: it is not the last one
            subprocess.run([sys.executable, "-c", OTHER_PROCESS, str(path)], check=True)
        assert wal.exists(), "the live WAL was checkpointed and deleted under an open store"
        store.append(jsonl(A("F2", "k", 2, id="e2", ts=ts(2))))
        counted = subprocess.run(
            [sys.executable, "-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1])"
             ".execute('SELECT count(*) FROM events').fetchone()[0])", str(path)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        assert counted.stdout.strip() == "2"  # what this process committed, another one reads


def test_is_store_still_reads_headers_of_files_not_held(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(jsonl(A("F1", "k", 1)), encoding="utf-8")
    assert not is_store(log) and not is_store(tmp_path / "missing") and not is_store(tmp_path)
    path = tmp_path / "s.db"
    Store.init(path).close()
    assert is_store(path)  # closed: read by its header again
