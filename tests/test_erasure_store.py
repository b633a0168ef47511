"""Issue 30, the store's side: committed-value stores, erasure that leaves every proof valid and
no byte of the value behind, verify telling erased from tampered, and the explicit migration
of a plaintext store to committed values (SPEC §9, §21)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from click.testing import CliRunner
from helpers import A, R, stamp

from gamma.cli import main
from gamma.core.integrity.chain import head_of
from gamma.core.integrity.commitment import commit
from gamma.core.reading.events import event_line
from gamma.core.terms.canonical import canonical_json
from gamma.core.terms.errors import (
    DuplicateIdError,
    InputError,
    StoreBusyError,
    UnknownReferenceError,
    ValueTypeError,
)
from gamma.core.terms.policy import DEFAULT_POLICY, parse_policy
from gamma.storage.committing import migrate_to_committed
from gamma.storage.engine import Engine
from gamma.storage.erasure import STEPS
from gamma.storage.migrations import LATEST, MIGRATIONS, current_version, migrate
from gamma.storage.proofs import prove_consistency, prove_inclusion, verify_inclusion
from gamma.storage.seal import STORE_KEYED_SEAL, store_seals
from gamma.storage.store import Store

KEY = b"an erasure test chain key, 32 b."
BASIS = "GDPR Art. 17(1)(a)"
POLICY = parse_policy("""
[writers]
"dpo" = "policy"
"*" = "peer"

