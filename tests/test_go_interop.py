"""gamma's checkpoints and Merkle proofs checked by Go's golang.org/x/mod/sumdb/note and
sumdb/tlog (tests/go/main.go), and notes Go signs checked by gamma.

The Go helper is built once per session, offline, from the sources Debian's
golang-golang-x-mod-dev puts under /usr/share/gocode (``.ci/run`` installs it with
golang-go). Without ``go`` the module skips, saying so, unless GAMMA_REQUIRE_GO=1 (CI).
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import A, stamp
from test_notes import CASES, FOREIGN, KEY, OTHER, PIECES, VALID, answer, body

from gamma.audit.checkpoint import (
    Checkpoint,
    SignerKey,
    parse_signer,
    parse_verifier,
    sign_checkpoint,
    verify_checkpoint,
)
from gamma.core.integrity.merkle import TreeHead
from gamma.core.reading.events import canonical_event, load_events
from gamma.storage.proofs import prove_consistency, prove_inclusion, tree_head
from gamma.storage.store import Store

GO = shutil.which("go")
GOPATH = "/usr/share/gocode"  # where Debian's golang-*-dev packages put Go sources
SOURCE = Path(__file__).parent / "go"
SIZES = (1, 2, 3, 7, 8, 9, 100, 1000)

#: ``.ci/run`` sets GAMMA_REQUIRE_GO: there a missing toolchain fails the run instead of skipping.
REQUIRED = os.environ.get("GAMMA_REQUIRE_GO") == "1"

pytestmark = pytest.mark.skipif(GO is None and not REQUIRED, reason="no go toolchain on PATH"
                                " (CI installs golang-go and golang-golang-x-mod-dev)")


@pytest.fixture(scope="session")
def helper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert GO is not None, "GAMMA_REQUIRE_GO=1 but no go on PATH"
    out = tmp_path_factory.mktemp("go")
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": GOPATH, "GOCACHE": str(out / "cache"),
           "GOFLAGS": "", "GOPROXY": "off", "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
    built = subprocess.run([GO, "build", "-o", str(out / "gammacheck"), "."], cwd=SOURCE,
                           env=env, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, (
        f"cannot build tests/go offline (is golang-golang-x-mod-dev installed under {GOPATH}?):"
        f"\n{built.stderr}")
    return out / "gammacheck"


def ask(helper: Path, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Go helper's answers, in order (bytes go as base64, hashes as hex)."""
    done = subprocess.run([str(helper)], input=json.dumps(requests), capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    assert len(answers) == len(requests)
    return answers


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def go_open(helper: Path, notes: list[bytes], key: SignerKey = KEY) -> list[str]:
    """Go's answer for each note, as ``answer`` words it: ok, rejected or malformed."""
    vkey = key.verifier().encode()
    replies = ask(helper, [{"op": "open", "note": b64(n), "vkeys": [vkey]} for n in notes])
    words = {"ok": "ok", "malformed": "malformed", "invalid": "rejected", "unverified": "rejected"}
    return [words[reply["status"]] for reply in replies]


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("log") / "log.jsonl"
    events = stamp([A(f"f{i}", f"k{i % 7}", i, actor=f"writer-{i % 3}") for i in range(max(SIZES))])
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def store(log: Path) -> Path:
    """The same events in a store, appended in uneven batches (its tree table answers)."""
    path = log.with_suffix(".db")
    lines = log.read_text(encoding="utf-8").splitlines()
    with Store.init(path) as opened:
        for start, end in ((0, 1), (1, 8), (8, 9), (9, 100), (100, 613), (613, len(lines))):
            opened.append(lines[start:end])
    return path


@pytest.fixture(scope="module")
def heads(log: Path) -> dict[int, TreeHead]:
    return {n: tree_head(log, size=n) for n in (0, *SIZES)}


@pytest.mark.parametrize("kind", ["jsonl", "store"])
def test_go_computes_the_same_roots_and_checks_every_proof(
    helper: Path, log: Path, store: Path, kind: str
) -> None:
    events = load_events(log)
    leaves = [canonical_event(e).encode("utf-8") for e in events]
    ids = [e.id for e in events]
    small = log.with_name("small.jsonl")  # the first 9 events: small trees re-read 9 lines
    small.write_text("".join(log.read_text(encoding="utf-8").splitlines(True)[:9]))
    heads, inclusions, consistencies = {}, [], []
    for n in SIZES:
        source = store if kind == "store" else small if n <= 9 else log
        heads[n] = tree_head(source, size=n)
        for index in sorted({0, 1 % n, n // 2, n - 2 if n > 1 else 0, n - 1}):
            inclusions.append(prove_inclusion(source, ids[index], size=n))
        for first in sorted({1, n // 3 or 1, n - 1 or 1, n}):
            consistencies.append(prove_consistency(source, first, second=n))
    request = {
        "op": "tree", "leaves": [b64(leaf) for leaf in leaves], "sizes": list(SIZES),
        "inclusions": [{"index": p.leaf_index, "size": p.tree_size, "root": p.root,
                        "path": list(p.path)} for p in inclusions],
        "consistencies": [{"first": p.first, "second": p.second, "first_root": p.first_root,
                           "second_root": p.second_root, "path": list(p.path)}
                          for p in consistencies],
    }
    broken = json.loads(json.dumps(request))  # each proof with its last path hash changed
    for proof in broken["inclusions"] + broken["consistencies"]:
        if proof["path"]:
            proof["path"][-1] = ("0" if proof["path"][-1][0] != "0" else "1") + proof["path"][-1][1:]
    reply, refused = ask(helper, [request, broken])
    assert reply["roots"] == [heads[n].root for n in SIZES]
    assert [reply["leaf_hashes"][p.leaf_index] for p in inclusions] == [p.leaf_hash for p in inclusions]
    assert all(reply["inclusion_ok"]) and all(reply["consistency_ok"])
    assert reply["inclusion_go"] == [list(p.path) for p in inclusions]
    assert reply["consistency_go"] == [list(p.path) for p in consistencies]
    assert not any(ok for ok, p in zip(refused["inclusion_ok"], inclusions, strict=True) if p.path)
    assert not any(ok for ok, p in zip(refused["consistency_ok"], consistencies, strict=True)
                   if p.path)


def test_go_verifies_gammas_checkpoints(helper: Path, heads: dict[int, TreeHead]) -> None:
    notes = [sign_checkpoint(heads[n], KEY).encode() for n in (0, *SIZES)]
    notes.append(sign_checkpoint(heads[max(SIZES)], KEY, origin="log.example/other").encode())
    vkey = KEY.verifier().encode()
    replies = ask(helper, [{"op": "open", "note": b64(n), "vkeys": [vkey]} for n in notes])
    assert [r["status"] for r in replies] == ["ok"] * len(notes)
    assert [r["size"] for r in replies] == [0, *SIZES, max(SIZES)]
    assert [r["root"] for r in replies[1:-1]] == [heads[n].root for n in SIZES]
    assert replies[-1]["origin"] == "log.example/other"
    refused = ask(helper, [{"op": "open", "note": b64(notes[1]),
                            "vkeys": [OTHER.verifier().encode()]}])
    assert refused[0]["status"] == "unverified"


def test_keys_and_notes_are_byte_identical_to_gos(
    helper: Path, heads: dict[int, TreeHead]
) -> None:
    seed = bytes(range(7, 39))
    keygen, = ask(helper, [{"op": "keygen", "name": "log.example/go", "seed": b64(seed)}])
    key = parse_signer(keygen["skey"])
    assert key == SignerKey("log.example/go", seed)
    assert key.encode() == keygen["skey"]
    assert parse_verifier(keygen["vkey"]).encode() == keygen["vkey"] == key.verifier().encode()
    texts = [body(str(n).encode(), base64.b64encode(bytes.fromhex(heads[n].root)),
                  b"log.example/go") for n in SIZES]
    texts.append(texts[-1] + b"extension line\n")
    replies = ask(helper, [{"op": "sign", "text": b64(t), "skeys": [keygen["skey"]]}
                           for t in texts])
    go_notes = [base64.b64decode(r["note"]) for r in replies]
    assert go_notes[:-1] == [sign_checkpoint(heads[n], key).encode() for n in SIZES]
    checkpoints = [_verified(note, key) for note in go_notes]
    assert [c.head for c in checkpoints] == [*(heads[n] for n in SIZES), heads[max(SIZES)]]
    assert checkpoints[-1].extensions == ("extension line",)


def _verified(note: bytes, key: SignerKey) -> Checkpoint:
    checkpoint = verify_checkpoint(note, key.verifier())
    assert checkpoint is not None
    return checkpoint


def test_notes_cosigned_by_go_verify_with_either_key(helper: Path) -> None:
    reply, = ask(helper, [{"op": "sign", "text": b64(body()),
                           "skeys": [KEY.encode(), OTHER.encode()]}])
    note = base64.b64decode(reply["note"])
    assert answer(note, KEY) == answer(note, OTHER) == "ok"
    assert go_open(helper, [note], OTHER) == ["ok"]


def test_go_and_gamma_give_every_case_the_same_answer(helper: Path) -> None:
    names = sorted(CASES)
    go = dict(zip(names, go_open(helper, [CASES[name][0] for name in names]), strict=True))
    expected = {name: CASES[name][1] for name in names}
    assert go == expected
    assert {name: answer(CASES[name][0]) for name in names} == expected


def test_go_and_gamma_agree_on_edited_notes(helper: Path) -> None:
    """Random edits (a fixed seed) of three valid notes: the same answer from both."""
    chance = random.Random(26)
    notes = []
    for _ in range(600):
        note = chance.choice([VALID, VALID + FOREIGN, CASES["extension_lines"][0]])
        for _ in range(chance.randint(1, 3)):
            at, cut = chance.randint(0, len(note)), chance.randint(0, 2)
            note = note[:at] + chance.choice(PIECES) + note[at + cut :]
        notes.append(note)
    go = go_open(helper, notes)
    gamma = [answer(note) for note in notes]
    assert [i for i, (a, b) in enumerate(zip(go, gamma, strict=True)) if a != b] == []
    assert {"ok", "rejected", "malformed"} <= set(gamma)
