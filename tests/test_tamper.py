"""Issue 26 part 3: whatever ``resolve``, ``checkpoint`` or ``prove`` would compute from a store
differently from its events is a ``verify`` failure (exit 1) that names the row.

A seeded loop tampers with every table and column of a store (the attacker drops the
triggers and indexes with plain sqlite3, as the schema refuses UPDATE and DELETE), sometimes
recomputing the plain chain and the tree the way a careful attacker would. For each
tampered store: either ``verify`` fails, naming a position or a table, and ``checkpoint`` and
``prove`` refuse it; or reading the store gives exactly what reading its events as JSON Lines
gives (events, chain head, tree head, a resolution), and every proof it serves verifies.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import A, R, X, stamp

import gamma
from gamma.audit.checkpoint import generate_key
from gamma.cli import cli, main
from gamma.core.integrity.chain import GENESIS, keyed_step, step
from gamma.core.integrity.merkle import CompactRange, tree_head_of
from gamma.core.reading.events import canonical_event, parse_events
from gamma.core.terms.canonical import parse_ts
from gamma.core.terms.errors import GammaError, InputError, IntegrityError
from gamma.storage.migrations import ts_micros
from gamma.storage.proofs import prove_inclusion, tree_head, verify_inclusion
from gamma.storage.sources import open_log
from gamma.storage.store import Store
from gamma.storage.tree import tree_rows

KEY = b"a tamper test's key, 32 bytes.."
AT = "2026-03-02T00:00:00Z"
ACTOR = {"id": "auditor", "tenant": "acme", "roles": ["sales"]}
COLUMNS = ("position", "id", "type", "tenant", "ts_us", "fact", "key", "experience", "body",
           "prev_head", "head", "keyed_head")


def events() -> list[str]:
    written = [
        A("F1", "region", "EMEA"),
        A("F2", "discount", "10%", depends_on=["F1"]),
        A("F3", "region", "APAC", supersedes=["F1"]),
        R("F2", reason="moved"),
        X("E1", uses=["F3"], applicability="adaptable"),
        A("F4", "owner", "ana", tenant="beta"),
        A("F5", "plan", "gold", depends_on=["F3"]),
    ]
    return [json.dumps(e) for e in stamp(written)]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tamper") / "base.db"
    with Store.init(path, key=KEY) as store:
        store.append(events())
    return path


@contextmanager
def attacker(path: Path) -> Iterator[sqlite3.Connection]:
    """Plain sqlite3 with every trigger and index dropped, committed on exit."""
    conn = sqlite3.connect(path, isolation_level=None)
    for kind in ("trigger", "index"):
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = ? AND sql IS NOT NULL", [kind]
        ).fetchall():
            conn.execute(f"DROP {kind.upper()} {name}")
    conn.execute("BEGIN")
    yield conn
    conn.execute("COMMIT")
    conn.close()


def rechain(conn: sqlite3.Connection) -> None:
    """Recompute prev_head and head (not the keyed chain: no key) from the bodies."""
    prev = GENESIS
    for position, body in conn.execute("SELECT position, body FROM events ORDER BY position").fetchall():
        head = step(prev, str(body))
        conn.execute("UPDATE events SET prev_head = ?, head = ? WHERE position = ?",
                     [prev.hex(), head.hex(), position])
        prev = head


def retree(conn: sqlite3.Connection) -> None:
    bodies = [str(b) for (b,) in conn.execute("SELECT body FROM events ORDER BY position")]
    conn.execute("DELETE FROM tree")
    conn.executemany("INSERT INTO tree VALUES (?, ?)", tree_rows(CompactRange(), bodies))


def body_edits(body: dict[str, Any], rng: random.Random, others: list[dict[str, Any]]) -> dict[str, Any]:
    """One change to an event's JSON that a careful attacker might make."""
    other = rng.choice(others)
    choices: list[Callable[[], dict[str, Any]]] = [
        lambda: {**body, "id": other["id"]},  # a duplicate id
        lambda: {**body, "value": "forged"},
        lambda: {**body, "ts": "2026-01-01T00:00:00Z"},  # ts backwards
        lambda: {**body, "tenant": "beta"},  # a reference across tenants
        lambda: {**body, "supersedes": ["NOPE"]} if body["type"] == "assert" else {**body, "fact": "NOPE"},
        lambda: {**body, "fact": other.get("fact", "F1")} if body["type"] == "assert" else {**body, "id": "new"},
        lambda: {"type": "assert"},
    ]
    return rng.choice(choices)()