[erasure]
authority = "policy"
""")

SECRET = "alice-secret-7Q2XK9PZ"  # a value distinctive enough to scan bytes for


def events() -> list[dict[str, Any]]:
    return stamp([
        A("F1", "email", SECRET, subject="alice"),
        A("F2", "email", "bob@example.org", subject="bob"),
        A("F3", "phone", 5550100, subject="alice"),
        A("F4", "plan", "gold", tenant="other", subject="alice"),
        R("F2"),
        A("F5", "city", "Lyon", subject="alice"),
    ])


def lines(rows: list[dict[str, Any]] | None = None) -> list[str]:
    return [json.dumps(row) for row in (rows if rows is not None else events())]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "log.db"


@pytest.fixture
def store(path: Path) -> Iterator[Store]:
    with Store.init(path, policy=POLICY, commit_values=True) as created:
        created.append(lines())
        yield created


def files(path: Path) -> list[bytes]:
    """The store's bytes and its WAL's, read in a child process (this one may hold SQLite's
    POSIX locks on the file, which closing a descriptor of it here would drop)."""
    script = ("import sys, pathlib; p = pathlib.Path(sys.argv[1]); w = pathlib.Path(sys.argv[1]"
              " + '-wal'); sys.stdout.write(p.read_bytes().hex() + ' ' + (w.read_bytes().hex()"
              " if w.exists() else ''))")
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                         text=True, check=True).stdout.split(" ")
    return [bytes.fromhex(part) for part in out]


def scan(path: Path, needles: dict[str, bytes]) -> list[str]:
    """Which needles occur in STORE, STORE-wal or STORE-shm (read in a child process)."""
    script = (
        "import json, sys, pathlib\n"
        "needles = {k: bytes.fromhex(v) for k, v in json.loads(sys.argv[2]).items()}\n"
        "found = []\n"
        "for suffix in ('', '-wal', '-shm'):\n"
        "    f = pathlib.Path(sys.argv[1] + suffix)\n"
        "    data = f.read_bytes() if f.exists() else b''\n"
        "    found += [suffix + ':' + k for k, v in needles.items() if v in data]\n"
        "print(json.dumps(found))\n"
    )
    arg = json.dumps({k: v.hex() for k, v in needles.items()})
    out = subprocess.run([sys.executable, "-c", script, str(path), arg], capture_output=True,
                         text=True, check=True).stdout
    return list(json.loads(out))


class Run:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def json(self) -> Any:
        return json.loads(self.out)


def gamma(*args: str | Path, env: dict[str, str] | None = None) -> Run:
    runner = CliRunner()
    code = 0
    with runner.isolation(env={"GAMMA_LOG_LEVEL": "off", "GAMMA_CHAIN_KEY": "", **(env or {})}) as (
        out, err, _,
    ):
        try:
            main([str(arg) for arg in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    structlog.reset_defaults()
    return Run(code, out.getvalue().decode(), err.getvalue().decode())


def salt_of(store: Store, fact: str) -> str:
    row = store._query("SELECT v.salt FROM events e JOIN event_values v USING (position)"
                       " WHERE e.fact = ?", [fact]).fetchone()
    return str(row[0])


class TestCommittedStore:
    def test_the_chain_hashes_commitments_and_the_values_live_beside_it(self, store: Store) -> None:
        """A body holds the commitment, never the value; the value and salt rows give it back
        on read, export writes event_line, and the exported log verifies with the store's head."""
        bodies = list(store.bodies())
        assert SECRET not in "".join(bodies)
        first = json.loads(bodies[0])
        assert "value" not in first and "salt" not in first
        assert first["commitment"] == commit(salt_of(store, "F1"), SECRET)
        read = store.events()
        assert read[0].value == SECRET and read[0].salt == salt_of(store, "F1")  # type: ignore[union-attr]
        assert list(store.export()) == [event_line(e) for e in read]
        assert store.head() == head_of(bodies) == read.heads[0]  # type: ignore[attr-defined]
        assert store.verify().ok

    def test_export_verifies_with_the_store_head(self, store: Store, tmp_path: Path) -> None:
        jsonl = tmp_path / "log.jsonl"
        assert gamma("export", store.path).code == 0
        jsonl.write_text(gamma("export", store.path).out)
        run = gamma("verify", jsonl)
        assert run.code == 0 and run.out.strip() == store.head()
        other = [line for line in store.export() if '"tenant":"other"' in line]
        assert gamma("log", store.path, "--tenant", "other").out.splitlines() == other
        assert '"value":"gold"' in other[0] and '"salt":' in other[0]

    def test_a_resent_event_is_skipped_whatever_its_salt(self, store: Store) -> None:
        """Compared by id and value, not by salt: the same batch again (each assert gets a fresh
        salt) and the exported lines (their own salts) store nothing; another value is refused."""
        head = store.head()
        assert store.append(lines()).appended == 0
        assert store.append(list(store.export())).appended == 0
        line = json.loads(list(store.export())[0])
        other_salt = {**line, "salt": "ab" * 32}
        other_salt.pop("commitment")
        assert store.append([json.dumps(other_salt)]).appended == 0
        assert store.head() == head and len(store) == 6
        with pytest.raises(DuplicateIdError):
            store.append([json.dumps({**events()[0], "value": "another"})])

    def test_a_plaintext_store_refuses_committed_lines_and_erase_events(self, tmp_path: Path) -> None:
        path = tmp_path / "plain.db"
        with Store.init(path, policy=POLICY) as plain:
            plain.append(lines())
            body = json.loads(next(plain.bodies()))
            assert body["value"] == SECRET and "commitment" not in body
        before = files(path)
        committed = {**events()[0], "id": "n1", "fact": "N1", "salt": "cd" * 32}
        erase = {"type": "erase", "id": "x1", "ts": "2026-03-01T00:00:00Z", "actor": "dpo",
                 "tenant": "acme", "basis": BASIS,
                 "erased": [{"fact": "F1", "commitment": "ab" * 32}]}
        with Store.open(path) as plain:
            for obj, field in ((committed, "salt"), (erase, "type")):
                with pytest.raises(ValueTypeError, match="plaintext values") as caught:
                    plain.append([json.dumps(obj)])
                assert caught.value.field == field
            with pytest.raises(ValueTypeError, match="plaintext values"):
                plain.erase(tenant="acme", basis=BASIS, actor="dpo", facts=["F1"])
        assert files(path) == before

    def test_a_keyed_committed_store_chains_the_chain_bytes(self, tmp_path: Path) -> None:
        path = tmp_path / "keyed.db"
        with Store.init(path, policy=POLICY, key=KEY, commit_values=True) as keyed:
            keyed.append(lines())
            keyed.erase(tenant="acme", basis=BASIS, actor="dpo", facts=["F1"])
            report = keyed.verify(key=KEY)
            assert report.ok and report.keyed_head == head_of(keyed.bodies(), key=KEY)
            assert report.erased == 1


