"""The decision log of ``gamma serve`` (hash chain, several writers, fail closed), freshness
tokens, and the replay of a log against its store (``gamma replay --decisions``)."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
from helpers import A, R, actor

from gamma.cli import main
from gamma.core.incremental.engine import EngineState
from gamma.core.terms.canonical import format_ts
from gamma.core.terms.errors import InputError
from gamma.serve.errors import Forbidden
from gamma.serve.freshness import FreshnessToken
from gamma.serve.replay import Refusal, replay_decisions, statuses_only
from gamma.serve.types import Caller, Handler, View
from gamma.storage.decisions import (
    GENESIS_HEX,
    DecisionEntry,
    DecisionLog,
    DecisionLogFailure,
    DecisionLogLocked,
    decision_log_path,
)
from gamma.storage.engine import Engine
from gamma.storage.store import Store

AT = "2031-01-01T00:00:00Z"
ROOT = "ab" * 32
MAC = "ef" * 32
KEY = bytes(range(32))
#: Records per process in the two-writer test: enough that the two overlap.
PER = 300


def entry(n: int = 0, **changes: Any) -> DecisionEntry:
    base = DecisionEntry(
        endpoint="evaluation", caller="alice-agent",
        actor={"id": "alice", "tenant": "acme"}, on_behalf=None, at=AT,
        request={"resource": {"type": "fact", "id": f"f{n}"}}, position=n, root=ROOT,
        token=f"gt1.{n}.{MAC}", policy="cd" * 32, status=200, response={"decision": n % 2 == 0}, reasons=[],
        duration_ms=0.5,
    )  # fmt: skip
    return attrs.evolve(base, **changes)


def raw(path: Path) -> sqlite3.Connection:
    """A plain connection to the log, its append-only triggers dropped (as a tamperer would)."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    return conn


#: The schema of a format-1 decision log, as gamma wrote it before issue 30 (written here, not
#: taken from the module, so that old files are checked against what they really hold).
FORMAT_1 = (
    "CREATE TABLE decision_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE decisions (seq INTEGER PRIMARY KEY, entry TEXT NOT NULL, hash TEXT NOT NULL)",
    "CREATE TRIGGER decisions_in_order BEFORE INSERT ON decisions "
    "WHEN NEW.seq IS NOT coalesce((SELECT max(seq) FROM decisions), 0) + 1 "
    "BEGIN SELECT RAISE(ABORT, 'the decision log is append-only: a row must be the next seq'); END",
    "CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions "
    "BEGIN SELECT RAISE(ABORT, 'the decision log is append-only: UPDATE refused'); END",
    "CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions "
    "BEGIN SELECT RAISE(ABORT, 'the decision log is append-only: DELETE refused'); END",
    "INSERT INTO decision_meta (name, value) VALUES ('format', 'gamma-decisions'), ('version', '1')",
)


