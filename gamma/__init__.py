"""gamma: a deterministic governance engine for the memory of LLM agents.

    S = Γ(H, A, t)

``resolve`` decides, before a model is called, which facts of an append-only
event log H an actor A may rely on at time t, and records why every other
fact is withheld.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gamma.core.version import __version__

if TYPE_CHECKING:  # the names as type checkers see them
    from gamma.api import explain, score, validate
    from gamma.audit.explain import Explanation
    from gamma.audit.replay import (
        AuditDiff,
        ReplayResult,
        audit_record,
        diff_records,
        read_audit,
        replay,
        write_audit,
    )
    from gamma.core.collector import collector_paused
    from gamma.core.decisions import (
        REASON_CODES,
        Admitted,
        Excluded,
        ExperienceVerdict,
        Ignored,
        Inputs,
        Reason,
        Recomputed,
        Stale,
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
        LimitError,
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
    from gamma.scoring.findings import Validation, Violation
    from gamma.scoring.metrics import Rate, Score
    from gamma.storage.engine import Engine
    from gamma.storage.proofs import (
        prove_consistency,
        prove_inclusion,
        tree_head,
        verify_consistency,
        verify_inclusion,
    )
    from gamma.storage.sources import verify_path
    from gamma.storage.store import AppendResult, Store
    from gamma.storage.verify import VerifyReport, verify_file

# Every public name is loaded on first use: `import gamma` costs next to nothing, and a
# command (or `gamma --version`) imports only the modules it needs.
_LAZY = {
    "collector_paused": "gamma.core.collector",
    "REASON_CODES": "gamma.core.decisions",
    "Admitted": "gamma.core.decisions",
    "Excluded": "gamma.core.decisions",
    "ExperienceVerdict": "gamma.core.decisions",
    "Inputs": "gamma.core.decisions",
    "Recomputed": "gamma.core.decisions",
    "Stale": "gamma.core.decisions",
    "Ignored": "gamma.core.decisions",
    "Reason": "gamma.core.decisions",
    "UsedReason": "gamma.core.decisions",
    "ActorError": "gamma.core.errors",
    "CycleError": "gamma.core.errors",
    "DuplicateIdError": "gamma.core.errors",
    "GammaError": "gamma.core.errors",
    "InputError": "gamma.core.errors",
    "IntegrityError": "gamma.core.errors",
    "LimitError": "gamma.core.errors",
    "JSONSyntaxError": "gamma.core.errors",
    "MissingFieldError": "gamma.core.errors",
    "PolicyError": "gamma.core.errors",
    "StoreBusyError": "gamma.core.errors",
    "StoreError": "gamma.core.errors",
    "TimestampOrderError": "gamma.core.errors",
    "UnknownFieldError": "gamma.core.errors",
    "UnknownReferenceError": "gamma.core.errors",
    "ValueTypeError": "gamma.core.errors",
    "dump_events": "gamma.core.events",
    "load_events": "gamma.core.events",
    "parse_actor": "gamma.core.events",
    "parse_events": "gamma.core.events",
    "read": "gamma.core.reader",
    "Actor": "gamma.core.model",
    "Assert": "gamma.core.model",
    "Event": "gamma.core.model",
    "Experience": "gamma.core.model",
    "Grant": "gamma.core.model",
    "Promote": "gamma.core.model",
    "Retract": "gamma.core.model",
    "Revoke": "gamma.core.model",
    "Visibility": "gamma.core.model",
    "DEFAULT_POLICY": "gamma.core.policy",
    "Policy": "gamma.core.policy",
    "load_policy": "gamma.core.policy",
    "parse_policy": "gamma.core.policy",
    "Resolution": "gamma.core.resolution",
    "resolve": "gamma.core.resolver",
    "Validation": "gamma.scoring.findings",
    "Violation": "gamma.scoring.findings",
    "Rate": "gamma.scoring.metrics",
    "Score": "gamma.scoring.metrics",
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
        import importlib
        import inspect

        value = getattr(importlib.import_module(_LAZY[name]), name)
        if inspect.isfunction(value):  # the face checks its arguments: a wrong type is named
            from gamma.face import checked

            value = checked(value)
        globals()[name] = value  # the next look-up is a plain attribute
        return value
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
    "collector_paused",
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
    "read",
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
    "Inputs",
    "Recomputed",
    "Stale",
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
    "LimitError",
]