class TestErase:
    @pytest.mark.parametrize(
        ("how", "expected"),
        [
            ({"facts": ["F3", "F1"]}, ("F1", "F3")),
            ({"key": "email"}, ("F1", "F2")),
            ({"subject": "alice"}, ("F1", "F3", "F5")),
            ({"all_of_tenant": True}, ("F1", "F2", "F3", "F5")),
        ],
    )
    def test_by_fact_key_subject_and_tenant(self, store: Store, how: dict[str, Any],
                                            expected: tuple[str, ...]) -> None:
        """Only the tenant's values are chosen (F4 is another tenant's, about alice too), in
        log order; the erase event names each with its commitment and carries no value."""
        bodies = list(store.bodies())
        result = store.erase(tenant="acme", basis=BASIS, actor="dpo", **how)
        assert result.erased == expected and result.events == 7
        erase = json.loads(list(store.bodies())[-1])
        asserts = [json.loads(b) for b in bodies if json.loads(b)["type"] == "assert"]
        commitments = {a["fact"]: a["commitment"] for a in asserts}
        assert erase["erased"] == [{"commitment": commitments[f], "fact": f} for f in expected]
        assert erase["basis"] == BASIS and erase["actor"] == "dpo" and SECRET not in str(erase)
        assert list(store.bodies())[:6] == bodies
        kept = {e.fact: e.value for e in store.events() if e.TYPE == "assert"}  # type: ignore[union-attr]
        assert all(kept[f] is None for f in expected) and kept["F4"] == "gold"
        report = store.verify()
        assert report.ok and report.erased == len(expected)
        assert report.erase_events == (result.event,)

    def test_refusals_change_nothing(self, store: Store, path: Path) -> None:
        """Twice, a missing fact, another tenant's fact (the same message), no value left, a
        writer without the erasure authority, no basis: an InputError and identical bytes."""
        store.erase(tenant="acme", basis=BASIS, actor="dpo", facts=["F1"])
        store.close()
        before = files(path)
        with Store.open(path) as opened:
            with pytest.raises(ValueTypeError, match="already erased by erase-"):
                opened.erase(tenant="acme", basis=BASIS, actor="dpo", facts=["F1"])
            errors = []
            for fact in ("F4", "F404"):
                with pytest.raises(UnknownReferenceError) as caught:
                    opened.erase(tenant="acme", basis=BASIS, actor="dpo", facts=[fact])
                errors.append(str(caught.value).replace(fact, "?"))
            assert errors[0] == errors[1]
            with pytest.raises(UnknownReferenceError, match="nothing to erase"):
                opened.erase(tenant="acme", basis=BASIS, actor="dpo", key="nokey")
            with pytest.raises(ValueTypeError, match="erasing needs") as caught:
                opened.erase(tenant="acme", basis=BASIS, actor="intern", facts=["F3"])
            assert caught.value.field == "actor"
            with pytest.raises(InputError, match="basis"):
                opened.erase(tenant="acme", basis=" ", actor="dpo", facts=["F3"])
            with pytest.raises(InputError, match="exactly one"):
                opened.erase(tenant="acme", basis=BASIS, actor="dpo", facts=["F3"], key="email")
            with pytest.raises(DuplicateIdError):
                opened.erase(tenant="acme", basis=BASIS, actor="dpo", facts=["F3", "F3"])
        assert files(path) == before
        for args, message in (
            (["--fact", "F1"], "already erased"), (["--fact", "F4"], "no fact"),
            (["--key", "email", "--subject", "alice"], "exactly one"), ([], "exactly one"),
        ):
            run = gamma("erase", path, "--tenant", "acme", "--basis", BASIS, "--actor", "dpo",
                        *args)
            assert run.code == 2 and message in run.err, run.err
        assert files(path) == before

    def test_proofs_and_checkpoints_taken_before_still_verify(self, store: Store, path: Path,
                                                              tmp_path: Path) -> None:
        """Heads and tree of the prefix unchanged; a checkpoint, an inclusion proof of the
        erased event and a consistency proof taken before all verify after; prove works for
        the erased event, whose line is now its chain bytes."""
        store.close()
        assert gamma("keygen", "--name", "auditor", "--out", tmp_path / "k").code == 0
        checkpoint = tmp_path / "cp.txt"
        checkpoint.write_text(gamma("checkpoint", path, "--key-file", tmp_path / "k.key").out)
        line = gamma("export", path).out.splitlines()[0]
        assert SECRET in line
        inclusion = prove_inclusion(path, "e1")
        consistency = prove_consistency(path, 3)
        head, tree = Store.open(path, read_only=True).head(), None
        with Store.open(path, read_only=True) as reader:
            tree = reader.tree_head()
        run = gamma("erase", path, "--tenant", "acme", "--basis", BASIS, "--actor", "dpo",
                    "--fact", "F1")
        assert run.code == 0, run.err
        assert run.json()["erased"] == ["F1"] and run.json()["events"] == 7
        with Store.open(path, read_only=True) as reader:
            assert reader.tree_head(6) == tree and list(reader.bodies())[5] and reader.head() != head
        verified = gamma("verify", path, "--expect-prefix", head, "--expect-checkpoint",
                         checkpoint, "--pub-key", tmp_path / "k.pub")
        assert verified.code == 0, verified.err
        erased_line = gamma("export", path).out.splitlines()[0]
        assert SECRET not in erased_line
        assert verify_inclusion(inclusion, line) and verify_inclusion(inclusion, erased_line)
        assert inclusion.verify(erased_line.encode())
        proof_file = tmp_path / "consistency.json"
        proof_file.write_text(canonical_json(consistency.to_dict()))
        assert gamma("verify-proof", proof_file).code == 0
        proof_file.write_text(gamma("prove", "inclusion", path, "--event", "e1").out)
        line_file = tmp_path / "line.txt"
        line_file.write_text(erased_line + "\n")
        assert gamma("verify-proof", proof_file, "--event-line", line_file).code == 0
        later = prove_consistency(path, 6)
        assert later.first_root == tree.root and later.verify()

    def test_verify_reports_erasures_and_names_tampering(self, store: Store, path: Path) -> None:
        """An erased store passes and says how many and by which events; a value row edited, a
        value row deleted without an erase, an erasure forged are each tampering (exit 1)."""
        result = store.erase(tenant="acme", basis=BASIS, actor="dpo", facts=["F1"])
        store.close()
        run = gamma("verify", path, "--json")
        assert run.code == 0 and run.json()["erased"] == 1
        assert run.json()["erase_events"] == [result.event]
        text = gamma("verify", path)
        assert text.code == 0 and f"erased: 1 values, by the erase events {result.event}" in text.err
        good = path.read_bytes()

        def tampered(sql: str, kind: str, position: int) -> None:
            path.write_bytes(good)
            conn = sqlite3.connect(path)
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"
                                        " AND tbl_name IN ('event_values', 'erasures')").fetchall():
                conn.execute(f"DROP TRIGGER {name}")
            conn.executescript(sql)
            conn.close()
            run = gamma("verify", path, "--json")
            assert run.code == 1 and run.json()["kind"] == kind, run.out
            assert run.json()["position"] == position
            assert f"tampered at position {position} ({kind})" in gamma("verify", path).err

        tampered("UPDATE event_values SET value = '5550101' WHERE position = 3", "value_changed", 3)
        tampered(f"UPDATE event_values SET salt = '{'0' * 64}' WHERE position = 2",
                 "value_changed", 2)
        tampered("DELETE FROM event_values WHERE position = 3", "value_deleted", 3)
        tampered("DELETE FROM event_values WHERE position = 3;"
                 " INSERT INTO erasures VALUES (3, 'F3', 7)", "erasure_forged", 3)
        tampered("DELETE FROM erasures", "value_deleted", 1)
        tampered("INSERT INTO event_values VALUES (5, 'aa', '1')", "value_changed", 5)

    def test_the_value_and_salt_leave_every_byte(self, store: Store, path: Path) -> None:
        """With a read-only store and an engine open on the file during the erase, no byte of
        STORE, -wal or -shm holds the value or its salt, as UTF-8 or hex, once erase returns;
        the steps run in order."""
        salt = salt_of(store, "F1")
        needles = {"utf8": SECRET.encode(), "hex": SECRET.encode().hex().encode(),
                   "salt": salt.encode(), "salt_bytes": bytes.fromhex(salt)}
        assert scan(path, needles)  # the scan finds them before
        reader = Store.open(path, read_only=True)
        engine = Engine.open(path)
        try:
            assert len(reader.events()) == 6 and engine.events[0].value == SECRET  # type: ignore[union-attr]
            steps: list[str] = []
            store.erase(tenant="acme", basis=BASIS, actor="dpo", subject="alice",
                        on_step=steps.append)
            assert tuple(steps) == STEPS
            assert scan(path, needles) == []
            assert engine.refresh() == 1
            assert engine.events[0].value is None and engine.events[0].salt is None  # type: ignore[union-attr]
            assert reader.verify().erased == 3
        finally:
            engine.close()
            reader.close()
        assert scan(path, needles) == []

    def test_a_reader_holding_an_old_snapshot_delays_the_scrub(self, store: Store,
                                                                path: Path) -> None:
        """The erase commits, but a reader inside a transaction keeps the WAL (and the value in
        its older frames): erase says so (StoreBusyError, exit 3), and once the reader is done
        ``Store.scrub`` leaves no byte of it."""
        store.close()
        needles = {"utf8": SECRET.encode()}
        reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM event_values").fetchone()
        try:
            with Store.open(path, busy_timeout=0.2) as opened, pytest.raises(
                StoreBusyError, match="the erase is committed"
            ):
                opened.erase(tenant="acme", basis=BASIS, actor="dpo", facts=["F1"])
        finally:
            reader.execute("ROLLBACK")
            reader.close()
        with Store.open(path) as opened:
            assert opened.verify().erased == 1
            opened.scrub()
            assert scan(path, needles) == []

    def test_an_engine_takes_in_an_erase_of_another_process(self, store: Store, path: Path) -> None:
        engine = Engine.open(path)
        try:
            store.close()
            code = subprocess.run(
                [sys.executable, "-m", "gamma", "-q", "erase", str(path), "--tenant", "acme",
                 "--basis", BASIS, "--actor", "dpo", "--fact", "F5"],
                capture_output=True, check=False,
            ).returncode
            assert code == 0
            assert engine.refresh() == 1
            res = engine.resolve({"id": "u", "tenant": "acme"}, "2030-01-01T00:00:00Z")
            assert "F5" not in [a.fact for a in res.admitted]
            assert "Lyon" not in res.to_json()
        finally:
            engine.close()

    def test_engine_erase_for_the_host(self, store: Store, path: Path) -> None:
        store.close()
        with Engine.open(path) as engine:
            result = engine.erase(tenant="acme", basis=BASIS, actor="dpo", key="phone")
            assert result.erased == ("F3",) and len(engine) == 7
            assert [e for e in engine.events if getattr(e, "fact", None) == "F3"][0].value is None  # type: ignore[union-attr]
        with pytest.raises(Exception, match="erasure needs an engine over a store"):
            Engine().erase(tenant="acme", basis=BASIS, actor="dpo", key="phone")


