"""Experiences: the governance x applicability verdict of a recorded past action.

Γ's last step (SPEC §7), apart from the fold because it reads only the
finished exclusion codes: a used fact that withdraws rejects the experience, a
substituted one adapts it to the admitted fact now holding the value, and only
an experience whose facts all stand is judged by its own applicability.
"""

from __future__ import annotations

from collections.abc import Mapping

from gamma.core.terms.decisions import (
    RECOMPUTED,
    SUBSTITUTING_CODES,
    ExperienceVerdict,
    Reason,
    UsedReason,
)
from gamma.core.terms.model import Experience

__all__ = ["FACTORIAL_TABLE", "expected_verdict", "verdict_of"]

#: The events an experience's reason names for a used fact: at most this many, the smallest
#: ids of that fact's reason (its own entry in ``excluded`` lists them all). A fact's own
#: codes have at most two events each, but a dependency reason has those of every origin:
#: without the cap, N experiences using a fact of k origins would repeat N × k ids (SPEC §5).
USED_EVENTS = 2

#: The governance x applicability table of the governance paper (SPEC §7):
#: governance status of the used fact -> applicability -> verdict.
FACTORIAL_TABLE: dict[str, dict[str, str]] = {
    "valid": {"applicable": "KEEP", "adaptable": "ADAPT", "unusable": "REJECT"},
    "superseded": {"applicable": "ADAPT", "adaptable": "ADAPT", "unusable": "ADAPT"},
    "outranked": {"applicable": "ADAPT", "adaptable": "ADAPT", "unusable": "ADAPT"},
    "expired": {"applicable": "REJECT", "adaptable": "REJECT", "unusable": "REJECT"},
    "unauthorized": {"applicable": "REJECT", "adaptable": "REJECT", "unusable": "REJECT"},
    "draft": {"applicable": "REJECT", "adaptable": "REJECT", "unusable": "REJECT"},
}


def expected_verdict(cell: str) -> str:
    """The paper's verdict for a cell written ``governance/applicability``."""
    governance, _, applicability = cell.partition("/")
    try:
        return FACTORIAL_TABLE[governance][applicability]
    except KeyError:
        raise ValueError(f"unknown factorial cell {cell!r}") from None


def verdict_of(
    experience: Experience,
    codes: dict[str, dict[str, Reason]],
    admitted: set[str],
    recheck: dict[str, set[str]],
    *,
    memo: dict[str, str | None] | None = None,
    restated: Mapping[str, tuple[str, ...]] | None = None,
) -> ExperienceVerdict:
    """KEEP / ADAPT / REJECT from the used facts' governance, then the applicability.

    ``memo`` may pass one dict for all the experiences of a resolution: it keeps every
    replacement found, so N experiences over a chain of N revisions cost O(N), not O(N²).
    ``restated`` names the facts admitted with a recomputed value other than the stated one
    (mode ``recompute``), with their inputs' events: an experience that used one acted on
    the stale value, so it adapts, with a ``recomputed`` reason.
    """
    memo = {} if memo is None else memo
    reasons: list[UsedReason] = []
    bindings: dict[str, str] = {}
    withdrawn = False
    needs_recheck = False
    for used in dict.fromkeys(experience.uses or ()):  # a fact listed twice is one use
        used_codes = codes[used]
        for code in sorted(used_codes):
            events = used_codes[code].events[:USED_EVENTS]  # sorted: the smallest ids
            reasons.append(UsedReason(fact=used, code=code, events=events))
        if not used_codes:
            needs_recheck = needs_recheck or used in recheck
            if restated and used in restated:
                events = restated[used][:USED_EVENTS]
                reasons.append(UsedReason(fact=used, code=RECOMPUTED, events=events))
                needs_recheck = True
        elif set(used_codes) <= SUBSTITUTING_CODES:
            replacement = _replacement(used, codes, admitted, memo)
            if replacement is None:
                withdrawn = True
            else:
                bindings[used] = replacement
        else:
            withdrawn = True
    if withdrawn:
        verdict = "REJECT"
        bindings = {}
    elif bindings or needs_recheck:
        verdict = "ADAPT"
    else:
        verdict = FACTORIAL_TABLE["valid"][experience.applicability or "applicable"]
    return ExperienceVerdict(
        experience=experience.experience,
        verdict=verdict,  # type: ignore[arg-type]
        bindings=tuple(sorted(bindings.items())),
        reasons=tuple(sorted(reasons, key=lambda r: (r.fact, r.code))),
    )


def _replacement(
    fact_id: str,
    codes: dict[str, dict[str, Reason]],
    admitted: set[str],
    memo: dict[str, str | None],
) -> str | None:
    """Follow superseded/outranked/overridden links to the admitted fact that now holds the value.

    Every fact on the walk gets the walk's answer in ``memo`` (path compression).
    """
    path: list[str] = []
    seen: set[str] = set()
    current: str | None = fact_id
    while current is not None and current not in admitted:
        if current in memo:
            current = memo[current]
            break
        path.append(current)
        seen.add(current)
        reasons = codes[current]
        if not reasons or not set(reasons) <= SUBSTITUTING_CODES:
            current = None
            break
        nxt = None
        for code in ("superseded", "outranked", "overridden"):
            if code in reasons and reasons[code].facts:
                nxt = reasons[code].facts[0]
                break
        current = None if nxt is None or nxt in seen else nxt
    for step in path:
        memo[step] = current
    return current
