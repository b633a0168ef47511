"""The public functions that take a log by path: they open it (a JSONL file or a store,
whose own policy applies when none is given) and hand its events to the layer that does the
work. ``gamma`` loads this module only when one of them is first used: it brings in the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from gamma.audit import explain as _explain
from gamma.core.terms.canonical import parse_ts
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import Actor, Event
from gamma.core.terms.policy import Policy
from gamma.scoring import findings, metrics
from gamma.storage.sources import events_and_policy

__all__ = ["explain", "score", "validate"]


def validate(
    log: str | Path | Sequence[Event],
    *,
    actor: Actor | dict[str, Any],
    at: datetime | str,
    question: str,
    response: str,
    context: str | None = None,
    verdict: str | None = None,
    bindings: Mapping[str, str] | None = None,
    experience: str | None = None,
    policy: Policy | None = None,
) -> findings.Validation:
    """V(response, Γ(log, actor, at)): the violations of one response, for an agent to act on."""
    events, policy = events_and_policy(log, policy)
    return findings.validate(
        events, actor=actor, at=at, question=question, response=response, context=context,
        verdict=verdict, bindings=bindings, experience=experience, policy=policy,
    )


def score(
    responses: Sequence[metrics.ResponseLine | Mapping[str, Any]] | str | Path,
    log: str | Path | Sequence[Event],
    *,
    policy: Policy | None = None,
) -> metrics.Score:
    """Score one system's responses against reference resolutions of ``log``."""
    events, policy = events_and_policy(log, policy)
    return metrics.score(responses, events, policy=policy)


def explain(
    log: str | Path | Sequence[Event],
    fact: str,
    actor: Actor | dict[str, Any],
    at: datetime | str,
    policy: Policy | None = None,
    *,
    auditor: bool = False,
) -> _explain.Explanation:
    """Why ``fact`` is admitted or excluded for ``actor`` at ``at``: its timeline, its
    dependency tree and the verified changes of input that would change the decision."""
    when = _at_time(at)
    events, policy = events_and_policy(log, policy)
    return _explain.explain(events, fact, actor, when, policy=policy, auditor=auditor)


def _at_time(at: datetime | str) -> datetime:
    """``at`` as a time: a string that is not RFC 3339 is an input error naming the parameter."""
    if isinstance(at, datetime):
        return at
    try:
        return parse_ts(at)
    except ValueError as exc:
        raise InputError(str(exc), field="at") from None