def format_1(path: Path) -> Path:
    """A new, empty format-1 decision log at ``path``."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for statement in FORMAT_1:
        conn.execute(statement)
    conn.close()
    return path


def format_2_chain(path: Path) -> str:
    """The head of a format-2 log computed here from its rows, independently of the module:
    sha256(previous || sha256(salt || entry) || outline), checking each commitment on the way."""
    conn = sqlite3.connect(str(path))
    head = bytes(32)
    rows = conn.execute("SELECT d.seq, d.outline, d.commitment, e.salt, e.entry FROM decisions d"
                        " JOIN decision_entries e ON e.seq = d.seq ORDER BY d.seq").fetchall()  # fmt: skip
    conn.close()
    for _, outline, commitment, salt, text in rows:
        entry_obj = json.loads(text)
        appended = entry_obj["response"].get("appended")
        assert json.loads(outline) == {"appended": appended if isinstance(appended, int) else None,
                                       "endpoint": entry_obj["endpoint"],
                                       "position": entry_obj["position"], "status": entry_obj["status"]}  # fmt: skip
        assert hashlib.sha256(bytes.fromhex(salt) + text.encode()).hexdigest() == commitment
        head = hashlib.sha256(head + bytes.fromhex(commitment) + outline.encode()).digest()
    return head.hex()


# -- freshness tokens --------------------------------------------------------------------


class TestToken:
    @pytest.mark.parametrize("position", [0, 1, 1042, 2**53 - 1])
    def test_round_trip(self, position: int) -> None:
        token = FreshnessToken(position=position, mac=MAC)
        text = token.encode()
        assert text == f"gt1.{position}.{MAC}"
        assert FreshnessToken.decode(text, field="since") == token

    @pytest.mark.parametrize(
        "text",
        [
            "", "gt1", f"gt1..{MAC}", f"gt1.01.{MAC}", f"gt1.-1.{MAC}", f"gt1.+1.{MAC}",
            f"gt1.1.{MAC.upper()}", f"gt1.1.{MAC[:-1]}", f"gt1.1.{MAC}0", f"gt2.1.{MAC}",
            f"GT1.1.{MAC}", f" gt1.1.{MAC}", f"gt1.1.{MAC}\n", f"gt1.1.{MAC}.", f"gt1.1 .{MAC}",
            f"gt1.\u0661.{MAC}", f"gt1.1_0.{MAC}", f"gt1.{2**53}.{MAC}", f"gt1.{'9' * 5000}.{MAC}",
        ],
    )  # fmt: skip
    def test_malformed_is_an_input_error_naming_the_field(self, text: str) -> None:
        with pytest.raises(InputError) as caught:
            FreshnessToken.decode(text, field="Gamma-At-Least-As-Fresh")
        assert caught.value.field == "Gamma-At-Least-As-Fresh"

    def test_not_a_string(self) -> None:
        with pytest.raises(InputError) as caught:
            FreshnessToken.decode(1042, field="since")
        assert caught.value.field == "since"

    def test_construction_checks_its_fields(self) -> None:
        with pytest.raises(InputError):
            FreshnessToken(position=-1, mac=MAC)
        with pytest.raises(InputError):
            FreshnessToken(position=True, mac=MAC)
        with pytest.raises(InputError):
            FreshnessToken(position=1, mac=MAC.upper())

    def test_of_a_view_is_a_mac_over_its_tree_head_never_the_root(self) -> None:
        """The token commits to the root only through the key's MAC: the root (which commits
        to every value, hidden ones too) is nowhere in it, and it matches that root only."""
        state = EngineState()
        state.append([json.dumps(e) for e in _events(3)])
        head = state.tree_head
        token = FreshnessToken.of(state, KEY)
        assert token.position == 3 and head.root not in token.encode()
        domain = b"gamma-token/1\x00" + (3).to_bytes(8, "big") + bytes.fromhex(head.root)
        assert token.mac == hmac.new(KEY, domain, hashlib.sha256).hexdigest()
        assert token.matches(KEY, head.root)
        assert not token.matches(bytes(32), head.root)  # another deployment's key
        state.append([json.dumps(_events(4)[-1])])
        assert not token.matches(KEY, state.tree_head.root)  # another log (prefix)
        assert FreshnessToken.of(state, KEY).position == 4 and FreshnessToken.of(state, KEY).mac != token.mac
        with pytest.raises(InputError):
            FreshnessToken.of(state, b"short")


class TestTokenKey:
    def test_made_once_and_kept_with_the_log(self, tmp_path: Path) -> None:
        """Every writer opening the log, at once or later, and a reader, read one key."""
        path = tmp_path / "s.db.decisions"
        with ThreadPoolExecutor(4) as pool:
            logs = list(pool.map(lambda _: DecisionLog.open(path), range(8)))
        keys = {log.token_key for log in logs}
        for log in logs:
            log.close()
        assert len(keys) == 1 and len(next(iter(keys)) or b"") == 32
        with DecisionLog.open(path) as again, DecisionLog.open(path, read_only=True) as reader:
            assert again.token_key == reader.token_key == next(iter(keys))
        other = tmp_path / "t.db.decisions"
        with DecisionLog.open(other) as log:
            assert log.token_key not in keys  # random: another deployment, another key

    def test_writers_opening_a_new_log_at_once_all_open_it(self, tmp_path: Path) -> None:
        """Workers starting together create one log: switching a new file to WAL needs it to
        itself, and SQLite refuses the others at once ("database is locked", no busy wait);
        each waits its turn instead (about 1 round in 30 failed before)."""
        for round_ in range(60):
            path = tmp_path / f"{round_}.decisions"
            with ThreadPoolExecutor(8) as pool:
                logs = list(pool.map(DecisionLog.open, [path] * 8))
            assert len({log.token_key for log in logs}) == 1
            for log in logs:
                log.close()

    def test_a_log_without_a_key_gets_one_from_its_first_writer(self, tmp_path: Path) -> None:
        path = tmp_path / "s.db.decisions"
        DecisionLog.open(path).close()
        conn = sqlite3.connect(str(path), isolation_level=None)
        conn.execute("DELETE FROM decision_meta WHERE name = 'token_key'")
        conn.close()
        with DecisionLog.open(path, read_only=True) as reader:
            assert reader.token_key is None
        with DecisionLog.open(path) as log:
            assert log.token_key is not None and len(log.token_key) == 32


# -- the decision log --------------------------------------------------------------------


class TestDecisionLog:
    def test_path_is_beside_the_store(self, tmp_path: Path) -> None:
        assert decision_log_path(tmp_path / "s.db") == tmp_path / "s.db.decisions"

    def test_records_in_order_and_the_chain_hashes_each_entrys_salted_commitment(self, tmp_path: Path) -> None:
        path = tmp_path / "log.decisions"
        entries = [entry(n) for n in range(5)]
        with DecisionLog.open(path) as log:
            assert log.version == "2"
            assert [log.record(e) for e in entries] == [1, 2, 3, 4, 5]
            assert list(log.entries()) == list(enumerate(entries, start=1))
            report = log.verify()
            head = log.head()
        assert report.ok and report.entries == 5 and report.redacted == 0
        assert report.head == head[1] == format_2_chain(path) and head[0] == 5
        conn = sqlite3.connect(str(path))
        salts = [s for (s,) in conn.execute("SELECT salt FROM decision_entries")]
        conn.close()
        assert len(set(salts)) == 5 and all(len(bytes.fromhex(s)) == 32 for s in salts)  # fresh each

    def test_a_format_1_log_opens_records_and_verifies_as_format_1(self, tmp_path: Path) -> None:
        """An old file is never converted: its rows stay the entries, chained as they are."""
        path = format_1(tmp_path / "old.decisions")
        entries = [entry(n) for n in range(4)]
        with DecisionLog.open(path) as log:
            assert log.version == "1"
            assert [log.record(e) for e in entries[:2]] == [1, 2]
        with DecisionLog.open(path) as log:
            assert log.record(entries[2]) == 3 and log.record(entries[3]) == 4
            report = log.verify()
            assert list(log.entries()) == list(enumerate(entries, start=1)) and log.redactions() == []
        expected = bytes(32)
        for e in entries:  # computed here independently of the module
            data = json.dumps(e.to_dict(), sort_keys=True, separators=(",", ":")).encode()
            expected = hashlib.sha256(expected + data).digest()
        assert report.ok and report.entries == 4 and report.head == expected.hex()
        conn = sqlite3.connect(str(path))
        assert [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == [
            "decision_meta", "decisions"]
        assert conn.execute("SELECT value FROM decision_meta WHERE name = 'version'").fetchone() == ("1",)
        conn.close()
        with DecisionLog.open(path, read_only=True) as log:
            assert log.verify() == report

    def test_writing_takes_the_lock_first_and_commits_at_the_end(self, tmp_path: Path) -> None:
        """The lock held by another process: the block never runs (DecisionLogFailure). Held
        by this one: another connection cannot record until the block ends; a block that
        raises leaves no row."""
        path = tmp_path / "log.decisions"
        ran: list[str] = []
        with DecisionLog.open(path, busy_timeout=0.1) as log:
            holder = sqlite3.connect(str(path), isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            with pytest.raises(DecisionLogFailure, match="write lock"), log.writing():
                ran.append("stored")
            holder.execute("ROLLBACK")
            with DecisionLog.open(path, busy_timeout=0.1) as other, log.writing() as insert:
                with pytest.raises(DecisionLogFailure):
                    other.record(entry(9))
                assert insert(entry(1)) == 1
            with pytest.raises(RuntimeError), log.writing() as insert:
                insert(entry(2))
                raise RuntimeError("the store refused")
            assert [seq for seq, _ in log.entries()] == [1] and log.verify().ok
            holder.close()
        assert ran == []

    @pytest.mark.parametrize("fmt", ["1", "2"])
    def test_rows_of_one_block_chain_on_the_tail_read_once(self, tmp_path: Path, fmt: str) -> None:
        """Within one ``writing`` block the tail (seq, hash) is read by the first insert and
        carried to the next; a block after another writer's row chains on that row."""
        path = tmp_path / "log.decisions"
        if fmt == "1":
            format_1(path)
        with DecisionLog.open(path) as log, DecisionLog.open(path) as other:
            real = log._conn
            tails: list[str] = []

            class Counting:
                def execute(self, sql: str, *args: Any) -> Any:
                    if sql.startswith("SELECT seq, hash FROM decisions"):
                        tails.append(sql)
                    return real.execute(sql, *args)

            log._conn = Counting()  # type: ignore[assignment]
            with log.writing() as insert:
                assert [insert(entry(n)) for n in range(5)] == [1, 2, 3, 4, 5]
            assert len(tails) == 1
            assert other.record(entry(6)) == 6
            with log.writing() as insert:
                assert [insert(entry(n)) for n in (7, 8)] == [7, 8]
            log._conn = real  # type: ignore[assignment]
            assert len(tails) == 2
            report = log.verify()
            assert report.ok and report.seq == 8
            if fmt == "2":
                assert format_2_chain(path) == report.head

    def test_an_empty_log_verifies(self, tmp_path: Path) -> None:
        with DecisionLog.open(tmp_path / "log.decisions") as log:
            assert log.verify().to_dict() == {"broken": None, "entries": 0, "erase_events": [],
                                              "head": GENESIS_HEX, "ok": True, "problem": None,
                                              "redacted": 0, "seq": 0}  # fmt: skip

    def test_rows_are_append_only_in_sqlite_itself(self, tmp_path: Path) -> None:
        path = tmp_path / "log.decisions"
        with DecisionLog.open(path) as log:
            log.record(entry(1))
            log.record(entry(2))
        conn = sqlite3.connect(str(path), isolation_level=None)
        for sql in ("UPDATE decisions SET commitment = 'x'", "DELETE FROM decisions",
                    "INSERT INTO decisions (seq, outline, commitment, hash) VALUES (5, '{}', 'x', 'x')",
                    "INSERT OR REPLACE INTO decisions (seq, outline, commitment, hash) VALUES (2, '{}', 'x', 'x')",
                    "UPDATE decision_entries SET entry = '{}'", "DELETE FROM decision_entries",
                    "INSERT OR REPLACE INTO decision_entries (seq, salt, entry) VALUES (2, 'x', '{}')",
                    "INSERT INTO redactions (seq, erase_event) VALUES (1, 'e-never-applied')"):  # fmt: skip
            with pytest.raises(sqlite3.DatabaseError, match="append-only|redaction"):
                conn.execute(sql)
        conn.execute("INSERT INTO applied_erasures (erase_event) VALUES ('e-1')")  # allowed
        conn.execute("INSERT OR REPLACE INTO applied_erasures (erase_event) VALUES ('e-1')")  # ignored
        for sql in ("INSERT INTO redactions (seq, erase_event) VALUES (9, 'e-1')",  # no such entry
                    "UPDATE applied_erasures SET erase_event = 'e-2'", "DELETE FROM applied_erasures"):  # fmt: skip
            with pytest.raises(sqlite3.DatabaseError, match="append-only|redaction"):
                conn.execute(sql)
        assert conn.execute("SELECT count(*) FROM applied_erasures").fetchone() == (1,)
        conn.execute("INSERT INTO redactions (seq, erase_event) VALUES (1, 'e-1')")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM redactions")
        conn.execute("DELETE FROM decision_entries WHERE seq = 1")  # the one deletion allowed
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM decision_entries WHERE seq = 2")
        conn.close()
        with DecisionLog.open(path, read_only=True) as log:
            report = log.verify()
        assert report.ok and report.redacted == 1 and report.erase_events == ("e-1",)

    def test_format_1_rows_are_append_only_in_sqlite_itself(self, tmp_path: Path) -> None:
        path = format_1(tmp_path / "log.decisions")
        with DecisionLog.open(path) as log:
            log.record(entry(1))
        conn = sqlite3.connect(str(path), isolation_level=None)
        for sql in ("UPDATE decisions SET entry = '{}'", "DELETE FROM decisions",
                    "INSERT INTO decisions (seq, entry, hash) VALUES (5, '{}', 'x')"):  # fmt: skip
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                conn.execute(sql)

    def _tampered(self, tmp_path: Path, version: str, sql: str) -> Any:
        path = tmp_path / "log.decisions"
        if version == "1":
            format_1(path)
        with DecisionLog.open(path) as log:
            for n in range(5):
                log.record(entry(n))
        conn = raw(path)
        conn.executescript(sql)
        conn.close()
        with DecisionLog.open(path, read_only=True) as log:
            return log.verify()

    @pytest.mark.parametrize("version", ["1", "2"])
    def test_an_edited_row_is_found(self, tmp_path: Path, version: str) -> None:
        edited = entry(2, response={"decision": False}).canonical().decode()
        table = "decisions" if version == "1" else "decision_entries"
        report = self._tampered(tmp_path, version, f"UPDATE {table} SET entry = '{edited}' WHERE seq = 3")
        assert not report.ok and report.broken == 3 and report.entries == 2
        if version == "2":
            assert "commitment" in (report.problem or "")

    @pytest.mark.parametrize("version", ["1", "2"])
    def test_a_deleted_row_is_found(self, tmp_path: Path, version: str) -> None:
        report = self._tampered(tmp_path, version, "DELETE FROM decisions WHERE seq = 2")
        assert not report.ok and report.broken == 3 and "missing" in (report.problem or "")

    def test_an_entry_deleted_without_a_redaction_is_found(self, tmp_path: Path) -> None:
        """Its commitment still chains, but nothing says why the entry went: tampering."""
        report = self._tampered(tmp_path, "2", "DELETE FROM decision_entries WHERE seq = 2")
        assert not report.ok and report.broken == 2 and "without a redaction" in (report.problem or "")

    def test_a_forged_redaction_with_a_changed_commitment_is_found(self, tmp_path: Path) -> None:
        """A redaction made by hand that also swaps in another commitment (to hide what the
        entry said) breaks the chain at that row."""
        report = self._tampered(tmp_path, "2", f"""
            INSERT INTO applied_erasures (erase_event) VALUES ('e-forged');
            INSERT INTO redactions (seq, erase_event) VALUES (2, 'e-forged');
            DELETE FROM decision_entries WHERE seq = 2;
            UPDATE decisions SET commitment = '{"ab" * 32}' WHERE seq = 2;
        """)
        assert not report.ok and report.broken == 2 and "hash" in (report.problem or "")

    def test_a_redaction_of_a_held_entry_or_of_a_cut_row_is_found(self, tmp_path: Path) -> None:
        report = self._tampered(tmp_path, "2", """
            INSERT INTO applied_erasures (erase_event) VALUES ('e-1');
            INSERT INTO redactions (seq, erase_event) VALUES (4, 'e-1');
        """)
        assert report.broken == 4 and "still held" in (report.problem or "")
        (tmp_path / "cut").mkdir()
        report = self._tampered(tmp_path / "cut", "2", "DELETE FROM decisions WHERE seq = 5")
        assert report.broken == 5 and "decision_entries holds seq 5" in (report.problem or "")

    def test_an_edited_outline_is_found(self, tmp_path: Path) -> None:
        """The outline (what replay counts a redacted write by) is chained too."""
        outline = '{"appended":null,"endpoint":"evaluation","position":2,"status":403}'
        report = self._tampered(tmp_path, "2", f"UPDATE decisions SET outline = '{outline}' WHERE seq = 3")
        assert report.broken == 3 and "hash" in (report.problem or "")

    @pytest.mark.parametrize("version", ["1", "2"])
    def test_reordered_rows_are_found(self, tmp_path: Path, version: str) -> None:
        # rows 2 and 3 swapped whole (entry and hash), seqs kept in order
        tables = ("decisions",) if version == "1" else ("decisions", "decision_entries")
        report = self._tampered(tmp_path, version, "".join(f"""
            UPDATE {t} SET seq = -2 WHERE seq = 2;
            UPDATE {t} SET seq = 2 WHERE seq = 3;
            UPDATE {t} SET seq = 3 WHERE seq = -2;
        """ for t in tables))
        assert not report.ok and report.broken == 2

    def test_a_row_in_other_json_spelling_is_found(self, tmp_path: Path) -> None:
        """Same entry, other bytes, commitment and hash recomputed for them: not the canonical row."""
        path = tmp_path / "log.decisions"
        with DecisionLog.open(path) as log:
            log.record(entry(0))
        spelled = json.dumps(entry(0).to_dict(), indent=1)
        conn = raw(path)
        salt, outline = conn.execute("SELECT e.salt, d.outline FROM decision_entries e"
                                     " JOIN decisions d ON d.seq = e.seq").fetchone()  # fmt: skip
        commitment = hashlib.sha256(bytes.fromhex(salt) + spelled.encode()).hexdigest()
        digest = hashlib.sha256(bytes(32) + bytes.fromhex(commitment) + outline.encode()).hexdigest()
        conn.execute("UPDATE decision_entries SET entry = ? WHERE seq = 1", (spelled,))
        conn.execute("UPDATE decisions SET commitment = ?, hash = ? WHERE seq = 1", (commitment, digest))
        conn.close()
        with DecisionLog.open(path) as log:
            report = log.verify()
        assert report.broken == 1 and "canonical" in (report.problem or "")

    def test_fails_closed_when_it_cannot_write(self, tmp_path: Path) -> None:
        path = tmp_path / "log.decisions"
        holder = DecisionLog.open(path)
        blocker = sqlite3.connect(str(path), isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        with DecisionLog.open(path, busy_timeout=0.05) as log:
            with pytest.raises(DecisionLogFailure):
                log.record(entry(1))
            blocker.execute("ROLLBACK")
            assert log.record(entry(1)) == 1  # and recovers once the lock is free
        holder.close()

    def test_an_entry_that_is_not_json_fails_closed(self, tmp_path: Path) -> None:
        with DecisionLog.open(tmp_path / "log.decisions") as log:
            with pytest.raises(DecisionLogFailure):
                log.record(entry(1, request={"n": 2**70}))
            assert len(log) == 0

    def test_refuses_what_is_not_a_decision_log(self, tmp_path: Path) -> None:
        store = tmp_path / "s.db"
        Store.init(store).close()
        with pytest.raises(InputError, match="not a decision log"):
            DecisionLog.open(store)
        text = tmp_path / "notes.txt"
        text.write_text("hello")
        with pytest.raises(InputError, match="SQLite"):
            DecisionLog.open(text)
        with pytest.raises(InputError, match="no such"):
            DecisionLog.open(tmp_path / "missing.decisions", read_only=True)
        assert not (tmp_path / "missing.decisions").exists()

    def test_threads_of_one_worker_share_a_log(self, tmp_path: Path) -> None:
        """A server's thread pool records through one open log."""
        with DecisionLog.open(tmp_path / "log.decisions", synchronous="full") as log:
            with ThreadPoolExecutor(4) as pool:
                seqs = list(pool.map(lambda n: log.record(entry(n)), range(100)))
            assert sorted(seqs) == list(range(1, 101))
            assert log.verify().entries == 100
        with pytest.raises(InputError) as caught:
            DecisionLog.open(tmp_path / "log.decisions", synchronous="off")  # type: ignore[arg-type]
        assert caught.value.field == "synchronous"

    def test_two_processes_recording_at_once_keep_one_chain(self, tmp_path: Path) -> None:
        path = tmp_path / "log.decisions"
        DecisionLog.open(path).close()
        go = tmp_path / "go"
        script = textwrap.dedent("""
            import sys, time
            from pathlib import Path
            from gamma.storage.decisions import DecisionEntry, DecisionLog
            path, worker, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
            with DecisionLog.open(path) as log:
                Path(f"{go}.{worker}").touch()
                while not go.exists():
                    time.sleep(0.001)
                for n in range(PER):
                    log.record(DecisionEntry(endpoint="resolve", caller=worker, actor={}, on_behalf=None,
                        at="2031-01-01T00:00:00Z", request={"n": n}, position=0, root="0" * 64,
                        token="gt1.0." + "0" * 64, policy="p", status=200, response={}, reasons=[], duration_ms=0.1))
                    time.sleep(0.0002)  # a request's own work between two records
        """).replace("PER", str(PER))
        workers = ("w1", "w2")
        procs = [subprocess.Popen([sys.executable, "-c", script, str(path), w, str(go)],
                                  stderr=subprocess.PIPE, text=True) for w in workers]  # fmt: skip
        deadline = time.monotonic() + 30
        while not all(Path(f"{go}.{w}").exists() for w in workers) and time.monotonic() < deadline:
            time.sleep(0.005)
        go.touch()
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
        with DecisionLog.open(path, read_only=True) as log:
            report = log.verify()
            rows = [(e.caller, e.request["n"]) for _, e in log.entries()]
        assert report.ok and report.entries == 2 * PER
        for worker in workers:  # each worker's records all there, in its own order
            assert [n for w, n in rows if w == worker] == list(range(PER))
        switches = sum(a[0] != b[0] for a, b in itertools.pairwise(rows))
        assert switches > 1, "the two writers did not overlap: the test proved nothing"


# -- replay ------------------------------------------------------------------------------


def _events(n: int) -> list[dict[str, Any]]:
    return [{"id": f"e{i}", "type": "assert", "actor": "writer", "tenant": "acme", "fact": f"f{i}",
             "key": f"k{i}", "value": i, "ts": format_ts(datetime(2026, 3, 1, 9, i))}
            for i in range(1, n + 1)]  # fmt: skip


def h_resolve(view: View, caller: Caller, at: datetime, body: Mapping[str, Any]) -> dict[str, Any]:
    res = view.resolve(caller.actor, at)
    return {"admitted": [a.fact for a in res.admitted],
            "excluded": {x.fact: list(x.codes) for x in res.excluded}}  # fmt: skip


def h_check(view: View, caller: Caller, at: datetime, body: Mapping[str, Any]) -> dict[str, Any]:
    fact = body.get("fact")
    if not isinstance(fact, str):
        raise InputError("a fact id", field="fact")
    decision = view.check(caller.actor, at, [fact])[fact]
    return {"fact": fact, "codes": list(getattr(decision, "codes", ()))}


HANDLERS: dict[str, Handler] = {"resolve": h_resolve, "check": h_check}
ALICE = Caller(name="alice-agent", actor=actor("alice"))


class Server:
    """What the server does around a handler, minus HTTP: decide over a view, record the entry."""

    def __init__(self, path: Path, handlers: Mapping[str, Handler] = HANDLERS,
                 refusal: Refusal = statuses_only) -> None:  # fmt: skip
        Store.init(path).close()
        self.path = path
        self.handlers = handlers
        self.refusal = refusal
        self.engine = Engine.open(path)
        self.log = DecisionLog.open(decision_log_path(path))

    def decide(self, endpoint: str, body: dict[str, Any], *, view: Any = None, caller: Caller = ALICE,
               at: str = AT, tamper: dict[str, Any] | None = None) -> int:  # fmt: skip
        view = self.engine if view is None else view
        try:
            status, response = 200, self.handlers[endpoint](view, caller, datetime.fromisoformat(at), body)
        except (InputError, Forbidden) as exc:
            status, answered = self.refusal(exc)
            response = answered or {"error": str(exc)}
        return self.log.record(self._entry(endpoint, body, view, caller, at, status,
                                           tamper or response))  # fmt: skip

    def append(self, events: list[dict[str, Any]], *, recorded: list[dict[str, Any]] | None = None) -> int:
        result = self.engine.append([json.dumps(e) for e in events])
        return self.log.record(self._entry("append", {"events": recorded or events}, self.engine,
                                           ALICE, AT, 200, result.to_dict()))  # fmt: skip

    def _entry(self, endpoint: str, body: dict[str, Any], view: Any, caller: Caller, at: str,
               status: int, response: dict[str, Any]) -> DecisionEntry:  # fmt: skip
        assert self.log.token_key is not None
        token = FreshnessToken.of(view, self.log.token_key)
        return DecisionEntry(endpoint=endpoint, caller=caller.name, actor=attrs.asdict(caller.actor),
                             on_behalf=None, at=at, request=body, position=token.position,
                             root=view.tree_head.root, token=token.encode(),
                             policy=view.policy.digest, status=status,
                             response=response, reasons=[], duration_ms=1.25,
                             auditor=caller.auditor)  # fmt: skip

    def close(self) -> None:
        self.engine.close()
        self.log.close()


@pytest.fixture
def served(tmp_path: Path) -> Any:
    """A store served for a while: writes, decisions before and after a retraction, an exact
    read over an older prefix, a refused request; every one of them logged."""
    server = Server(tmp_path / "s.db")
    events = _events(3)
    server.append(events[:2])
    server.decide("resolve", {})
    server.decide("check", {"fact": "f1"})
    no_ts = {k: v for k, v in events[2].items() if k != "ts"}  # the store stamps it
    server.append([no_ts])
    server.append([{**A("f9", "k9", 9), "id": "e9", "actor": "writer", "tenant": "acme"}])
    server.append([{**R("f1"), "id": "e10", "actor": "writer", "tenant": "acme"}])
    server.decide("check", {"fact": "f1"})  # retracted now
    server.decide("check", {"fact": "nope"})  # refused: 400
    exact = EngineState(server.engine.policy)
    exact.extend(server.engine.events[:2])
    server.decide("resolve", {}, view=exact)  # at_exact an older token: before the others
    yield server
    server.close()


class TestReplay:
    def test_a_served_log_replays_the_same(self, served: Server) -> None:
        result = replay_decisions(served.engine._store.path, handlers=HANDLERS)  # type: ignore[union-attr]
        assert result.ok, result.render()
        assert (result.entries, result.decisions, result.appends, result.different) == (9, 5, 4, 0)
        assert result.to_dict()["ok"] is True

    def test_the_state_is_extended_never_refolded(self, served: Server, monkeypatch: pytest.MonkeyPatch) -> None:
        taken: list[int] = []
        extend = EngineState.extend

        def counting(self: EngineState, events: Any, **kw: Any) -> None:
            taken.append(len(events))
            extend(self, events, **kw)

        monkeypatch.setattr(EngineState, "extend", counting)
        replay_decisions(served.engine._store.path, handlers=HANDLERS)  # type: ignore[union-attr]
        assert sum(taken) == len(served.engine)  # every event folded once, whatever the entries

    def test_a_lying_response_is_reported_with_seq_endpoint_and_field(self, served: Server) -> None:
        seq = served.decide("check", {"fact": "f2"}, tamper={"fact": "f2", "codes": ["expired"]})
        result = replay_decisions(served.engine._store.path, handlers=HANDLERS)  # type: ignore[union-attr]
        assert not result.ok and result.chain.ok and result.different == 1
        (diff,) = result.differences
        assert (diff.seq, diff.endpoint, diff.field) == (seq, "check", "response.codes.length")
        assert "seq 10 check: response.codes.length" in result.render()

    def test_a_response_edited_in_the_file_breaks_the_chain(self, served: Server) -> None:
        path = decision_log_path(served.engine._store.path)  # type: ignore[union-attr]
        served.log.close()
        conn = raw(path)
        text = conn.execute("SELECT entry FROM decision_entries WHERE seq = 4").fetchone()[0]
        obj = orjson.loads(text)
        obj["response"]["codes"] = ["retracted"]
        conn.execute("UPDATE decision_entries SET entry = ? WHERE seq = 4", (orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode(),))
        conn.close()
        result = replay_decisions(path.with_suffix(""), handlers=HANDLERS)
        assert not result.ok and result.chain.broken == 4 and result.replayed == 3

    def test_a_wrong_root_token_status_or_position_is_reported(self, served: Server) -> None:
        store = served.path
        good = list(served.log.entries())
        served.log.record(attrs.evolve(good[1][1], root="00" * 32))
        served.log.record(attrs.evolve(good[2][1], status=400))
        served.log.record(attrs.evolve(good[2][1], position=99))
        served.log.record(attrs.evolve(good[2][1], endpoint="nonsuch"))
        forged = FreshnessToken.make(bytes(32), good[2][1].position, good[2][1].root).encode()
        served.log.record(attrs.evolve(good[2][1], token=forged))
        result = replay_decisions(store, handlers=HANDLERS)
        assert [(d.seq, d.field) for d in result.differences] == [
            (10, "root"), (11, "status"), (12, "position"), (13, "endpoint"), (14, "token")]

    def test_a_write_not_as_stored_is_reported(self, served: Server) -> None:
        extra = {**A("f20", "k20", 20), "id": "e20", "actor": "writer", "tenant": "acme"}
        seq = served.append([extra], recorded=[{**extra, "value": 21}])
        missing = served.log.record(attrs.evolve(list(served.log.entries())[0][1],
                                                 request={"events": [{**extra, "id": "e21"}]}))  # fmt: skip
        result = replay_decisions(served.engine._store.path, handlers=HANDLERS)  # type: ignore[union-attr]
        found = sorted((d.seq, d.field) for d in result.differences)
        # the copied row also claims the two events the first write appended: each is
        # covered twice, reported at that second claimant
        assert found == [(seq, "request.events[0].value"), (missing, "coverage"),
                         (missing, "coverage"), (missing, "request.events[0]")]


class TestCli:
    def gamma(self, capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exited:
            main([str(a) for a in args])
        out, err = capsys.readouterr()
        return int(exited.value.code or 0), out, err

    def test_exit_statuses(self, served: Server, capsys: pytest.CaptureFixture[str],
                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
        monkeypatch.setattr("gamma.cli.review.server_decisions",
                            lambda store, callers: (HANDLERS, statuses_only))  # fmt: skip
        store = served.path
        code, out, _ = self.gamma(capsys, "replay", store, "--decisions")
        assert code == 0 and out.startswith("9 of 9 entries replayed") and "0 different" in out
        code, out, _ = self.gamma(capsys, "replay", store, "--decisions", "--json")
        summary = json.loads(out)
        assert code == 0 and summary["ok"] is True and summary["entries"] == 9
        served.decide("check", {"fact": "f2"}, tamper={"fact": "f2", "codes": ["expired"]})
        code, out, _ = self.gamma(capsys, "replay", store, "--decisions", "--json")
        assert code == 1 and json.loads(out)["differences"][0]["field"] == "response.codes.length"
        code, _, err = self.gamma(capsys, "replay", store.with_name("nope.db"), "--decisions")
        assert code == 2 and "Error" in err
        code, _, err = self.gamma(capsys, "replay", store, "--decisions", "--records", store.parent)
        assert code == 2 and "--records" in err

    def test_the_servers_own_endpoints_replay(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Decisions of the real endpoints (``gamma.serve.endpoints``), through the real CLI."""
        endpoints = pytest.importorskip("gamma.serve.endpoints")
        service = pytest.importorskip("gamma.serve.service")
        auditor = Caller(name="auditor", actor=actor("audra"), auditor=True)
        server = Server(tmp_path / "s.db", endpoints.HANDLERS, service.refusal)
        try:
            server.append(_events(2))
            server.decide("resolve", {"view": "json"})
            server.decide("explain", {"fact": "f2"})
            server.decide("explain", {"fact": "f-unknown"})  # refused as unknown
            server.decide("resolve", {"subject": {"id": "bob", "tenant": "acme"}})  # refused: 403
            server.decide("resolve", {"subject": {"id": "bob", "tenant": "acme"}}, caller=auditor)
            server.append([{**R("f1"), "id": "e10", "actor": "alice", "tenant": "acme"}])
            server.decide("evaluation", {"subject": {"type": "agent", "id": "alice"},
                                         "resource": {"type": "fact", "id": "f1"},
                                         "action": {"name": "rely"}})  # fmt: skip
        finally:
            server.close()
        code, out, _ = self.gamma(capsys, "replay", server.path, "--decisions", "--json")
        summary = json.loads(out)
        assert code == 0 and summary["ok"] and summary["entries"] == 8, out

    def test_subject_search_replays_with_the_servers_callers(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``--callers``: subject search lists the server's callers, so its replay needs them."""
        endpoints = pytest.importorskip("gamma.serve.endpoints")
        identity = pytest.importorskip("gamma.serve.identity")
        service = pytest.importorskip("gamma.serve.service")
        callers_file = tmp_path / "callers.toml"
        callers_file.write_text(textwrap.dedent(f"""
            [[caller]]
            name = "auditor"
            token_sha256 = "{'1' * 64}"
            auditor = true
            actor = {{ id = "audra", tenant = "acme" }}

            [[caller]]
            name = "alice-agent"
            token_sha256 = "{'2' * 64}"
            actor = {{ id = "alice", tenant = "acme" }}
        """))
        callers = identity.Callers.load(callers_file)
        auditor = next(c for c in callers if c.auditor)
        server = Server(tmp_path / "s.db", endpoints.handlers(callers), service.refusal)
        try:
            server.append(_events(1))
            server.decide("search/subject", {"subject": {"type": "agent"},
                                             "resource": {"type": "fact", "id": "f1"},
                                             "action": {"name": "rely"}}, caller=auditor)  # fmt: skip
        finally:
            server.close()
        code, out, _ = self.gamma(capsys, "replay", server.path, "--decisions", "--callers", callers_file)
        assert code == 0, out
        code, out, _ = self.gamma(capsys, "replay", server.path, "--decisions", "--json")
        assert code == 1 and json.loads(out)["differences"][0]["field"].startswith("response."), out
        code, _, err = self.gamma(capsys, "replay", server.path, "--callers", callers_file)
        assert code == 2 and "--callers goes with --decisions" in err


def test_an_open_decision_log_keeps_its_wal_while_this_process_looks_at_it(tmp_path: Path) -> None:
    """As for the store (tests/test_store_locks.py): a reader of the log's header in this
    process must not drop the writer's locks, or another process's close deletes the WAL."""
    path = tmp_path / "s.db.decisions"
    wal = Path(f"{path}-wal")
    other = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT count(*) FROM sqlite_master'); c.close()"
    with DecisionLog.open(path) as log:
        log.record(entry(1))
        assert wal.exists()
        DecisionLog.open(path, read_only=True).close()
        DecisionLog.open(path).close()  # a second worker of this process
        subprocess.run([sys.executable, "-c", other, str(path)], check=True)
        assert wal.exists(), "the live WAL was checkpointed and deleted under an open log"


class TestCommit:
    """``commit``: prepared rows chained from a tail carried in memory, in one statement."""

    def test_two_writers_interleaved_keep_one_chain(self, tmp_path: Path) -> None:
        """Two connections (two workers) commit in turn, alone and in groups: each one's
        carried tail is stale after the other wrote, the rows still take the next seqs, and the
        chain computed here independently verifies."""
        path = tmp_path / "memory.decisions"
        with DecisionLog.open(path) as a, DecisionLog.open(path) as b:
            seqs = a.commit([a.prepare(entry(1))])
            seqs += b.commit([b.prepare(entry(n)) for n in (2, 3, 4)])
            seqs += a.commit([a.prepare(entry(n)) for n in (5, 6)])  # its tail is seq 1: stale
            seqs += a.commit([a.prepare(entry(7))], wait=False)
            seqs += b.commit([b.prepare(entry(8))], wait=False)
            assert seqs == list(range(1, 9))
            report = a.verify()
            assert report.ok and report.seq == 8 and report.head == format_2_chain(path)
            assert [e.request for _, e in a.entries()] == [entry(n).request for n in range(1, 9)]

    def test_a_commit_that_may_not_wait_leaves_the_lock_to_its_holder(self, tmp_path: Path) -> None:
        """The lock held by another connection: ``wait=False`` is DecisionLogLocked at once,
        nothing written; then, waiting, it is written once the holder commits."""
        path = tmp_path / "memory.decisions"
        with DecisionLog.open(path) as log, DecisionLog.open(path) as other:
            log.record(entry(1))
            with other.writing() as insert:
                insert(entry(2))
                started = time.perf_counter()
                with pytest.raises(DecisionLogLocked):
                    log.commit([log.prepare(entry(3))], wait=False)
                assert time.perf_counter() - started < 0.5
            assert log.commit([log.prepare(entry(3))], wait=False) == [3]
            assert log.verify().ok and len(log) == 3