def column_value(column: str, row: dict[str, Any], rng: random.Random, rows: list[dict[str, Any]]) -> Any:
    other = rng.choice([r for r in rows if r["position"] != row["position"]])
    if column == "position":
        return rng.choice([row["position"] + 100, -row["position"], max(r["position"] for r in rows) + 1])
    if column in ("prev_head", "head", "keyed_head"):
        return rng.choice([other[column], "ab" * 32, None if column == "keyed_head" else "00" * 32])
    if column == "ts_us":
        return row[column] + rng.choice([-1, 1, 10**6])
    if column == "body":
        return row[column].replace('"acme"', '"beta"') if rng.random() < 0.5 else row[column] + " "
    nullable = column in ("fact", "key", "experience")
    return rng.choice([other[column], f"{row[column]}x", None if nullable else ""])


def tamper_events(conn: sqlite3.Connection, rng: random.Random, column: str) -> str:
    rows = [dict(zip(COLUMNS, r)) for r in conn.execute(
        f"SELECT {', '.join(COLUMNS)} FROM events ORDER BY position")]
    row = rng.choice(rows)
    careful = rng.random() < 0.6
    if column == "body" and careful:
        bodies = [json.loads(r["body"]) for r in rows]
        new = body_edits(json.loads(row["body"]), rng, bodies)
        text = json.dumps(new, sort_keys=True, separators=(",", ":"))
        sets = {"body": text, **{c: new.get(c) for c in ("id", "type", "tenant", "fact", "key", "experience")}}
        sets = {k: v for k, v in sets.items() if k == "body" or v is not None or k in ("fact", "key", "experience")}
        if "ts" in new:
            sets["ts_us"] = ts_micros(parse_ts(new["ts"]))
        conn.execute(f"UPDATE events SET {', '.join(f'{k} = ?' for k in sets)} WHERE position = ?",
                     [*sets.values(), row["position"]])
    else:
        value = column_value(column, row, rng, rows)
        conn.execute(f"UPDATE events SET {column} = ? WHERE position = ?", [value, row["position"]])
    if careful:
        rechain(conn)
        if rng.random() < 0.7:
            retree(conn)
    return f"events.{column} at {row['position']} ({'chain recomputed' if careful else 'raw'})"


def tamper_tree(conn: sqlite3.Connection, rng: random.Random) -> str:
    (size,) = conn.execute("SELECT max(position) FROM tree").fetchone()
    position = rng.randint(1, size)
    how = rng.choice(["flip", "delete", "extra", "swap"])
    if how == "flip":
        (hashes,) = conn.execute("SELECT hashes FROM tree WHERE position = ?", [position]).fetchone()
        spot = rng.randrange(len(hashes))
        changed = hashes[:spot] + bytes([hashes[spot] ^ 1]) + hashes[spot + 1:]
        conn.execute("UPDATE tree SET hashes = ? WHERE position = ?", [changed, position])
    elif how == "delete":
        conn.execute("DELETE FROM tree WHERE position = ?", [position])
    elif how == "extra":
        conn.execute("INSERT INTO tree VALUES (?, ?)", [size + 1, b"\x00" * 32])
    else:
        other = rng.randint(1, size)
        conn.execute("UPDATE tree SET hashes = (SELECT hashes FROM tree WHERE position = ?)"
                     " WHERE position = ?", [other, position])
    return f"tree {how} at {position}"


