"""gamma: a deterministic governance engine for the memory of LLM agents.

    S = Γ(H, A, t)

``resolve`` decides, before a model is called, which facts of an append-only
event log H an actor A may rely on at time t, and records why every other
fact is withheld.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .errors import (
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
from .events import dump_events, load_events, parse_actor, parse_events
from .findings import Validation, Violation, validate
from .model import Actor, Assert, Event, Experience, Grant, Promote, Retract, Revoke, Visibility
from .policy import DEFAULT_POLICY, Policy, load_policy, parse_policy
from .resolution import (
    REASON_CODES,
    Admitted,
    Excluded,
    ExperienceVerdict,
    Ignored,
    Reason,
    Resolution,
    UsedReason,
)
from .resolver import resolve
from .scoring import Rate, Score, score

# The store pulls in sqlite-utils; load it only when asked for.
_LAZY = {
    "Store": "store",
    "AppendResult": "store",
    "VerifyReport": "verify",
    "verify_file": "verify",
    "verify_path": "verify",
    "audit_record": "audit",
    "write_audit": "audit",
    "read_audit": "audit",
    "replay": "audit",
    "diff_records": "audit",
    "ReplayResult": "audit",
    "AuditDiff": "audit",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'gamma' has no attribute {name!r}")


try:
    __version__ = version("gamma")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+source"

__all__ = [
    "__version__",
    "Store",
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
