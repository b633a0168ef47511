"""Merkle proofs over a log given by path (a store or a JSONL file), and checking them offline.

A store answers from its ``tree`` table once ``Store.verify`` has checked that table
against the tree recomputed from the events (and everything else it checks, with the chain
key of a store that says it is keyed: without it that store is refused), so a
checkpoint signs and a proof shows only the events' own tree; a JSONL file is read,
validated and hashed once. Both are O(n). Verification needs no log:
an inclusion proof and the event's canonical line, or a consistency proof.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from gamma.core.integrity import merkle
from gamma.core.integrity.commitment import HEX_DIGEST, chain_object
from gamma.core.integrity.merkle import (
    CompactRange,
    ConsistencyProof,
    InclusionProof,
    MemoryTree,
    SubtreeHashes,
    TreeHead,
    leaf_hash,
)
from gamma.core.reading.events import canonical_event
from gamma.core.reading.reader import read
from gamma.core.terms.canonical import canonical_json
from gamma.core.terms.errors import (
    GammaError,
    InputError,
    IntegrityError,
    StoreError,
    ValueTypeError,
)
from gamma.core.terms.policy import DEFAULT_POLICY, Policy
from gamma.storage.store import Store, is_store

__all__ = [
    "leaf_bytes",
    "parse_consistency",
    "parse_inclusion",
    "prove_consistency",
    "prove_inclusion",
    "recomputed_heads",
    "tree_head",
    "verify_consistency",
    "verify_inclusion",
]



@contextmanager
def _opened(
    log: str | Path, policy: Policy | None, key: bytes | None
) -> Iterator[tuple[SubtreeHashes, Callable[[str], int | None]]]:
    """The tree of a log by path and a lookup from event id to 0-based leaf index.

    A store is served only once it verifies (with its chain key when it says it is keyed:
    without the key a rechained forgery verifies), so a checkpoint signs and a proof shows
    only the events' own tree."""
    if not Path(log).exists():
        raise InputError("no such file", source=str(log))
    if is_store(log):
        with Store.open(log, read_only=True) as store:
            if key is None and store.claims_keyed:
                raise StoreError(f"{log}: the store is keyed: give its chain key (--chain-key-file"
                                 " or $GAMMA_CHAIN_KEY) to verify it before it is served")
            report = store.verify(key=key)
            if not report.ok:
                raise _refusal(log, report.status, f"refusing to serve a tree head or proof from"
                               f" a store that does not verify: {report.verdict}: {report.detail}")

            def index(event_id: str) -> int | None:
                position = store.position_of(event_id)
                return None if position is None else position - 1

            yield store.tree(), index
        return
    if key is not None:
        raise InputError("a chain key is for a store; a JSONL log keeps no keyed chain",
                         source=str(log), field="key")
    events = read(Path(log), policy=policy or DEFAULT_POLICY)
    ids = {event.id: i for i, event in enumerate(events)}
    yield MemoryTree.of_data(canonical_event(e).encode("utf-8") for e in events), ids.get


def _refusal(log: str | Path, status: int, detail: str) -> GammaError:
    """A failed verification as ``verify`` exits: a tampering 1, a key for an unkeyed store 2."""
    return IntegrityError(f"{log}: {detail}") if status == 1 else StoreError(f"{log}: {detail}")


def _size(requested: int | None, tree: SubtreeHashes, field: str) -> int:
    size = tree.size if requested is None else requested
    if not 0 <= size <= tree.size:
        raise InputError(f"no tree of size {size}: the log has {tree.size} events", field=field)
    return size


def tree_head(
    log: str | Path,
    *,
    size: int | None = None,
    policy: Policy | None = None,
    key: bytes | None = None,
) -> TreeHead:
    """The tree head ``(size, root)`` of the first ``size`` events of a log (all by default).

    ``key`` is a keyed store's chain key, needed to serve it (so for each function here)."""
    with _opened(log, policy, key) as (tree, _):
        size = _size(size, tree, "size")
        return TreeHead(size=size, root=MemoryTree.root_of_tree(tree, size).hex())


def prove_inclusion(
    log: str | Path,
    event: str,
    *,
    size: int | None = None,
    policy: Policy | None = None,
    key: bytes | None = None,
) -> InclusionProof:
    """The proof that event ``event`` (an id) is leaf ``i`` of the tree of the first ``size`` events."""
    with _opened(log, policy, key) as (tree, index_of):
        size = _size(size, tree, "size")
        index = index_of(event)
        if index is None:
            raise InputError(f"no event with id {event!r} in the log", source=str(log), field="event")
        if index >= size:
            raise InputError(
                f"event {event!r} is leaf {index}, not in a tree of size {size}", field="size"
            )
        return merkle.inclusion_proof(tree, index, size)