def tamper_meta(conn: sqlite3.Connection, rng: random.Random) -> str:
    names = [str(n) for (n,) in conn.execute("SELECT name FROM store_meta ORDER BY name")]
    name = rng.choice(names)
    how = rng.choice(["change", "delete", "insert"])
    if how == "change":
        conn.execute("UPDATE store_meta SET value = value || ' ' WHERE name = ?", [name])
    elif how == "delete":
        conn.execute("DELETE FROM store_meta WHERE name = ?", [name])
    else:
        conn.execute("INSERT INTO store_meta VALUES (?, 'x')", [f"{name}_2"])
    return f"store_meta {how} {name}"


def tamper_schema(conn: sqlite3.Connection, rng: random.Random) -> str:
    how = rng.choice(["lower", "rename", "drop_old"])
    if how == "lower":
        conn.execute("DELETE FROM schema_version WHERE version = (SELECT max(version) FROM schema_version)")
    elif how == "rename":
        conn.execute("UPDATE schema_version SET name = name || '!' WHERE version = ?", [rng.randint(1, 4)])
    else:
        conn.execute("DELETE FROM schema_version WHERE version = 1")
    return f"schema_version {how}"


def truth(path: Path) -> dict[str, Any] | None:
    """What the stored bodies say, read as a JSONL log (None: they are not a valid log)."""
    bodies = [str(b) for (b,) in sqlite3.connect(path).execute("SELECT body FROM events ORDER BY position")]
    try:
        parsed = parse_events(bodies)
    except InputError:
        return None
    return {"tree": tree_head_of(bodies), "lines": bodies,
            "resolution": gamma.resolve(parsed, ACTOR, AT).to_dict()}


def served(path: Path) -> dict[str, Any]:
    """What resolve, checkpoint and prove compute from the store as it is."""
    loaded = open_log(path)
    lines = [canonical_event(e) for e in loaded.events]
    head = tree_head(path, key=KEY)
    proofs = [verify_inclusion(prove_inclusion(path, e.id, key=KEY), line)
              for e, line in zip(loaded.events, lines, strict=True)]
    return {"tree": head, "lines": lines, "proofs": all(proofs),
            "resolution": gamma.resolve(loaded.events, ACTOR, AT, policy=loaded.store_policy).to_dict()}


def cases() -> list[tuple[int, str]]:
    """(seed, target): every column of events several times, and the other tables."""
    targets = [*(f"events.{c}" for c in COLUMNS for _ in range(4)), *(["events.body"] * 8), *(["tree"] * 8),
               *(["store_meta"] * 10), *(["schema_version"] * 4)]
    return list(enumerate(targets))


@pytest.mark.parametrize(("seed", "target"), cases())
def test_a_tampered_store_fails_verify_or_serves_what_its_events_say(
    base: Path, tmp_path: Path, seed: int, target: str
) -> None:
    rng = random.Random(seed)
    path = tmp_path / "t.db"
    shutil.copy(base, path)
    with attacker(path) as conn:
        if target.startswith("events."):
            what = tamper_events(conn, rng, target.removeprefix("events."))
        elif target == "tree":
            what = tamper_tree(conn, rng)
        elif target == "store_meta":
            what = tamper_meta(conn, rng)
        else:
            what = tamper_schema(conn, rng)
    try:
        with Store.open(path, read_only=True) as store:
            report = store.verify(key=KEY)
            plain = store.verify()
    except IntegrityError as exc:  # the store's own format record is gone: refused at open
        assert "store_meta" in str(exc), what
        return
    if target in ("store_meta", "schema_version") or target == "events.keyed_head":
        # every metadata row is under the seal; the keyed chain is checked with the key
        assert not report.ok and report.status == 1, what
    if report.ok:
        expected = truth(path)
        assert expected is not None, what
        assert served(path) == {**expected, "proofs": True}, what
        return
    assert report.status == 1 and report.detail, what
    named = report.position is not None or any(
        table in report.detail for table in ("store_meta", "schema_version", "tree")
    )
    assert named, (what, report)
    # what the store serves is refused with the same finding (with its key), and never
    # served without the key of a store that says it is keyed
    with pytest.raises(IntegrityError, match="does not verify"):
        tree_head(path, key=KEY)
    with pytest.raises(IntegrityError, match="does not verify"):
        prove_inclusion(path, "e1", key=KEY)
    if not plain.ok:
        with pytest.raises(GammaError):
            tree_head(path)