class TestMigrate:
    def test_to_committed_values(self, tmp_path: Path) -> None:
        """NEW commits to values under fresh salts, with OLD's policy and positions and a final
        migrate event naming OLD's head, size and root; OLD keeps every byte."""
        old, new = tmp_path / "old.db", tmp_path / "new.db"
        with Store.init(old, policy=POLICY) as plain:
            plain.append(lines())
            head, tree = plain.head(), plain.tree_head()
            old_events = [e.id for e in plain.events()]
        before = files(old)
        run = gamma("migrate", old, "--commit-values", "--to", new)
        assert run.code == 0, run.err
        assert run.json()["from_head"] == head and run.json()["from_root"] == tree.root
        assert files(old) == before
        with Store.open(new, read_only=True) as migrated:
            assert migrated.committed and migrated.policy == POLICY
            read = migrated.events()
            assert [e.id for e in read[:-1]] == old_events
            last = json.loads(list(migrated.bodies())[-1])
            assert last["type"] == "migrate" and last["from_size"] == 6
            assert (last["from_head"], last["from_root"]) == (head, tree.root)
            assert read[0].value == SECRET and read[0].salt is not None  # type: ignore[union-attr]
            assert SECRET not in "".join(migrated.bodies())
            assert migrated.verify().ok
        again = gamma("migrate", old, "--commit-values", "--to", new)
        assert again.code == 2 and "existing file" in again.err
        committed = gamma("migrate", new, "--commit-values", "--to", tmp_path / "n2.db")
        assert committed.code == 2 and "already" in committed.err
        assert not (tmp_path / "n2.db").exists()
        assert gamma("migrate", old, "--to", tmp_path / "n3.db").code == 2
        with pytest.raises(InputError):
            migrate_to_committed(old, old)

    def test_a_keyed_store_migrates_with_its_key(self, tmp_path: Path) -> None:
        old, new = tmp_path / "old.db", tmp_path / "new.db"
        with Store.init(old, policy=POLICY, key=KEY) as plain:
            plain.append(lines())
        with pytest.raises(Exception, match="give its chain key"):
            migrate_to_committed(old, new)
        assert not new.exists()
        result = migrate_to_committed(old, new, key=KEY, actor="dpo", tenant="acme")
        with Store.open(new, key=KEY) as migrated:
            assert migrated.keyed and migrated.committed and result.events == 7
            migrated.erase(tenant="acme", basis=BASIS, actor="dpo", subject="alice")
            assert migrated.verify(key=KEY).ok

    def test_a_schema_4_store_is_migrated_and_sealed_anew(self, tmp_path: Path) -> None:
        """A store of schema 4 (plain, or keyed and sealed with gamma migrate and its key)
        gets the value tables and a seal over schema 5, and verifies."""
        for keyed in (False, True):
            path = tmp_path / f"v4-{keyed}.db"
            _schema_4_store(path, keyed=keyed)
            if keyed:
                with Store.open(path, key=KEY) as opened:  # a keyed store waits for its key
                    assert current_version(opened._db) == 4
                    opened.seal(expect_policy=DEFAULT_POLICY.digest)
            with Store.open(path, key=KEY if keyed else None) as opened:
                assert current_version(opened._db) == LATEST
                opened.append(lines())
                report = opened.verify(key=KEY if keyed else None)
                assert report.ok, report
                assert (STORE_KEYED_SEAL in opened._read_meta()) == keyed


