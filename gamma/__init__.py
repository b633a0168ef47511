"""gamma: a deterministic governance engine for the memory of LLM agents.

    S = Γ(H, A, t)

``resolve`` decides, before a model is called, which facts of an append-only
event log H an actor A may rely on at time t, and records why every other
fact is withheld.
"""

from __future__ import annotations

from gamma.core.decisions import (
    REASON_CODES,
    Admitted,
    Excluded,
    ExperienceVerdict,
    Ignored,
    Reason,
    UsedReason,
)
from gamma.core.errors import (
    ActorError,
    CycleError,
    DuplicateIdError,
    GammaError,
    InputError,
    IntegrityError,
    JSONSyntaxError,
    MissingFieldError,
    PolicyError,
    StoreBusyError,
    StoreError,
    TimestampOrderError,
    UnknownFieldError,
    UnknownReferenceError,
    ValueTypeError,
)
from gamma.core.events import dump_events, load_events, parse_actor, parse_events
from gamma.core.model import (
    Actor,
    Assert,
    Event,
    Experience,
    Grant,
    Promote,
    Retract,
    Revoke,
    Visibility,
)
from gamma.core.policy import DEFAULT_POLICY, Policy, load_policy, parse_policy
from gamma.core.resolution import Resolution
from gamma.core.resolver import resolve
from gamma.core.version import __version__
from gamma.scoring.findings import Validation, Violation
from gamma.scoring.metrics import Rate, Score

# The store pulls in sqlite-utils; load it only when asked for.
_LAZY = {
    "validate": "gamma.api",
    "score": "gamma.api",
    "explain": "gamma.api",
    "Explanation": "gamma.audit.explain",
    "Store": "gamma.storage.store",
    "Engine": "gamma.storage.engine",
    "AppendResult": "gamma.storage.store",
    "VerifyReport": "gamma.storage.verify",
    "verify_file": "gamma.storage.verify",
    "verify_path": "gamma.storage.sources",
    "audit_record": "gamma.audit.replay",
    "write_audit": "gamma.audit.replay",
    "read_audit": "gamma.audit.replay",
    "replay": "gamma.audit.replay",
    "diff_records": "gamma.audit.replay",
    "ReplayResult": "gamma.audit.replay",
    "AuditDiff": "gamma.audit.replay",
    "prove_inclusion": "gamma.storage.proofs",
    "prove_consistency": "gamma.storage.proofs",
    "verify_inclusion": "gamma.storage.proofs",
    "verify_consistency": "gamma.storage.proofs",
    "tree_head": "gamma.storage.proofs",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib  # lazy by design: the store and audit modules load sqlite-utils

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gamma' has no attribute {name!r}")


__all__ = [
    "__version__",
    "prove_inclusion",
    "prove_consistency",
    "verify_inclusion",
    "verify_consistency",
    "tree_head",
    "Store",
    "Engine",
    "AppendResult",
    "VerifyReport",
    "verify_file",
    "verify_path",
    "audit_record",
    "write_audit",
    "read_audit",
    "replay",
    "diff_records",
    "ReplayResult",
    "AuditDiff",
    "resolve",
    "validate",
    "explain",
    "Explanation",
    "Validation",
    "Violation",
    "score",
    "Score",
    "Rate",
    "load_events",
    "parse_events",
    "dump_events",
    "parse_actor",
    "load_policy",
    "parse_policy",
    "DEFAULT_POLICY",
    "Policy",
    "Actor",
    "Event",
    "Assert",
    "Retract",
    "Promote",
    "Grant",
    "Revoke",
    "Experience",
    "Visibility",
    "Resolution",
    "Admitted",
    "Excluded",
    "Reason",
    "ExperienceVerdict",
    "UsedReason",
    "Ignored",
    "REASON_CODES",
    "GammaError",
    "InputError",
    "JSONSyntaxError",
    "UnknownFieldError",
    "MissingFieldError",
    "ValueTypeError",
    "DuplicateIdError",
    "UnknownReferenceError",
    "CycleError",
    "TimestampOrderError",
    "PolicyError",
    "ActorError",
    "StoreError",
    "StoreBusyError",
    "IntegrityError",
]
