"""Integrity: what makes a stored log checkable. The hash chain and its heads, the Merkle
tree with its inclusion and consistency proofs, and a value's salted commitment (what a
committed store chains in place of the value).

It changes when the log's cryptographic form changes, never with Γ's rules; it imports only
the terms.

FACE names what the floors above and the other rooms of the core may import from this
room, module by module; everything else is the room's own (tests/test_rooms.py checks every
import across rooms against it, and ``lint-imports`` the order of the rooms).
"""

FACE: dict[str, tuple[str, ...]] = {
    "chain": (
        "GENESIS",
        "GENESIS_HEX",
        "head_of",
        "keyed_step",
        "step",
        "step_bytes",
    ),
    "commitment": (
        "HEX_DIGEST",
        "chain_object",
        "commit",
        "erased_copy",
        "is_hex_digest",
        "new_salt",
    ),
    "heads": ("Heads",),
    "merkle": (
        "CompactRange",
        "ConsistencyProof",
        "InclusionProof",
        "MemoryTree",
        "SubtreeHashes",
        "TreeBuilder",
        "TreeHead",
        "consistency_proof",
        "inclusion_proof",
        "leaf_hash",
        "perfect_nodes",
        "subtree_hash",
        "tree_head_of",
        "verify_consistency_path",
        "verify_inclusion_path",
    ),
}
