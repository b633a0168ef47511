"""Tamper evidence: each kind of tampering, done with sqlite3 after dropping the triggers."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from helpers import A, R, stamp

from gamma.core.integrity.chain import GENESIS_HEX, head_of, step
from gamma.core.integrity.merkle import CompactRange
from gamma.core.reading.events import canonical_event, parse_events
from gamma.core.terms.errors import InputError, JSONSyntaxError
from gamma.storage.migrations import ts_micros
from gamma.storage.sources import verify_path
from gamma.storage.store import Store
from gamma.storage.tree import tree_rows
from gamma.storage.verify import check_head, verify_file

KEY = b"an auditor's secret key, 32 b.."


def six() -> list[str]:
    events = [A(f"F{n}", f"k{n}", f"v{n}") for n in range(1, 6)] + [R("F1")]
    return [json.dumps(e) for e in stamp(events)]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    target = tmp_path / "log.db"
    with Store.init(target) as store:
        store.append(six())
    return target


@pytest.fixture
def keyed_path(tmp_path: Path) -> Path:
    target = tmp_path / "keyed.db"
    with Store.init(target, key=KEY) as store:
        store.append(six())
    return target


@contextmanager
def tamper(path: Path) -> Iterator[sqlite3.Connection]:
    """A raw connection with every trigger dropped, committed on exit (the attacker)."""
    conn = sqlite3.connect(path, isolation_level=None)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("BEGIN")
    yield conn
    conn.execute("COMMIT")
    conn.close()


def retree(conn: sqlite3.Connection) -> None:
    """What a careful attacker does after rewriting events: rebuild the tree table to match."""
    bodies = [str(b) for (b,) in conn.execute("SELECT body FROM events ORDER BY position")]
    conn.execute("DELETE FROM tree")
    conn.executemany("INSERT INTO tree VALUES (?, ?)", tree_rows(CompactRange(), bodies))


def row(conn: sqlite3.Connection, position: int) -> dict[str, Any]:
    cursor = conn.execute("SELECT * FROM events WHERE position = ?", [position])
    names = [d[0] for d in cursor.description]
    return dict(zip(names, cursor.fetchone()))


def shift_from(conn: sqlite3.Connection, position: int, by: int) -> None:
    conn.execute("UPDATE events SET position = -position WHERE position >= ?", [position])
    conn.execute("UPDATE events SET position = -position + ? WHERE position < 0", [by])


def forged(prev: str, position: int, *, linked: bool = True) -> dict[str, Any]:
    """A well-formed row an attacker slips in (its lookup columns agree with its body)."""
    event = parse_events([json.dumps(stamp([A("FX", "kx", "forged")])[0] | {"id": "forged"})])[0]
    body = canonical_event(event)
    head = step(bytes.fromhex(prev), body).hex() if linked else "ab" * 32
    return {
        "position": position,
        "id": "forged",
        "type": "assert",
        "tenant": "acme",
        "ts_us": ts_micros(event.ts),
        "fact": "FX",
        "key": "kx",
        "experience": None,
        "body": body,
        "prev_head": prev if linked else "cd" * 32,
        "head": head,
        "keyed_head": None,
    }


def insert(conn: sqlite3.Connection, values: dict[str, Any]) -> None:
    marks = ", ".join(f":{k}" for k in values)
    conn.execute(f"INSERT INTO events ({', '.join(values)}) VALUES ({marks})", values)


def verify(path: Path, **kw: Any) -> Any:
    with Store.open(path) as store:
        return store.verify(**kw)


class TestIntact:
    def test_intact_store_reports_its_head(self, path: Path) -> None:
        """An untouched store verifies, and its head is the chain over its bodies."""
        report = verify(path)
        with Store.open(path) as store:
            assert report.ok and report.events == 6
            assert report.head == store.head() == head_of(store.export())

    def test_empty_store(self, tmp_path: Path) -> None:
        Store.init(tmp_path / "e.db").close()
        assert verify(tmp_path / "e.db").head == GENESIS_HEX
        report = verify(tmp_path / "e.db", key=KEY)  # a key for a store with no keyed seal
        assert report.verdict == "not keyed" and report.status == 2 and report.head == GENESIS_HEX
        Store.init(tmp_path / "k.db", key=KEY).close()
        assert verify(tmp_path / "k.db", key=KEY).ok


class TestTampering:
    def test_edited_body(self, path: Path) -> None:
        """A body that no longer hashes to its head is an edit at that position."""
        with tamper(path) as conn:
            conn.execute("UPDATE events SET body = replace(body, 'v3', 'v9') WHERE position = 3")
        report = verify(path)
        assert (report.ok, report.kind, report.position, report.event) == (False, "edited", 3, "e3")
        assert "position 3 (event e3)" in report.message

    def test_edited_body_with_its_head_recomputed(self, path: Path) -> None:
        """Recomputing only the edited row's head breaks the next link; both are named."""
        with tamper(path) as conn:
            old = row(conn, 3)
            body = old["body"].replace("v3", "v9")
            conn.execute(
                "UPDATE events SET body = ?, head = ? WHERE position = 3",
                [body, step(bytes.fromhex(old["prev_head"]), body).hex()],
            )
        report = verify(path)
        assert (report.kind, report.position, report.event) == ("deleted", 4, "e4")
        assert "position 3 (event e3) was rewritten" in report.detail

    def test_edited_lookup_column(self, path: Path) -> None:
        """The lookup columns must agree with the body they were derived from."""
        with tamper(path) as conn:
            conn.execute("UPDATE events SET tenant = 'globex' WHERE position = 2")
        report = verify(path)
        assert (report.kind, report.position, report.event) == ("edited", 2, "e2")
        assert "tenant" in report.detail

    def test_deleted_row_leaving_a_gap(self, path: Path) -> None:
        """A deletion names the position and the event after the gap."""
        with tamper(path) as conn:
            conn.execute("DELETE FROM events WHERE position = 3")
        report = verify(path)
        assert (report.kind, report.position, report.event) == ("deleted", 4, "e4")
        assert "after position 2" in report.detail

    def test_deleted_row_renumbered(self, path: Path) -> None:
        """Closing the gap by renumbering does not hide the deletion."""
        with tamper(path) as conn:
            conn.execute("DELETE FROM events WHERE position = 3")
            shift_from(conn, 4, -1)
        report = verify(path)
        assert (report.kind, report.position, report.event) == ("deleted", 3, "e4")

    def test_deleted_first_row(self, path: Path) -> None:
        with tamper(path) as conn:
            conn.execute("DELETE FROM events WHERE position = 1")
        report = verify(path)
        assert (report.kind, report.position, report.event) == ("deleted", 2, "e2")
        assert "start of the log" in report.detail

    @pytest.mark.parametrize("linked", [True, False], ids=["linked", "unlinked"])
    def test_inserted_row(self, path: Path, linked: bool) -> None:
        """A row slipped in (linked to its predecessor or not) is named as inserted."""
        with tamper(path) as conn:
            prev = row(conn, 2)["head"]
            shift_from(conn, 3, 1)
            insert(conn, forged(prev, 3, linked=linked))
        report = verify(path)
        assert (report.kind, report.position, report.event) == ("inserted", 3, "forged")

    def test_inserted_before_the_first_row(self, path: Path) -> None:
        with tamper(path) as conn:
            shift_from(conn, 1, 1)
            insert(conn, forged(GENESIS_HEX, 1))
        report = verify(path)
        assert (report.kind, report.position, report.event) == ("inserted", 1, "forged")

    def test_reordered_rows(self, path: Path) -> None:
        """Swapping two rows names the first one out of order."""
        with tamper(path) as conn:
            conn.execute("UPDATE events SET position = -1 WHERE position = 3")
            conn.execute("UPDATE events SET position = 3 WHERE position = 4")
            conn.execute("UPDATE events SET position = 4 WHERE position = -1")
        report = verify(path)
        assert (report.kind, report.position, report.event) == ("reordered", 3, "e4")

    def test_truncation_needs_a_recorded_head(self, path: Path) -> None:
        """Truncation leaves a valid chain: only --expect-head (recorded elsewhere) catches it."""
        recorded = verify(path).head
        with tamper(path) as conn:
            conn.execute("DELETE FROM events WHERE position > 4")
        report = verify(path)  # the tree still has rows 5 and 6
        assert (report.ok, report.kind, report.position) == (False, "tree", 5)
        with tamper(path) as conn:
            conn.execute("DELETE FROM tree WHERE position > 4")
        assert verify(path).ok
        report = verify(path, expect_head=recorded)
        assert (report.ok, report.kind) == (False, "truncated_or_rewritten")
        assert recorded in report.detail
        assert not verify(path, expect_prefix=recorded).ok

    def test_growth_is_not_an_expected_head_but_is_a_prefix(self, path: Path) -> None:
        """A log that has grown fails --expect-head (naming where the head is) and passes --expect-prefix."""
        recorded = verify(path).head
        with Store.open(path) as store:
            store.append([json.dumps(stamp([A("F1", "k1", "v1")] * 7)[6] | {"fact": "F7"})])
        report = verify(path, expect_head=recorded)
        assert (report.ok, report.kind, report.position, report.event) == (False, "grown", 6, "e6")
        assert verify(path, expect_prefix=recorded).ok
        assert verify(path, expect_prefix=GENESIS_HEX).ok


