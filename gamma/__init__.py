"""gamma: a deterministic governance engine for the memory of LLM agents.

    S = Γ(H, A, t)

``resolve`` decides, before a model is called, which facts of an append-only
event log H an actor A may rely on at time t, and records why every other
fact is withheld.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gamma.core.terms.version import __version__

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
    from gamma.core.reading.events import dump_events, load_events, parse_actor, parse_events
    from gamma.core.resolving.resolution import Resolution
    from gamma.core.resolving.resolver import resolve
    from gamma.core.terms.collector import collector_paused
    from gamma.core.terms.decisions import (
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
    from gamma.core.terms.errors import (
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
    from gamma.core.terms.model import (
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
    from gamma.core.terms.policy import DEFAULT_POLICY, Policy, load_policy, parse_policy
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
    "collector_paused": "gamma.core.terms.collector",
    "REASON_CODES": "gamma.core.terms.decisions",
    "Admitted": "gamma.core.terms.decisions",
    "Excluded": "gamma.core.terms.decisions",
    "ExperienceVerdict": "gamma.core.terms.decisions",
    "Inputs": "gamma.core.terms.decisions",
    "Recomputed": "gamma.core.terms.decisions",
    "Stale": "gamma.core.terms.decisions",
    "Ignored": "gamma.core.terms.decisions",
    "Reason": "gamma.core.terms.decisions",
    "UsedReason": "gamma.core.terms.decisions",
    "ActorError": "gamma.core.terms.errors",
    "CycleError": "gamma.core.terms.errors",
    "DuplicateIdError": "gamma.core.terms.errors",
    "GammaError": "gamma.core.terms.errors",
    "InputError": "gamma.core.terms.errors",
    "IntegrityError": "gamma.core.terms.errors",
    "LimitError": "gamma.core.terms.errors",
    "JSONSyntaxError": "gamma.core.terms.errors",
    "MissingFieldError": "gamma.core.terms.errors",
    "PolicyError": "gamma.core.terms.errors",
    "StoreBusyError": "gamma.core.terms.errors",
    "StoreError": "gamma.core.terms.errors",
    "TimestampOrderError": "gamma.core.terms.errors",
    "UnknownFieldError": "gamma.core.terms.errors",
    "UnknownReferenceError": "gamma.core.terms.errors",
    "ValueTypeError": "gamma.core.terms.errors",
    "dump_events": "gamma.core.reading.events",
    "load_events": "gamma.core.reading.events",
    "parse_actor": "gamma.core.reading.events",
    "parse_events": "gamma.core.reading.events",
    "read": "gamma.core.reading.reader",
    "Actor": "gamma.core.terms.model",
    "Assert": "gamma.core.terms.model",
    "Event": "gamma.core.terms.model",
    "Experience": "gamma.core.terms.model",
    "Grant": "gamma.core.terms.model",
    "Promote": "gamma.core.terms.model",
    "Retract": "gamma.core.terms.model",
    "Revoke": "gamma.core.terms.model",
    "Visibility": "gamma.core.terms.model",
    "DEFAULT_POLICY": "gamma.core.terms.policy",
    "Policy": "gamma.core.terms.policy",
    "load_policy": "gamma.core.terms.policy",
    "parse_policy": "gamma.core.terms.policy",
    "Resolution": "gamma.core.resolving.resolution",
    "resolve": "gamma.core.resolving.resolver",
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
