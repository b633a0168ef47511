"""The Merkle tree of the log: RFC 6962 vectors, proofs over generated logs, an independent
implementation (pymerkle, test extras only), the store's tree table, checkpoints and tampering."""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import A, stamp
from hypothesis import given
from hypothesis import strategies as st
from strategies import Log, logs

import gamma
from gamma.audit.checkpoint import (
    check_log,
    generate_key,
    parse_checkpoint,
    parse_signer,
    parse_verifier,
    sign_checkpoint,
    verify_checkpoint,
)
from gamma.cli import main
from gamma.core.integrity.merkle import (
    EMPTY_ROOT,
    MemoryTree,
    TreeHead,
    consistency_path,
    inclusion_path,
    leaf_hash,
    node_hash,
    root_of,
    verify_consistency_path,
    verify_inclusion_path,
)
from gamma.core.reading.events import canonical_event
from gamma.storage.store import Store

# RFC 6962 test data as published in transparency-dev/merkle (testonly/constants.go and
# testonly/reference_test.go): eight leaves, the root of every size, some proofs.
LEAVES = [bytes.fromhex(x) for x in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
)]  # fmt: skip
ROOTS = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
INCLUSION = {
    (0, 1): [],
    (0, 2): ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"],
    (1, 2): ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"],
    (2, 3): ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
    (1, 5): [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
    (0, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (5, 8): [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}
CONSISTENCY = {
    (1, 1): [],
    (1, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (2, 5): [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
    (6, 8): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}
TREE = MemoryTree.of_data(LEAVES)


def reference_root(leaves: list[bytes]) -> bytes:
    """MTH straight from RFC 9162 §2.1.1, recursively."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + reference_root(leaves[:k]) + reference_root(leaves[k:])).digest()


def flip(value: bytes, byte: int) -> bytes:
    return value[:byte] + bytes([value[byte] ^ 1]) + value[byte + 1 :]


class TestVectors:
    def test_empty_root_is_sha256_of_nothing(self) -> None:
        assert root_of([]) == EMPTY_ROOT == hashlib.sha256(b"").digest()

    @pytest.mark.parametrize("size", range(1, 9))
    def test_root_of_every_size(self, size: int) -> None:
        assert TREE.root(size).hex() == root_of(LEAVES[:size]).hex() == ROOTS[size - 1]

    @pytest.mark.parametrize(("index", "size"), sorted(INCLUSION))
    def test_inclusion_proofs(self, index: int, size: int) -> None:
        path = inclusion_path(TREE, index, size)
        assert [p.hex() for p in path] == INCLUSION[(index, size)]
        root = bytes.fromhex(ROOTS[size - 1])
        assert verify_inclusion_path(leaf_hash(LEAVES[index]), index, size, path, root)

    @pytest.mark.parametrize(("first", "second"), sorted(CONSISTENCY))
    def test_consistency_proofs(self, first: int, second: int) -> None:
        path = consistency_path(TREE, first, second)
        assert [p.hex() for p in path] == CONSISTENCY[(first, second)]
        one, two = (bytes.fromhex(ROOTS[n - 1]) for n in (first, second))
        assert verify_consistency_path(first, second, one, two, path)

    def test_domain_separation(self) -> None:
        """A leaf and a node over the same bytes hash apart (0x00 vs 0x01 prefix)."""
        left, right = leaf_hash(b"a"), leaf_hash(b"b")
        assert node_hash(left, right) != leaf_hash(left + right)


class TestProperties:
    @given(st.lists(st.binary(max_size=8), min_size=1, max_size=40), st.data())
    def test_every_proof_verifies_and_every_flip_fails(self, leaves: list[bytes], data: st.DataObject) -> None:
        tree = MemoryTree.of_data(leaves)
        n = len(leaves)
        size = data.draw(st.integers(1, n))
        index = data.draw(st.integers(0, size - 1))
        root = tree.root(size)
        assert root == reference_root(leaves[:size])
        path = inclusion_path(tree, index, size)
        leaf = leaf_hash(leaves[index])
        assert verify_inclusion_path(leaf, index, size, path, root)
        assert len(path) <= (size - 1).bit_length()
        byte = data.draw(st.integers(0, 31))
        assert not verify_inclusion_path(flip(leaf, byte), index, size, path, root)
        assert not verify_inclusion_path(leaf, index, size, path, flip(root, byte))
        for k in range(len(path)):
            bad = [*path[:k], flip(path[k], byte), *path[k + 1 :]]
            assert not verify_inclusion_path(leaf, index, size, bad, root)
        if size > 1:
            assert not verify_inclusion_path(leaf, index, size, path[:-1], root)
        first = data.draw(st.integers(0, size))
        one = tree.root(first)
        proof = consistency_path(tree, first, size)
        assert verify_consistency_path(first, size, one, root, proof)
        for k in range(len(proof)):
            bad = [*proof[:k], flip(proof[k], byte), *proof[k + 1 :]]
            assert not verify_consistency_path(first, size, one, root, bad)
        if 0 < first < size:
            assert not verify_consistency_path(first, size, flip(one, byte), root, proof)
            assert not verify_consistency_path(first, size, one, flip(root, byte), proof)

    @given(st.lists(st.binary(max_size=4), min_size=1, max_size=17))
    def test_every_pair_of_sizes_is_consistent(self, leaves: list[bytes]) -> None:
        tree = MemoryTree.of_data(leaves)
        for second in range(1, len(leaves) + 1):
            for first in range(second + 1):
                path = consistency_path(tree, first, second)
                assert verify_consistency_path(first, second, tree.root(first), tree.root(second), path)
            for index in range(second):
                path = inclusion_path(tree, index, second)
                assert verify_inclusion_path(tree.node(0, index), index, second, path, tree.root(second))


class TestPymerkle:
    """An independent RFC 6962 implementation agrees on roots and inclusion paths."""

    @given(st.lists(st.binary(max_size=16), min_size=1, max_size=33))
    def test_roots_and_inclusion_paths(self, leaves: list[bytes]) -> None:
        pymerkle = pytest.importorskip("pymerkle")
        other = pymerkle.InmemoryTree(algorithm="sha256")
        for data in leaves:
            other.append_entry(data)
        tree = MemoryTree.of_data(leaves)
        for size in range(1, len(leaves) + 1):
            assert other.get_root(size) == tree.root(size)
        size = len(leaves)
        for index in range(size):
            theirs = other.prove_inclusion(index + 1, size).serialize()["path"]
            # pymerkle's path starts with the leaf's own hash, then the RFC path
            assert theirs[1:] == [p.hex() for p in inclusion_path(tree, index, size)]


def sample_lines(count: int) -> list[str]:
    return [json.dumps(e) for e in stamp([A(f"f{i}", "k", i) for i in range(count)])]


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    path = tmp_path / "s.db"
    with Store.init(path) as store:
        lines = sample_lines(13)
        for start, end in ((0, 1), (1, 4), (4, 9), (9, 13)):  # batches of several sizes
            store.append(lines[start:end])
        store.append(lines)  # a retried batch: nothing new, the tree does not grow
    return path


class TestStoreTree:
    def test_store_tree_matches_recomputation_at_every_size(self, filled: Path) -> None:
        with Store.open(filled) as store:
            bodies = [line.encode() for line in store.export()]
            tree = store.tree()
            assert tree.size == len(bodies) == 13
            for size in range(len(bodies) + 1):
                assert store.tree_head(size) == TreeHead(size, reference_root(bodies[:size]).hex())
            memory = MemoryTree.of_data(bodies)
            for size in range(1, 14):
                for index in range(size):
                    assert inclusion_path(tree, index, size) == inclusion_path(memory, index, size)
                for first in range(size + 1):
                    assert consistency_path(tree, first, size) == consistency_path(memory, first, size)

    @given(logs(min_size=1, max_size=12))
    def test_generated_logs_resolve_with_the_rfc_tree_head(self, log: Log) -> None:
        """Γ's record carries MTH of the canonical lines of exactly the prefix it covers."""
        bodies = [canonical_event(e).encode() for e in log.events]
        at = log.last_ts()
        res = gamma.resolve(log.events, {"id": "alice", "tenant": log.lines[0]["tenant"]}, at,
                            log.policy)
        assert res.to_dict()["tree"] == {"size": len(bodies), "root": reference_root(bodies).hex()}

    def test_migration_builds_the_tree_of_an_existing_store(self, filled: Path, tmp_path: Path) -> None:
        """A v1 store (no tree table) gains the same tree when opened by this gamma."""
        conn = sqlite3.connect(filled)
        conn.executescript(
            "DROP TRIGGER tree_no_update; DROP TRIGGER tree_no_delete; DROP TRIGGER tree_in_order;"
            "DROP TABLE tree; DROP TRIGGER schema_version_no_delete;"
            "DELETE FROM schema_version WHERE version >= 2;"
        )
        conn.close()
        with Store.open(filled) as store:
            bodies = [line.encode() for line in store.export()]
            assert store.tree_head().root == reference_root(bodies).hex()

    def test_resolution_carries_the_tree_head(self, filled: Path) -> None:
        events = Store.open(filled).events()
        res = gamma.resolve(events, {"id": "alice", "tenant": "acme"}, "2030-01-01T00:00:00Z")
        bodies = [canonical_event(e).encode() for e in events]
        assert res.to_dict()["tree"] == {"size": 13, "root": reference_root(bodies).hex()}


class TestPythonApi:
    def test_prove_and_verify(self, filled: Path, tmp_path: Path) -> None:
        with Store.open(filled) as store:
            lines = list(store.export())
        jsonl = tmp_path / "log.jsonl"
        jsonl.write_text("\n".join(lines) + "\n")
        for log in (filled, jsonl):
            proof = gamma.prove_inclusion(log, "e5", size=9)
            assert proof.leaf_index == 4 and proof.tree_size == 9
            assert gamma.verify_inclusion(proof.to_dict(), lines[4])
            assert not gamma.verify_inclusion(proof.to_dict(), lines[3])
            consistency = gamma.prove_consistency(log, 5)
            assert gamma.verify_consistency(consistency.to_dict())
            assert consistency.second_root == reference_root([x.encode() for x in lines]).hex()
        with pytest.raises(gamma.InputError, match="no event"):
            gamma.prove_inclusion(filled, "nope")
        with pytest.raises(gamma.InputError, match="size 20"):
            gamma.prove_consistency(filled, 3, second=20)


KINDS = ("edit", "delete", "insert", "reorder", "truncate", "rewrite")


def tamper(path: Path, kind: str) -> None:
    """Change the events table behind the store's back (dropping its triggers) and recompute
    the plain chain, so that only a kept checkpoint can tell."""
    conn = sqlite3.connect(path)
    for name in ("events_no_update", "events_no_delete", "events_in_order"):
        conn.execute(f"DROP TRIGGER {name}")
    rows = conn.execute("SELECT position, body FROM events ORDER BY position").fetchall()
    bodies = [str(b) for _, b in rows]
    if kind == "edit":
        bodies[3] = bodies[3].replace('"value":3', '"value":33')
    elif kind == "delete":
        del bodies[2]
    elif kind == "insert":
        bodies.insert(2, bodies[2].replace('"e3"', '"e3b"'))
    elif kind == "reorder":
        bodies[1], bodies[2] = bodies[2], bodies[1]
    elif kind == "truncate":
        bodies = bodies[:5]
    elif kind == "rewrite":
        bodies = bodies[:4] + [b.replace('"value":', '"value":1') for b in bodies[4:]]
    conn.execute("DELETE FROM events")
    prev = bytes(32)
    for position, body in enumerate(bodies, start=1):
        head = hashlib.sha256(prev + body.encode()).digest()
        obj = json.loads(body)
        conn.execute(
            "INSERT INTO events (position, id, type, tenant, ts_us, body, prev_head, head)"
            " VALUES (?, ?, ?, ?, 0, ?, ?, ?)",
            [position, obj["id"], obj["type"], obj["tenant"], body, prev.hex(), head.hex()],
        )
        prev = head
    conn.commit()
    conn.close()


class TestCheckpoints:
    def test_sign_and_verify(self) -> None:
        key = generate_key("log.example/gamma")
        head = TreeHead(5, ROOTS[4])
        note = sign_checkpoint(head, key)
        body, sig = note.split("\n\n")
        assert body.split("\n") == [
            "log.example/gamma", "5", base64.b64encode(bytes.fromhex(ROOTS[4])).decode()]
        assert sig.startswith("\u2014 log.example/gamma ")
        verifier = parse_verifier(key.verifier().encode())
        checked = verify_checkpoint(note, verifier)
        assert checked is not None and checked.head == head and checked.origin == "log.example/gamma"
        assert parse_signer(key.encode()) == key
        assert verify_checkpoint(note.replace("\n5\n", "\n6\n"), verifier) is None
        assert verify_checkpoint(note, generate_key("log.example/gamma").verifier()) is None
        with pytest.raises(gamma.InputError):
            parse_checkpoint("no blank line\n")

    def test_key_id_is_the_c2sp_formula(self) -> None:
        key = generate_key("name")
        public = key.verifier().public
        wanted = hashlib.sha256(b"name\n\x01" + public).digest()[:4]
        assert key.verifier().key_id == wanted
        assert key.verifier().encode().startswith(f"name+{wanted.hex()}+")

    @pytest.mark.parametrize("kind", KINDS)
    def test_tampering_is_caught_by_a_kept_checkpoint(self, filled: Path, kind: str) -> None:
        key = generate_key("gamma")
        with Store.open(filled) as store:
            note = sign_checkpoint(store.tree_head(), key)
        checkpoint = verify_checkpoint(note, key.verifier())
        assert checkpoint is not None and check_log(filled, checkpoint).ok
        tamper(filled, kind)
        result = check_log(filled, checkpoint)
        assert not result.ok
        assert ("truncated" in result.detail) == (kind in ("truncate", "delete"))

    def test_growth_is_accepted_with_a_consistency_proof(self, filled: Path) -> None:
        key = generate_key("gamma")
        with Store.open(filled) as store:
            checkpoint = verify_checkpoint(sign_checkpoint(store.tree_head(6), key), key.verifier())
        assert checkpoint is not None
        result = check_log(filled, checkpoint)
        assert result.ok and "consistency proof verified" in result.detail


class TestCli:
    def run(self, *args: str, input: str | None = None) -> tuple[int, str]:
        runner, code = CliRunner(), 0
        with runner.isolation(input=input) as (out, _err, _):
            try:
                main(list(args))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        return code, out.getvalue().decode("utf-8")

    def test_prove_verify_checkpoint_round_trip(self, filled: Path, tmp_path: Path) -> None:
        code, out = self.run("prove", "inclusion", str(filled), "--event", "e7", "--size", "10")
        assert code == 0
        proof = json.loads(out)
        assert sorted(proof) == ["leaf_hash", "leaf_index", "path", "root", "tree_size"]
        (tmp_path / "p.json").write_text(out)
        with Store.open(filled) as store:
            lines = list(store.export())
        code, _ = self.run("verify-proof", str(tmp_path / "p.json"), "--event-line", "-",
                           input=lines[6] + "\n")
        assert code == 0
        code, _ = self.run("verify-proof", str(tmp_path / "p.json"), "--event-line", "-",
                           input=lines[5] + "\n")
        assert code == 1
        code, out = self.run("prove", "consistency", str(filled), "--from", "4", "--to", "11")
        assert code == 0 and sorted(json.loads(out)) == [
            "first", "first_root", "path", "second", "second_root"]
        (tmp_path / "c.json").write_text(out)
        assert self.run("verify-proof", str(tmp_path / "c.json"))[0] == 0
        bad = json.loads(out)
        bad["first"] = 5
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        assert self.run("verify-proof", str(tmp_path / "bad.json"))[0] == 1
        (tmp_path / "junk.json").write_text('{"first": "x"}')
        assert self.run("verify-proof", str(tmp_path / "junk.json"))[0] == 2
        prefix = str(tmp_path / "k")
        assert self.run("keygen", "--name", "audit.example", "--out", prefix)[0] == 0
        code, note = self.run("checkpoint", str(filled), "--key-file", prefix + ".key")
        assert code == 0
        (tmp_path / "cp").write_text(note)
        code, out = self.run("verify-checkpoint", str(tmp_path / "cp"), "--pub-key", prefix + ".pub")
        assert code == 0 and json.loads(out)["size"] == 13
        code, _ = self.run("verify", str(filled), "--expect-checkpoint", str(tmp_path / "cp"),
                           "--pub-key", prefix + ".pub")
        assert code == 0
        tamper(filled, "rewrite")
        code, _ = self.run("verify", str(filled), "--expect-checkpoint", str(tmp_path / "cp"),
                           "--pub-key", prefix + ".pub")
        assert code == 1
