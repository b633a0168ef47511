"""Resolving: Γ. ``resolver`` is the pure fold over a parsed log; ``phases`` its exclusion
phases; ``recompute`` a derived value over its admitted inputs; ``experiences`` the factorial
verdicts; ``resolution`` its result; ``render`` and ``context`` the text and context views.

It changes with Γ's rules (SPEC §3-§9) and imports reading, integrity and the terms.

FACE names what the floors above and the other rooms of the core may import from this
room, module by module; everything else is the room's own (tests/test_rooms.py checks every
import across rooms against it, and ``lint-imports`` the order of the rooms).
"""

FACE: dict[str, tuple[str, ...]] = {
    "context": (
        "ContextBody",
        "ContextLines",
    ),
    "experiences": (
        "FACTORIAL_TABLE",
        "expected_verdict",
        "verdict_of",
    ),
    "phases": (
        "AUTHORITY_CAPPED",
        "Access",
        "Codes",
        "FactRecord",
        "FoldState",
        "INSUFFICIENT_AUTHORITY",
        "Origins",
        "conclude",
        "decision",
        "inherit",
        "key_access_ignored",
        "known_unknown",
        "listed",
        "own_codes",
        "recomputed",
        "scope_contains",
    ),
    "recompute": (
        "Computed",
        "failure_of",
        "finishing_order",
        "reach",
    ),
    "render": (
        "EXPLANATIONS",
        "inert",
        "render",
    ),
    "resolution": (
        "FORMAT",
        "Resolution",
        "UNDIGESTED",
    ),
    "resolver": (
        "Fold",
        "FoldedFact",
        "erasures_of",
        "fold_event",
        "new_fold",
        "resolve",
        "resolve_partition",
    ),
}