class TestKeyedChain:
    def test_rewrite_with_the_plain_chain_recomputed(self, keyed_path: Path) -> None:
        """Whoever lacks the key can fix the plain chain but not the keyed one."""
        with tamper(keyed_path) as conn:
            prev = bytes.fromhex(row(conn, 2)["head"])
            for position in range(3, 7):
                old = row(conn, position)
                body = old["body"].replace('"v3"', '"v9"')
                head = step(prev, body)
                conn.execute(
                    "UPDATE events SET body = ?, prev_head = ?, head = ? WHERE position = ?",
                    [body, prev.hex(), head.hex(), position],
                )
                prev = head
            retree(conn)
        plain = verify(keyed_path)
        assert plain.ok and plain.note and "keyed" in plain.note
        report = verify(keyed_path, key=KEY)
        assert (report.ok, report.kind, report.position, report.event) == (
            False,
            "keyed_mismatch",
            3,
            "e3",
        )

    def test_keyed_chain_removed(self, keyed_path: Path) -> None:
        """A store stripped of its keyed chain (and its claim) fails when the auditor brings the key."""
        with tamper(keyed_path) as conn:
            conn.execute("UPDATE events SET keyed_head = NULL")
            conn.execute("UPDATE store_meta SET value = 'false' WHERE name = 'keyed'")
        report = verify(keyed_path, key=KEY)
        assert (report.ok, report.kind, report.position) == (False, "not_keyed", 1)

    def test_wrong_key_and_unkeyed_store(self, keyed_path: Path, path: Path) -> None:
        """A different key fails at the first event; a key on an unkeyed store fails too."""
        assert verify(keyed_path, key=KEY).ok
        wrong = verify(keyed_path, key=b"x" * 16)
        assert (wrong.kind, wrong.position) == ("keyed_mismatch", 1)
        assert verify(path, key=KEY).kind == "not_keyed"

    def test_keyed_head_of_the_export_matches(self, keyed_path: Path, tmp_path: Path) -> None:
        """An exported keyed log has the same plain and keyed heads as its store."""
        exported = tmp_path / "out.jsonl"
        with Store.open(keyed_path) as store:
            exported.write_text("".join(line + "\n" for line in store.export()), encoding="utf-8")
        from_store, from_file = verify(keyed_path, key=KEY), verify_file(exported, key=KEY)
        assert (from_file.head, from_file.keyed_head) == (from_store.head, from_store.keyed_head)
        assert from_file.keyed_head == head_of(six_canonical(), key=KEY)