def test_a_tampered_tree_is_caught_and_never_signed(base: Path, tmp_path: Path) -> None:
    """The repro: a forged tree row passed verify and checkpoint signed its root."""
    path = tmp_path / "t.db"
    shutil.copy(base, path)
    with attacker(path) as conn:
        conn.execute("UPDATE tree SET hashes = ? WHERE position = 4", [b"\x01" * 32 * 3])
    runner = CliRunner()
    run = runner.invoke(cli, ["verify", str(path)])
    assert run.exit_code == 1 and "position 4" in run.output and "tree" in run.output
    with pytest.raises(IntegrityError, match="does not verify"):
        tree_head(path, key=KEY)


@pytest.mark.parametrize("edit", ["gap", "duplicate"])
def test_a_gap_or_duplicate_behind_a_recomputed_chain_fails_verify(
    base: Path, tmp_path: Path, edit: str
) -> None:
    """The repros: positions 1, 2, 4, ... or a repeated id, with the chain and tree recomputed."""
    path = tmp_path / "t.db"
    shutil.copy(base, path)
    with attacker(path) as conn:
        if edit == "gap":
            conn.execute("UPDATE events SET position = -position - 1 WHERE position >= 3")
            conn.execute("UPDATE events SET position = -position WHERE position < 0")
        else:
            (body,) = conn.execute("SELECT body FROM events WHERE position = 3").fetchone()
            conn.execute("UPDATE events SET id = 'e2', body = ? WHERE position = 3",
                         [body.replace('"id":"e3"', '"id":"e2"')])
        rechain(conn)
        retree(conn)
    with Store.open(path, read_only=True) as store:
        report = store.verify()
    assert (report.ok, report.position) == (False, 3), report
    assert report.kind == ("misnumbered" if edit == "gap" else "invalid")
    with pytest.raises(IntegrityError):
        open_log(path)  # resolve refuses it too


