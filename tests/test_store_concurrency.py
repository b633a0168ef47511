"""Several processes at once: concurrent writers, and a writer killed in the middle of a batch."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import gamma
from gamma.core.reading.events import parse_events
from gamma.storage.store import Store

WRITERS = 4
PER_WRITER = 500

WRITER = textwrap.dedent(
    """
    import json, os, sys, time
    from gamma.storage.store import Store

    path, writer, count, batch, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    while not os.path.exists(go):
        time.sleep(0.001)

    def event(n):
        body = {"id": f"w{writer}-{n}", "actor": f"w{writer}", "tenant": "acme"}
        if n % 10 == 9:  # a retract of this writer's previous fact, stored by an earlier batch or this one
            return body | {"type": "retract", "fact": f"F{writer}-{n - 1}"}
        return body | {"type": "assert", "fact": f"F{writer}-{n}", "key": f"k{n % 7}", "value": n}

    with Store.open(path) as store:
        for start in range(0, count, batch):
            store.append([json.dumps(event(n)) for n in range(start, min(start + batch, count))])
    """
)

KILLED_MID_BATCH = textwrap.dedent(
    """
    import json, sys, time
    import sqlite_utils.db
    from gamma.storage.store import Store

    original = sqlite_utils.db.Table.insert_all

    def half_then_hang(self, records, *args, **kwargs):
        records = list(records)
        half = 1 + (len(records) - 1) // 2
        original(self, iter(records[:half]), *args, **kwargs)
        print("inserted half", flush=True)
        time.sleep(60)

    sqlite_utils.db.Table.insert_all = half_then_hang
    lines = [json.dumps({"id": f"k{n}", "type": "assert", "actor": "a", "tenant": "acme",
                         "fact": f"K{n}", "key": "k", "value": n}) for n in range(1000)]
    with Store.open(sys.argv[1]) as store:
        store.append(lines)
    """
)

LOOPING_WRITER = textwrap.dedent(
    """
    import json, sys
    from gamma.storage.store import Store

    with Store.open(sys.argv[1]) as store:
        print("open", flush=True)
        batch = 0
        while True:
            store.append([json.dumps({"id": f"b{batch}-{n}", "type": "assert", "actor": "a",
                                      "tenant": "acme", "fact": f"B{batch}-{n}", "key": "k",
                                      "value": n}) for n in range(200)])
            batch += 1
    """
)


def python(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def path(tmp_path: Path) -> Path:
    target = tmp_path / "shared.db"
    Store.init(target).close()
    return target


class TestConcurrentWriters:
    @pytest.mark.parametrize("batch", [1, 10], ids=["one-event-batches", "ten-event-batches"])
    def test_four_writers_lose_nothing_and_duplicate_nothing(
        self, path: Path, tmp_path: Path, batch: int
    ) -> None:
        """4 processes x 500 ts-less events at once: all stored once, ts non-decreasing, chain valid."""
        go = tmp_path / "go"
        procs = [
            python(WRITER, str(path), str(w), str(PER_WRITER), str(batch), str(go))
            for w in range(WRITERS)
        ]
        time.sleep(0.3)  # let every writer import and wait at the start line
        go.touch()
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        with Store.open(path) as store:
            lines = list(store.export())
            report = store.verify()
        ids = [json.loads(line)["id"] for line in lines]
        expected = {f"w{w}-{n}" for w in range(WRITERS) for n in range(PER_WRITER)}
        assert len(ids) == len(expected) == WRITERS * PER_WRITER
        assert set(ids) == expected
        assert report.ok and report.events == WRITERS * PER_WRITER
        # the whole log re-validates: unique ids, references, non-decreasing ts
        events = parse_events(lines)
        assert all(a.ts <= b.ts for a, b in itertools.pairwise(events))
        # each writer's own events kept their order
        for w in range(WRITERS):
            mine = [int(i.split("-")[1]) for i in ids if i.startswith(f"w{w}-")]
            assert mine == sorted(mine)


class TestKilledWriter:
    def test_sigkill_mid_batch_leaves_none_of_the_batch(self, path: Path) -> None:
        """A writer killed after inserting half its batch, before commit, leaves no trace of it."""
        with Store.open(path) as store:
            store.append(
                [
                    json.dumps(
                        {
                            "id": "x",
                            "type": "assert",
                            "actor": "a",
                            "tenant": "acme",
                            "fact": "X",
                            "key": "k",
                            "value": 1,
                            "ts": "2026-01-01T00:00:00Z",
                        }
                    )
                ]
            )
            head = store.head()
        proc = python(KILLED_MID_BATCH, str(path))
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "inserted half"
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)  # reap it and close its pipes
        assert proc.returncode == -signal.SIGKILL
        with Store.open(path, busy_timeout=2) as store:
            assert store.head() == head and len(store) == 1
            assert store.verify().ok
            # the lock died with the writer: the next append goes through
            assert (
                store.append(
                    [
                        json.dumps(
                            {
                                "id": "y",
                                "type": "retract",
                                "actor": "a",
                                "tenant": "acme",
                                "fact": "X",
                            }
                        )
                    ]
                ).appended
                == 1
            )
            assert store.verify().ok

    @pytest.mark.parametrize("delay", [0.15, 0.4])
    def test_sigkill_at_a_random_moment_keeps_whole_batches(self, path: Path, delay: float) -> None:
        """Killed at an arbitrary moment, a looping writer leaves only whole batches and a valid chain."""
        proc = python(LOOPING_WRITER, str(path))
        assert proc.stdout is not None and proc.stdout.readline().strip() == "open"
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)  # reap it and close its pipes
        assert proc.returncode == -signal.SIGKILL
        with Store.open(path, busy_timeout=2) as store:
            count = len(store)
            assert count % 200 == 0
            assert store.verify().ok
            batches = {json.loads(line)["id"].split("-")[0] for line in store.export()}
            assert batches == {f"b{n}" for n in range(count // 200)}


class TestRefreshReadsOnlyAfterACommit:
    """``Engine.refresh`` reads the store only when something was committed to it since its
    last read: by another connection (SQLite's ``data_version``) or by its own (an append or
    an erase through the engine), so a server deciding per request skips the read."""

    def test_reads_after_a_commit_and_never_in_between(self, tmp_path: Path) -> None:
        path = tmp_path / "log.db"
        line = {"type": "assert", "actor": "a", "tenant": "acme", "key": "k"}
        with Store.init(path) as store:
            store.append([json.dumps({**line, "id": "e1", "fact": "F1", "value": 1})])
        with gamma.Engine.open(path) as engine:
            store_of = engine._store
            assert store_of is not None
            reads = []
            read = store_of.read
            store_of.read = lambda **kw: reads.append(kw["since"]) or read(**kw)  # type: ignore[method-assign]
            assert engine.refresh() == 0 and engine.refresh() == 0 and reads == []
            with Store.open(path) as other:  # another connection commits
                other.append([json.dumps({**line, "id": "e2", "fact": "F2", "value": 2})])
            assert engine.refresh() == 1 and reads == [1]
            assert engine.refresh() == 0 and reads == [1]
            engine.append([json.dumps({**line, "id": "e3", "fact": "F3", "value": 3})])
            assert len(engine) == 3 and reads == [1, 2]  # its own commit, read back once
            assert engine.refresh() == 0 and reads == [1, 2]