def six_canonical() -> list[str]:
    return [canonical_event(e) for e in parse_events(six())]


class TestFiles:
    def test_file_head_is_the_canonical_chain(self, tmp_path: Path, path: Path) -> None:
        """A JSONL file (canonical or not) has the head of its canonical events."""
        raw = tmp_path / "raw.jsonl"
        raw.write_text("\n".join(six()) + "\n\n", encoding="utf-8")
        report = verify_file(raw)
        assert report.ok and report.events == 6 and report.head == verify(path).head
        assert verify_path(raw, expect_head=report.head).ok
        assert verify_path(path, expect_head=report.head).ok

    def test_truncated_and_grown_files(self, tmp_path: Path) -> None:
        full = tmp_path / "full.jsonl"
        full.write_text("\n".join(six()), encoding="utf-8")
        short = tmp_path / "short.jsonl"
        short.write_text("\n".join(six()[:4]), encoding="utf-8")
        full_head, short_head = verify_file(full).head, verify_file(short).head
        truncated = verify_file(short, expect_head=full_head)
        assert (truncated.ok, truncated.kind) == (False, "truncated_or_rewritten")
        grown = verify_file(full, expect_head=short_head)
        assert (grown.ok, grown.kind, grown.position, grown.event) == (False, "grown", 4, "e4")
        assert verify_file(full, expect_prefix=short_head).ok
        assert not verify_file(short, expect_prefix=full_head).ok

    def test_edited_file_does_not_match(self, tmp_path: Path) -> None:
        log = tmp_path / "log.jsonl"
        log.write_text("\n".join(six()), encoding="utf-8")
        recorded = verify_file(log).head
        log.write_text("\n".join(six()).replace('"v3"', '"v9"'), encoding="utf-8")
        assert verify_file(log, expect_head=recorded).kind == "truncated_or_rewritten"

    def test_no_policy_needed(self, tmp_path: Path) -> None:
        """Authority names off the default ladder do not stop verification."""
        log = tmp_path / "log.jsonl"
        log.write_text(
            json.dumps(stamp([A("F1", "k", "v", authority="archon")])[0]), encoding="utf-8"
        )
        assert verify_file(log).ok

    def test_unreadable_files_are_input_errors(self, tmp_path: Path) -> None:
        bad = tmp_path / "bad.jsonl"
        bad.write_text(six()[0] + "\n{oops\n", encoding="utf-8")
        with pytest.raises(InputError) as info:
            verify_file(bad)
        assert info.value.line == 2
        bad.write_bytes(six()[0].encode() + b"\n\n" + six()[1].encode().replace(b"v2", b"\xff\xfe"))
        with pytest.raises(JSONSyntaxError, match="UTF-8") as utf8:
            verify_file(bad)
        assert utf8.value.line == 3
        with pytest.raises(InputError, match="no such file"):
            verify_path(tmp_path / "missing.jsonl")

    def test_heads_on_the_command_line_are_checked(self) -> None:
        assert check_head("AB" * 32, field="expect_head") == "ab" * 32
        with pytest.raises(InputError, match="64 hex"):
            check_head("abc", field="expect_head")