def prove_consistency(
    log: str | Path,
    first: int,
    *,
    second: int | None = None,
    policy: Policy | None = None,
    key: bytes | None = None,
) -> ConsistencyProof:
    """The proof that the tree of the first ``second`` events extends that of the first ``first``."""
    with _opened(log, policy, key) as (tree, _):
        second = _size(second, tree, "second")
        if not 0 <= first <= second:
            raise InputError(f"first size {first} must be between 0 and {second}", field="first")
        return merkle.consistency_proof(tree, first, second)


def _fields(obj: Any, names: tuple[str, ...], source: str | None) -> dict[str, Any]:
    if not isinstance(obj, Mapping):
        raise ValueTypeError("expected a JSON object", source=source)
    for name in sorted(obj):
        if name not in names:
            raise ValueTypeError(f"unknown field {name!r}", source=source, field=name)
    for name in names:
        if name not in obj:
            raise ValueTypeError("missing required field", source=source, field=name)
        value = obj[name]
        if name == "path":
            if not isinstance(value, list) or not all(
                isinstance(p, str) and HEX_DIGEST.fullmatch(p) for p in value
            ):
                raise ValueTypeError("expected a list of 64 lowercase hex digits", source=source,
                                     field=name)
        elif name.endswith(("root", "hash")):
            if not isinstance(value, str) or not HEX_DIGEST.fullmatch(value):
                raise ValueTypeError(f"expected 64 lowercase hex digits, got {value!r}",
                                     source=source, field=name)
        elif not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueTypeError(f"expected an integer >= 0, got {value!r}", source=source,
                                 field=name)
    return dict(obj)


def parse_inclusion(obj: Any, *, source: str | None = None) -> InclusionProof:
    """An inclusion proof from its JSON object; InputError names a malformed field."""
    if isinstance(obj, InclusionProof):
        return obj
    f = _fields(obj, ("leaf_index", "tree_size", "root", "leaf_hash", "path"), source)
    return InclusionProof(leaf_index=f["leaf_index"], tree_size=f["tree_size"], root=f["root"],
                          leaf_hash=f["leaf_hash"], path=tuple(f["path"]))


def parse_consistency(obj: Any, *, source: str | None = None) -> ConsistencyProof:
    """A consistency proof from its JSON object; InputError names a malformed field."""
    if isinstance(obj, ConsistencyProof):
        return obj
    f = _fields(obj, ("first", "second", "first_root", "second_root", "path"), source)
    return ConsistencyProof(first=f["first"], second=f["second"], first_root=f["first_root"],
                            second_root=f["second_root"], path=tuple(f["path"]))


def verify_inclusion(proof: InclusionProof | Mapping[str, Any], event_line: str | bytes) -> bool:
    """Whether ``proof`` shows the event whose canonical line is ``event_line`` in its tree head.

    The line is the exact bytes ``gamma export`` writes (a trailing newline is dropped).
    """
    data = event_line.encode("utf-8") if isinstance(event_line, str) else event_line
    return parse_inclusion(proof).verify(leaf_bytes(data.removesuffix(b"\n")))


def leaf_bytes(line: bytes) -> bytes:
    """The leaf data of an event's line: the line itself, or for a committed value the chain
    bytes (its canonical JSON without ``value`` and ``salt``, with ``commitment``, SPEC §21),
    so a line as ``gamma export`` writes it checks against a proof before and after an erase."""
    if b'"salt":' not in line:
        return line
    try:
        obj = orjson.loads(line)
    except ValueError:
        return line
    if not isinstance(obj, dict) or obj.get("type") != "assert" or "salt" not in obj:
        return line
    try:
        chain = chain_object(obj)
    except (ValueError, TypeError, KeyError):
        return line
    if obj.get("commitment", chain["commitment"]) != chain["commitment"]:
        return line  # a line that does not hold together is no leaf: the proof fails
    return canonical_json(chain).encode("utf-8")


def verify_consistency(proof: ConsistencyProof | Mapping[str, Any]) -> bool:
    """Whether ``proof`` shows its second tree head extends its first."""
    return parse_consistency(proof).verify()


def recomputed_heads(
    log: str | Path, first: int, *, policy: Policy | None = None
) -> tuple[TreeHead | None, TreeHead]:
    """The tree heads at ``first`` events (None when the log is shorter) and at its end,
    re-hashed from the events as they now read (a store's ``tree`` table is not trusted)."""
    if not Path(log).exists():
        raise InputError("no such file", source=str(log))
    if is_store(log):
        with Store.open(log, read_only=True) as store:
            lines = list(store.bodies())  # the chain bytes: a committed value's commitment
    else:
        lines = [canonical_event(e) for e in read(Path(log), policy=policy or DEFAULT_POLICY)]
    compact = CompactRange()
    at_first = compact.head() if first == 0 else None
    for line in lines:
        compact.append(leaf_hash(line.encode("utf-8")))
        if compact.size == first:
            at_first = compact.head()
    return at_first, compact.head()