class TestTriggers:
    def test_values_are_append_only_but_for_their_erasure(self, store: Store, path: Path) -> None:
        conn = sqlite3.connect(path)
        for sql in ("DELETE FROM event_values WHERE position = 1",
                    "UPDATE event_values SET value = '1' WHERE position = 3",
                    "INSERT OR REPLACE INTO event_values VALUES (1, 'aa', '1')",
                    "INSERT INTO event_values VALUES (5, 'aa', '1')",
                    "INSERT INTO erasures VALUES (1, 'F1', 2)"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(sql)
        conn.close()
        store.erase(tenant="acme", basis=BASIS, actor="dpo", facts=["F1"])
        conn = sqlite3.connect(path)
        for sql in ("DELETE FROM erasures", "INSERT INTO event_values VALUES (1, 'aa', '1')"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(sql)
        conn.close()


def _schema_4_store(path: Path, *, keyed: bool) -> None:
    """A store as gamma wrote it at schema 4."""
    from sqlite_utils import Database

    from gamma.storage.store import _key_check

    conn = sqlite3.connect(path, isolation_level=None)
    db = Database(conn)
    conn.execute("BEGIN IMMEDIATE")
    migrate(db, migrations=MIGRATIONS[:4])
    meta = {"format": "gamma-store", "policy": canonical_json(DEFAULT_POLICY.to_dict()),
            "policy_digest": DEFAULT_POLICY.digest, "keyed": "true" if keyed else "false"}
    if keyed:
        meta["key_check"] = _key_check(KEY)
    meta.update(store_seals(meta, [(m.version, m.name) for m in MIGRATIONS[:4]],
                            KEY if keyed else None))
    db.table("store_meta").insert_all([{"name": k, "value": v} for k, v in sorted(meta.items())])
    conn.execute("COMMIT")
    conn.execute("PRAGMA journal_mode=wal")
    conn.close()


def test_erasure_errors_name_their_field(store: Store) -> None:
    with pytest.raises(UnknownReferenceError) as caught:
        store.erase(tenant="acme", basis=BASIS, actor="dpo", facts=["F3", "nope"])
    assert caught.value.field == "facts[1]"