# -- read-only opens (SPEC §9.6) ---------------------------------------------------------

GAMMA = str(Path(sys.executable).with_name("gamma"))

_KILLED_WRITER = """
import os, sys
from gamma.storage.store import Store
store = Store.open(sys.argv[1])
store.append(sys.stdin.read())
os._exit(0)  # killed: no close, no checkpoint; the last commit sits in the WAL
"""


def killed_writer(path: Path) -> None:
    """A store whose last batch (the retract) was committed by a writer killed before closing."""
    with Store.init(path) as store:
        store.append(six()[:5])
    subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(path)], input=six()[5], text=True,
                   check=True)
    assert Path(f"{path}-wal").stat().st_size > 0


def evidence(directory: Path) -> dict[str, str]:
    """The bytes of every file but SQLite's -shm index (a reader may refresh it)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())
            if not p.name.endswith("-shm")}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GAMMA, "--quiet", *args], capture_output=True, text=True, timeout=120)


@contextmanager
def read_only_media(directory: Path) -> Iterator[None]:
    """The directory and its files made unwritable, even for root (chattr +i), then restored."""
    files = sorted(directory.iterdir())
    if os.geteuid() == 0:
        done = subprocess.run(["chattr", "+i", *map(str, files), str(directory)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot make files immutable here: {done.stderr.decode().strip()}")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", *map(str, files), str(directory)], check=True)
    else:
        modes = {p: p.stat().st_mode for p in files}
        for p in files:
            p.chmod(0o444)
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(0o755)
            for p, mode in modes.items():
                p.chmod(mode)


class TestVerifyTouchesNothing:
    def test_a_killed_writers_wal_is_read_not_checkpointed(self, tmp_path: Path) -> None:
        """verify, resolve, replay's reads and export see the WAL's commit; no byte changes."""
        path = tmp_path / "s.db"
        killed_writer(path)
        before = evidence(tmp_path)
        done = cli("verify", str(path))
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == head_of(canonical_event(e) for e in parse_events(six()))
        resolved = cli("resolve", str(path), "--actor", '{"id": "a", "tenant": "acme"}',
                       "--at", "2026-04-01T00:00:00Z", "--format", "json")
        assert resolved.returncode == 0, resolved.stderr
        assert "F1" not in {a["fact"] for a in json.loads(resolved.stdout)["admitted"]}  # the WAL's retract
        assert cli("export", str(path)).stdout.count("\n") == 6
        assert evidence(tmp_path) == before

    def test_reading_on_read_only_media(self, tmp_path: Path) -> None:
        """A checkpointed store on unwritable media verifies and resolves (immutable=1)."""
        directory = tmp_path / "media"
        directory.mkdir()
        path = directory / "s.db"
        with Store.init(path) as store:
            store.append(six())
        assert sorted(p.name for p in directory.iterdir()) == ["s.db"]
        before = evidence(directory)
        with read_only_media(directory):
            assert verify_path(path).ok
            done = cli("verify", str(path))
            assert done.returncode == 0, done.stderr
            resolved = cli("resolve", str(path), "--actor", '{"id": "a", "tenant": "acme"}',
                           "--at", "2026-04-01T00:00:00Z", "--format", "json")
            assert resolved.returncode == 0, resolved.stderr
            assert cli("prove", "inclusion", str(path), "--event", "e2").returncode == 0
        assert evidence(directory) == before

    def test_a_wal_on_read_only_media(self, tmp_path: Path) -> None:
        """With its -shm index the WAL is read there; without one it is a clear error (exit 2),
        never a silently older log."""
        directory = tmp_path / "media"
        directory.mkdir()
        path = directory / "s.db"
        killed_writer(path)
        before = evidence(directory)
        with read_only_media(directory):
            report = verify_path(path)
            assert report.ok and report.events == 6
        assert evidence(directory) == before
        Path(f"{path}-shm").unlink()
        with read_only_media(directory):
            done = cli("verify", str(path))
            assert done.returncode == 2 and "WAL" in done.stderr and "Traceback" not in done.stderr
        assert evidence(directory) == before


class TestExpectPolicy:
    """SPEC §9.6: --expect-policy D: a store's recorded policy must be D (exit 1 otherwise)."""

    def test_cli(self, path: Path, tmp_path: Path) -> None:
        from gamma.core.terms.policy import DEFAULT_POLICY

        assert cli("verify", str(path), "--expect-policy", DEFAULT_POLICY.digest).returncode == 0
        other = cli("verify", str(path), "--expect-policy", "ab" * 32)
        assert other.returncode == 1 and "policy changed" in other.stderr
        jsonl = tmp_path / "log.jsonl"
        jsonl.write_text("\n".join(six()) + "\n")
        refused = cli("verify", str(jsonl), "--expect-policy", DEFAULT_POLICY.digest)
        assert refused.returncode == 2 and "--expect-policy" in refused.stderr
        assert cli("verify", str(path), "--expect-policy", "nothex").returncode == 2
