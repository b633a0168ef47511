"""Issue 30, "every proof issued before still verifying": a signed checkpoint, inclusion proofs
(of the event later erased and of others) and consistency proofs, all taken before an erase,
verify after it with gamma (``verify --expect-checkpoint``, ``verify-proof``) and independently
with Go's sumdb/note and sumdb/tlog (tests/go), the tree recomputed by Go from the store's
export after the erase; ``gamma prove`` after the erase proves the erased event's leaf (its
chain bytes, which are its exported line) against the old root and the grown one.

And tampering after an erase is still tampering (exit 1): an edited commitment (of the erased
fact or another, the chain recomputed or not), a deleted leaf, a value row that does not match
its commitment, an erased value brought back, a value deleted behind a forged erasure.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
from erasure_helpers import Run, core_of, distinctive, gamma, jsonl_lines
from helpers import A, R, stamp
from test_go_interop import GO, GOPATH, REQUIRED, SOURCE, ask, b64

from gamma.core.integrity.chain import GENESIS, step
from gamma.core.integrity.merkle import CompactRange
from gamma.core.terms.canonical import compact_json
from gamma.storage.tree import tree_rows

BASIS = "GDPR Art. 17(1)(a)"
VICTIM = "f7"  # its event is e8: erased by the first erase
OTHER_VICTIM = "f12"  # its event is e14: erased by a second erase, after the tree grew


@attrs.frozen
class World:
    root: Path
    store: Path
    key: Path
    pub: Path
    checkpoint: Path
    size: int  # the tree size the checkpoint signs (before any erase)
    before: tuple[str, ...]  # the export before the erase
    after: tuple[str, ...]  # the export after both erases
    proofs: dict[str, Path]  # event id -> its inclusion proof taken before
    consistency: dict[int, Path]  # first size -> consistency proof to `size`, taken before

    def line(self, lines: tuple[str, ...], event: str) -> str:
        return next(x for x in lines if json.loads(x)["id"] == event)


def _ok(run: Run) -> Run:
    assert run.code == 0, run.err + run.out
    return run


def _events() -> list[str]:
    written: list[dict[str, Any]] = []
    for i in range(16):
        value: Any = distinctive(core_of(30, i), "«", '"\n😀') if i % 3 else i * 7
        written.append(A(f"f{i}", f"k{i % 5}", value, subject="subj" if i in (7, 9) else None)
                       if i != 9 else A("f9", "k4", "plain", tenant="beta"))
    written.insert(10, R("f3", reason="moved"))
    return [json.dumps({k: v for k, v in e.items() if v is not None}) for e in stamp(written)]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("erasure-interop")
    store, key = root / "s.db", root / "signer"
    log = root / "log.jsonl"
    log.write_text("\n".join(_events()) + "\n", encoding="utf-8")
    _ok(gamma("keygen", "--name", "log.example/erasure", "--out", key))
    _ok(gamma("init", store, "--commit-values"))
    _ok(gamma("append", store, log))
    size = len(jsonl_lines(log.read_text(encoding="utf-8")))
    checkpoint = root / "before.checkpoint"
    checkpoint.write_text(_ok(gamma("checkpoint", store, "--key-file", f"{key}.key")).out,
                          encoding="utf-8")
    before = tuple(jsonl_lines(_ok(gamma("export", store)).out))
    proofs = {}
    for event in ("e1", "e8", "e9", "e11", "e14", f"e{size}"):
        proofs[event] = root / f"inclusion-{event}.json"
        proofs[event].write_text(_ok(gamma("prove", "inclusion", store, "--event", event)).out)
    consistency = {}
    for first in (1, 5, 8, size - 1):
        consistency[first] = root / f"consistency-{first}.json"
        consistency[first].write_text(
            _ok(gamma("prove", "consistency", store, "--from", str(first))).out)
    erased = _ok(gamma("erase", store, "--tenant", "acme", "--fact", VICTIM, "--basis", BASIS,
                       "--actor", "dpo", "--id", "erase-1"))
    assert erased.json()["erased"] == [VICTIM]
    grown = root / "grown.jsonl"
    grown.write_text(json.dumps({**A("f99", "k0", "later"), "id": "e99", "actor": "writer",
                                 "tenant": "acme"}) + "\n")
    _ok(gamma("append", store, grown))
    _ok(gamma("erase", store, "--tenant", "acme", "--fact", OTHER_VICTIM, "--basis", BASIS,
              "--actor", "dpo", "--id", "erase-2"))
    after = tuple(jsonl_lines(_ok(gamma("export", store)).out))
    return World(root, store, key, Path(f"{key}.pub"), checkpoint, size, before, after, proofs,
                 consistency)


def chain_bytes(line: str) -> bytes:
    """A line's leaf: its chain bytes (SPEC §21), a committed value's ``value`` and ``salt`` left
    out (its ``commitment`` is on the line); any other line is its own chain bytes."""
    obj = json.loads(line)
    if "salt" not in obj:
        return line.encode("utf-8")
    return compact_json({k: v for k, v in obj.items() if k not in ("value", "salt")}).encode()


# -- gamma's own checks ----------------------------------------------------------------------


def test_the_erase_left_the_values_out_of_the_export(world: World) -> None:
    victim = world.line(world.after, "e8")
    assert "value" not in json.loads(victim) and "salt" not in json.loads(victim)
    assert json.loads(victim)["commitment"] == json.loads(world.line(world.before, "e8"))["commitment"]
    assert chain_bytes(world.line(world.before, "e8")) == victim.encode("utf-8")
    assert [json.loads(x)["type"] for x in world.after].count("erase") == 2


def test_the_checkpoint_taken_before_verifies_after(world: World) -> None:
    signed = _ok(gamma("verify-checkpoint", world.checkpoint, "--pub-key", world.pub)).json()
    assert signed["size"] == world.size
    checked = gamma("verify", world.store, "--expect-checkpoint", world.checkpoint,
                    "--pub-key", world.pub, "--json")
    assert checked.code == 0, checked.err + checked.out
    report = _ok(gamma("verify", world.store, "--json")).json()
    assert report["erased"] == 2 and report["erase_events"] == ["erase-1", "erase-2"]


@pytest.mark.parametrize("when", ["after", "before"])
@pytest.mark.parametrize("event", ["e1", "e8", "e9", "e11", "e14", "last"])
def test_inclusion_proofs_taken_before_verify_with_the_exported_lines(
    world: World, event: str, when: str
) -> None:
    """``verify-proof --event-line`` takes the line as ``gamma export`` writes it: after the
    erase (an erased event's line is its chain bytes; a kept one carries value and salt) and
    before it (every committed line carries its value and salt)."""
    event = f"e{world.size}" if event == "last" else event
    line = world.root / f"line-{event}-{when}.jsonl"
    line.write_text(world.line(world.after if when == "after" else world.before, event) + "\n",
                    encoding="utf-8")
    checked = gamma("verify-proof", world.proofs[event], "--event-line", line)
    assert checked.code == 0, (event, line.read_text(encoding="utf-8"), checked.out, checked.err)
    other = world.root / "wrong-line.jsonl"
    other.write_text(world.line(world.after, "e11") + "\n", encoding="utf-8")
    if event != "e11":
        assert gamma("verify-proof", world.proofs[event], "--event-line", other).code == 1


@pytest.mark.parametrize("edit", ["value", "salt", "commitment", "value and commitment"])
def test_verify_proof_refuses_a_line_that_does_not_hold_together(world: World, edit: str) -> None:
    """A kept value's line whose value, salt or commitment was changed is not the event the
    proof proves: refused (1: invalid, or 2: a line whose commitment is not its value's)."""
    obj = json.loads(world.line(world.after, "e2"))
    if "value" in edit:
        obj["value"] = "forged"
    if edit == "salt":
        obj["salt"] = "ef" * 32
    if "commitment" in edit:
        obj["commitment"] = hashlib.sha256(bytes.fromhex(obj["salt"]) + b'"forged"').hexdigest()
        if edit == "commitment":
            obj["commitment"] = "0" * 64
    line = world.root / f"edited-{edit.replace(' ', '-')}.jsonl"
    line.write_text(compact_json(obj) + "\n", encoding="utf-8")
    checked = gamma("verify-proof", world.proofs["e2"] if "e2" in world.proofs else
                    _proof(world, "e2"), "--event-line", line)
    assert checked.code in (1, 2), (edit, checked)
    assert "valid" not in checked.out.replace("INVALID", ""), (edit, checked.out)


def _proof(world: World, event: str) -> Path:
    path = world.root / f"inclusion-{event}-late.json"
    path.write_text(_ok(gamma("prove", "inclusion", world.store, "--event", event,
                              "--size", str(world.size))).out)
    return path


def test_consistency_proofs_taken_before_still_verify(world: World) -> None:
    root = json.loads(world.proofs["e1"].read_text())["root"]
    for first, proof in world.consistency.items():
        assert json.loads(proof.read_text())["second_root"] == root
        assert gamma("verify-proof", proof).code == 0, first


def test_prove_after_the_erase_gives_the_same_proof_and_a_consistency_to_the_grown_tree(
    world: World
) -> None:
    old = json.loads(world.proofs["e8"].read_text())
    again = _ok(gamma("prove", "inclusion", world.store, "--event", "e8", "--size",
                      str(world.size))).json()
    assert again == old, "the erased event's proof at the old size changed"
    line = world.root / "e8-after.jsonl"
    line.write_text(world.line(world.after, "e8") + "\n", encoding="utf-8")
    now = world.root / "e8-now.json"
    now.write_text(_ok(gamma("prove", "inclusion", world.store, "--event", "e8")).out)
    assert json.loads(now.read_text())["tree_size"] == len(world.after)
    assert gamma("verify-proof", now, "--event-line", line).code == 0
    grown = _ok(gamma("prove", "consistency", world.store, "--from", str(world.size))).json()
    assert grown["first_root"] == old["root"]
    assert grown["second_root"] == json.loads(now.read_text())["root"]
    proof = world.root / "grown.json"
    proof.write_text(json.dumps(grown))
    assert gamma("verify-proof", proof).code == 0


# -- Go's sumdb/note and sumdb/tlog ----------------------------------------------------------

GO_REQUIRED = pytest.mark.skipif(GO is None and not REQUIRED, reason="no go toolchain on PATH"
                                 " (CI installs golang-go and golang-golang-x-mod-dev)")


@pytest.fixture(scope="module")
def go_helper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert GO is not None, "GAMMA_REQUIRE_GO=1 but no go on PATH"
    out = tmp_path_factory.mktemp("go")
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": GOPATH, "GOCACHE": str(out / "cache"),
           "GOFLAGS": "", "GOPROXY": "off", "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
    built = subprocess.run([GO, "build", "-o", str(out / "gammacheck"), "."], cwd=SOURCE,
                           env=env, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    return out / "gammacheck"


@GO_REQUIRED
def test_go_checks_the_old_checkpoint_and_proofs_against_the_erased_log(
    world: World, go_helper: Path
) -> None:
    """Go opens the checkpoint signed before the erase, rebuilds the tree from the leaves of the
    export after it, gets the signed root at the signed size, and accepts every proof taken
    before and the ones gamma gives after; the erased event's leaf is its line, byte for byte."""
    vkey = world.pub.read_text(encoding="utf-8").strip()
    note = world.checkpoint.read_bytes()
    opened, = ask(go_helper, [{"op": "open", "note": b64(note), "vkeys": [vkey]}])
    assert opened["status"] == "ok" and opened["size"] == world.size
    leaves = [chain_bytes(line) for line in world.after]
    erased_at = [i for i, line in enumerate(world.after) if json.loads(line)["id"] in ("e8", "e14")]
    for index in erased_at:
        assert leaves[index] == world.after[index].encode("utf-8")
    now = len(leaves)
    after = {event: _ok(gamma("prove", "inclusion", world.store, "--event", event)).json()
             for event in ("e8", "e14", "e1")}
    inclusions = [json.loads(p.read_text()) for p in world.proofs.values()] + list(after.values())
    consistencies = [json.loads(p.read_text()) for p in world.consistency.values()]
    consistencies.append(_ok(gamma("prove", "consistency", world.store, "--from",
                                   str(world.size))).json())
    request = {
        "op": "tree", "leaves": [b64(leaf) for leaf in leaves], "sizes": [world.size, now],
        "inclusions": [{"index": p["leaf_index"], "size": p["tree_size"], "root": p["root"],
                        "path": p["path"]} for p in inclusions],
        "consistencies": [{"first": p["first"], "second": p["second"],
                           "first_root": p["first_root"], "second_root": p["second_root"],
                           "path": p["path"]} for p in consistencies],
    }
    reply, = ask(go_helper, [request])
    assert reply["roots"][0] == opened["root"], "Go's root of the erased log is not the signed one"
    assert reply["roots"][1] == after["e8"]["root"]
    assert all(reply["inclusion_ok"]), reply["inclusion_ok"]
    assert all(reply["consistency_ok"]), reply["consistency_ok"]
    assert reply["inclusion_go"] == [p["path"] for p in inclusions]


# -- tampering after an erase ----------------------------------------------------------------


@contextmanager
def attacker(path: Path) -> Iterator[sqlite3.Connection]:
    """Plain sqlite3 with every trigger dropped, committed on exit."""
    conn = sqlite3.connect(path, isolation_level=None)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("BEGIN")
    yield conn
    conn.execute("COMMIT")
    conn.close()


def _position(conn: sqlite3.Connection, event: str) -> int:
    return int(conn.execute("SELECT position FROM events WHERE id = ?", [event]).fetchone()[0])


def _edit_commitment(conn: sqlite3.Connection, event: str) -> None:
    body = json.loads(conn.execute("SELECT body FROM events WHERE id = ?", [event]).fetchone()[0])
    digits = body["commitment"]
    body["commitment"] = ("0" if digits[0] != "0" else "1") + digits[1:]
    conn.execute("UPDATE events SET body = ? WHERE id = ?", [compact_json(body), event])


def _rechain(conn: sqlite3.Connection) -> None:
    """What a careful attacker does next: the chain and the tree recomputed from the bodies."""
    prev = GENESIS
    bodies = []
    for position, body in conn.execute("SELECT position, body FROM events ORDER BY position").fetchall():
        head = step(prev, str(body))
        conn.execute("UPDATE events SET prev_head = ?, head = ? WHERE position = ?",
                     [prev.hex(), head.hex(), position])
        prev = head
        bodies.append(str(body))
    conn.execute("DELETE FROM tree")
    conn.executemany("INSERT INTO tree VALUES (?, ?)", tree_rows(CompactRange(), bodies))


def _wrong_value(conn: sqlite3.Connection, event: str) -> None:
    position = _position(conn, event)
    conn.execute("INSERT INTO event_values VALUES (?, ?, ?)", [position, "cd" * 32, '"forged"'])


def _resurrect(world: World, conn: sqlite3.Connection, event: str, *, drop_erasure: bool) -> None:
    """The erased value and salt written back (they match the commitment)."""
    obj = json.loads(world.line(world.before, event))
    position = _position(conn, event)
    conn.execute("INSERT INTO event_values VALUES (?, ?, ?)",
                 [position, obj["salt"], compact_json(obj["value"])])
    if drop_erasure:
        conn.execute("DELETE FROM erasures WHERE position = ?", [position])


def _forge_erasure(conn: sqlite3.Connection, event: str) -> None:
    """A kept value deleted behind an erasure row that points at a real erase event."""
    position = _position(conn, event)
    fact = json.loads(conn.execute("SELECT body FROM events WHERE id = ?", [event]).fetchone()[0])["fact"]
    conn.execute("DELETE FROM event_values WHERE position = ?", [position])
    conn.execute("INSERT INTO erasures VALUES (?, ?, ?)", [position, fact, _position(conn, "erase-1")])


Tamper = Callable[[World, sqlite3.Connection], object]

TAMPERS: dict[str, tuple[Tamper, str]] = {  # what the attacker does, what verify must name
    "erased commitment edited": (lambda w, c: _edit_commitment(c, "e8"), "edited"),
    "kept commitment edited": (lambda w, c: _edit_commitment(c, "e2"), "edited"),
    "erased leaf deleted": (lambda w, c: c.execute("DELETE FROM events WHERE id = 'e8'"), "deleted"),
    "erased leaf and its rows deleted": (lambda w, c: [
        c.execute(f"DELETE FROM {t} WHERE position = {_position(c, 'e8')}")
        for t in ("erasures", "tree", "events")], "deleted"),
    "value row not matching its commitment (erased)": (
        lambda w, c: _wrong_value(c, "e8"), "erasure_forged"),
    "erased value replaced, erasure dropped": (lambda w, c: [
        _wrong_value(c, "e8"), c.execute(f"DELETE FROM erasures WHERE position = {_position(c, 'e8')}")],
        "value_changed"),
    "kept value changed": (lambda w, c: c.execute(
        "UPDATE event_values SET value = '\"forged\"' WHERE position = ?", [_position(c, "e2")]),
        "value_changed"),
    "kept salt changed": (lambda w, c: c.execute(
        "UPDATE event_values SET salt = ? WHERE position = ?", ["ef" * 32, _position(c, "e2")]),
        "value_changed"),
    "kept value deleted": (lambda w, c: c.execute(
        "DELETE FROM event_values WHERE position = ?", [_position(c, "e2")]), "value_deleted"),
    "erased value restored, erasure kept": (
        lambda w, c: _resurrect(w, c, "e8", drop_erasure=False), "erasure_forged"),
    "erased value restored, erasure dropped": (
        lambda w, c: _resurrect(w, c, "e8", drop_erasure=True), "erasure_forged"),
    "erasure forged over a kept value": (lambda w, c: _forge_erasure(c, "e2"), "erasure_forged"),
    "erasure row deleted": (lambda w, c: c.execute(
        "DELETE FROM erasures WHERE position = ?", [_position(c, "e8")]), "value_deleted"),
}


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_tampering_after_an_erase_is_caught(world: World, tmp_path: Path, tamper: str) -> None:
    copy = tmp_path / "copy.db"
    shutil.copyfile(world.store, copy)
    edit, kind = TAMPERS[tamper]
    with attacker(copy) as conn:
        edit(world, conn)
    checked = gamma("verify", copy, "--json")
    assert checked.code == 1, (tamper, checked.out, checked.err)
    report = json.loads(checked.out)
    assert report["ok"] is False and report["kind"] == kind, (tamper, report)


@pytest.mark.parametrize("event", ["e8", "e2"])
def test_a_rechained_commitment_is_caught_by_the_checkpoint(
    world: World, tmp_path: Path, event: str
) -> None:
    """An attacker who edits a commitment and recomputes the chain and the tree passes a plain
    verify only if nothing else pins the log: the checkpoint taken before the erase does."""
    copy = tmp_path / "copy.db"
    shutil.copyfile(world.store, copy)
    with attacker(copy) as conn:
        _edit_commitment(conn, event)
        _rechain(conn)
    checked = gamma("verify", copy, "--expect-checkpoint", world.checkpoint, "--pub-key", world.pub)
    assert checked.code == 1, (event, checked.out, checked.err)


def test_erasing_twice_or_what_is_not_there_changes_nothing(world: World, tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    shutil.copyfile(world.store, copy)
    head = _ok(gamma("verify", copy, "--json")).json()["head"]
    for selector in (["--fact", VICTIM], ["--fact", "nope"], ["--fact", "f9"],
                     ["--subject", "nobody"], ["--key", "no.such.key"]):
        refused = gamma("erase", copy, "--tenant", "acme", *selector, "--basis", BASIS,
                        "--actor", "dpo")
        assert refused.code == 2, (selector, refused)
        assert refused.err.startswith("Error: "), refused.err
    assert _ok(gamma("verify", copy, "--json")).json()["head"] == head


def test_a_migrated_store_names_the_old_roots_and_erases_like_any_other(
    world: World, tmp_path: Path
) -> None:
    """``gamma migrate OLD --commit-values --to NEW``: OLD's checkpoint still verifies OLD, NEW's
    migrate event names OLD's head, size and signed root, and NEW erases and verifies."""
    old, new = tmp_path / "old.db", tmp_path / "new.db"
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(_events()) + "\n", encoding="utf-8")
    _ok(gamma("init", old))
    _ok(gamma("append", old, log))
    checkpoint = tmp_path / "old.checkpoint"
    checkpoint.write_text(_ok(gamma("checkpoint", old, "--key-file", f"{world.key}.key")).out)
    signed = _ok(gamma("verify-checkpoint", checkpoint, "--pub-key", world.pub)).json()
    moved = _ok(gamma("migrate", old, "--commit-values", "--to", new)).json()
    assert (moved["from_root"], moved["from_size"]) == (signed["root"], signed["size"])
    assert moved["from_head"] == _ok(gamma("verify", old, "--json")).json()["head"]
    _ok(gamma("erase", new, "--tenant", "acme", "--fact", VICTIM, "--basis", BASIS,
              "--actor", "dpo"))
    assert _ok(gamma("verify", new, "--json")).json()["erased"] == 1
    _ok(gamma("verify", old, "--expect-checkpoint", checkpoint, "--pub-key", world.pub))
    migrated = [json.loads(x) for x in jsonl_lines(_ok(gamma("export", new)).out)]
    assert [e["type"] for e in migrated][-2:] == ["migrate", "erase"]
    victim = next(e for e in migrated if e.get("fact") == VICTIM and e["type"] == "assert")
    assert "value" not in victim and "salt" not in victim