def test_keyed_heads_recomputed_without_the_key_fail_with_it(base: Path, tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    shutil.copy(base, path)
    with attacker(path) as conn:
        keyed = GENESIS
        for position, body in conn.execute("SELECT position, body FROM events ORDER BY position").fetchall():
            keyed = keyed_step(b"not the key, but 32 bytes long..", keyed, str(body))
            conn.execute("UPDATE events SET keyed_head = ? WHERE position = ?", [keyed.hex(), position])
    with Store.open(path, read_only=True) as store:
        assert store.verify().ok  # nothing an unkeyed reader computes changed
        report = store.verify(key=KEY)
        assert (report.ok, report.position, report.kind) == (False, 1, "keyed_mismatch")


@pytest.mark.parametrize("writer", ["store", "engine", "cli"])
def test_no_writer_extends_a_store_that_does_not_verify(base: Path, tmp_path: Path, writer: str) -> None:
    """A tampered tail (here the tree's last row; the chain and the seal alike) is never
    extended: not by ``Store.append``, not by the engine (what ``gamma mcp`` runs), not by
    ``gamma append``; nothing is stored."""
    path = tmp_path / "t.db"
    shutil.copy(base, path)
    with attacker(path) as conn:
        conn.execute("UPDATE tree SET hashes = ? WHERE position = 7", [b"\x02" * 64])
    batch = json.dumps({"type": "assert", "id": "e99", "fact": "F99", "key": "k", "value": "v",
                        "tenant": "acme", "actor": "writer", "ts": "2026-03-01T12:00:00Z"})
    if writer == "store":
        with Store.open(path, key=KEY) as store, pytest.raises(IntegrityError, match="tree"):
            store.append([batch])
    elif writer == "engine":
        with gamma.Engine.open(path, key=KEY) as engine, pytest.raises(IntegrityError):
            engine.append([batch])
    else:
        (tmp_path / "b.jsonl").write_text(batch + "\n")
        run = CliRunner().invoke(cli, ["append", str(path), str(tmp_path / "b.jsonl")],
                                 env={"GAMMA_CHAIN_KEY": KEY.decode()})
        assert run.exit_code == 1, run.output
    with Store.open(path, read_only=True) as store:
        assert len(store) == 7


def test_an_append_does_not_hide_a_tampering_further_back(base: Path, tmp_path: Path) -> None:
    """An append checks only the row it extends (it never re-reads the log), and it recomputes
    nothing it did not write: a tree row tampered further back is still named by verify."""
    path = tmp_path / "t.db"
    shutil.copy(base, path)
    with attacker(path) as conn:
        conn.execute("UPDATE tree SET hashes = ? WHERE position = 2", [b"\x02" * 64])
    batch = json.dumps({"type": "assert", "id": "e99", "fact": "F99", "key": "k", "value": "v",
                        "tenant": "acme", "actor": "writer", "ts": "2026-03-01T12:00:00Z"})
    with Store.open(path, key=KEY) as store:
        store.append([batch])
    with Store.open(path, read_only=True) as store:
        report = store.verify(key=KEY)
        assert (report.ok, report.kind, report.position) == (False, "tree", 2)


def ts_of(n: int) -> str:
    """The ts ``stamp`` gives the n-th event."""
    return str(stamp([{}] * n)[-1]["ts"])


_TAIL_EDITS = {
    # the tail's ts_us says 1970: an event stamped before the real last one would pass the
    # ts-order check; the tail's fact and type say another fact: a second assert of F5 would pass
    "ts_us": ("UPDATE events SET ts_us = 0 WHERE position = 7", {"ts": ts_of(6), "fact": "F9"}),
    "type": ("UPDATE events SET fact = 'ZZ', type = 'x' WHERE position = 7", {"fact": "F5"}),
}


@pytest.mark.parametrize("writer", ["store", "engine", "cli"])
@pytest.mark.parametrize("column", sorted(_TAIL_EDITS))
def test_no_writer_trusts_a_tampered_indexed_column_of_the_tail(
    base: Path, tmp_path: Path, writer: str, column: str
) -> None:
    """The repros: an append checks ids, references and the ts order by the indexed columns,
    so the tail's columns are checked against its body first (O(1)); nothing is stored."""
    path = tmp_path / "t.db"
    shutil.copy(base, path)
    sql, fields = _TAIL_EDITS[column]
    with attacker(path) as conn:
        conn.execute(sql)
    batch = json.dumps({"type": "assert", "id": "e99", "key": "k", "value": "v", "tenant": "acme",
                        "actor": "writer", **fields})
    refused = rf"refusing to extend .*position 7.* its {column} column disagrees with its body"
    if writer == "store":
        with Store.open(path, key=KEY) as store, pytest.raises(IntegrityError, match=refused):
            store.append([batch])
    elif writer == "engine":
        with gamma.Engine.open(path, key=KEY) as engine, pytest.raises(IntegrityError, match=refused):
            engine.append([batch])
    else:
        (tmp_path / "b.jsonl").write_text(batch + "\n")
        code, _, err = gamma_main(["append", str(path), str(tmp_path / "b.jsonl")],
                                  env={"GAMMA_CHAIN_KEY": KEY.decode()})
        assert code == 1 and f"its {column} column" in err, err
    with Store.open(path, read_only=True) as store:
        assert len(store) == 7


def test_a_column_tampered_further_back_is_still_named_by_verify(base: Path, tmp_path: Path) -> None:
    """An append never re-reads the log (DESIGN §7): a column tampered behind the tail is not
    seen by it, and verify still names its row after the append."""
    path = tmp_path / "t.db"
    shutil.copy(base, path)
    with attacker(path) as conn:
        conn.execute("UPDATE events SET ts_us = 0 WHERE position = 3")
    batch = json.dumps({"type": "assert", "id": "e99", "fact": "F99", "key": "k", "value": "v",
                        "tenant": "acme", "actor": "writer", "ts": "2026-03-01T12:00:00Z"})
    with Store.open(path, key=KEY) as store:
        store.append([batch])
    with Store.open(path, read_only=True) as store:
        report = store.verify(key=KEY)
    assert (report.ok, report.position) == (False, 3) and "ts_us column" in (report.detail or "")


def gamma_main(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``gamma ARGS`` run as the console script runs it (exit statuses mapped): code, out, err."""
    code = 0
    with CliRunner().isolation(env=env) as (out, err, _):
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8")


def _forged_tail(base: Path, tmp_path: Path) -> Path:
    """The repro: the last event's value changed, its body, plain head and tree row copied
    from an unkeyed store of the same events, so everything but the keyed chain verifies."""
    lines = events()
    lines[-1] = json.dumps({**json.loads(lines[-1]), "value": "forged"})
    with Store.init(tmp_path / "u.db") as honest:
        honest.append(lines)
    with sqlite3.connect(tmp_path / "u.db") as conn:
        body, head = conn.execute("SELECT body, head FROM events WHERE position = 7").fetchone()
        (hashes,) = conn.execute("SELECT hashes FROM tree WHERE position = 7").fetchone()
    path = tmp_path / "t.db"
    shutil.copy(base, path)
    with attacker(path) as conn:
        conn.execute("UPDATE events SET body = ?, head = ? WHERE position = 7", [body, head])
        conn.execute("UPDATE tree SET hashes = ? WHERE position = 7", [hashes])
    with Store.open(path, read_only=True) as store:
        assert store.verify().ok and not store.verify(key=KEY).ok
    return path


def test_checkpoint_and_prove_refuse_a_forged_keyed_store(base: Path, tmp_path: Path) -> None:
    """A store that says it is keyed is signed and served only with its chain key, and only
    once it verifies with it: without the key exit 2, with it exit 1; nothing is printed."""
    path = _forged_tail(base, tmp_path)
    signer = tmp_path / "ck.key"
    signer.write_text(generate_key("test").encode() + "\n")
    chain_key = tmp_path / "chain.key"
    chain_key.write_bytes(KEY)
    for args in (["checkpoint", str(path), "--key-file", str(signer)],
                 ["prove", "inclusion", str(path), "--event", "e7"],
                 ["prove", "consistency", str(path), "--from", "3"]):
        code, out, err = gamma_main(args, env={"GAMMA_CHAIN_KEY": ""})
        assert (code, out) == (2, "") and "the store is keyed: give its chain key" in err, err
        code, out, err = gamma_main([*args, "--chain-key-file", str(chain_key)])
        assert (code, out) == (1, "") and "does not verify" in err, err
        code, out, err = gamma_main(args, env={"GAMMA_CHAIN_KEY": KEY.decode()})
        assert (code, out) == (1, "") and "does not verify" in err, err
        honest = [str(base) if a == str(path) else a for a in args]
        code, out, err = gamma_main([*honest, "--chain-key-file", str(chain_key)])
        assert code == 0 and out, err
    with pytest.raises(gamma.StoreError, match="the store is keyed"):
        tree_head(path)
    with pytest.raises(IntegrityError, match="does not verify"):
        prove_inclusion(path, "e7", key=KEY)
    assert tree_head(base, key=KEY).size == 7
