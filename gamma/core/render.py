"""Rendering a Resolution for people (``text``) and for the prompt (``context``).

Everything taken from the log (ids, keys, values) is rendered as inert data:
values are JSON-encoded, and an id or key that is not a plain word is too, so
nothing stored can break a line, open a section or pose as an instruction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from gamma.core.canonical import format_ts

if TYPE_CHECKING:  # a type only: resolution imports this module to render itself
    from gamma.core.resolution import Resolution

__all__ = ["render", "render_text", "render_context", "inert", "EXPLANATIONS"]

_PLAIN = re.compile(r"[A-Za-z0-9_.:/@#\-]+")

EXPLANATIONS: dict[str, str] = {
    "tenant_isolation": "belongs to another tenant",
    "access_denied": "the actor fails its visibility rule",
    "out_of_scope": "its scope does not contain the actor's scope",
    "draft": "still a draft: never committed",
    "hypothetical": "hypothetical: never committed",
    "not_yet_valid": "its validity has not started",
    "expired": "its validity has ended",
    "retracted": "withdrawn by a retract",
    "superseded": "replaced by a newer fact",
    "outranked": "a higher-authority fact holds its key",
    "overridden": "an equal-authority fact in a more specific scope holds its key",
    "dependency_invalidated": "a fact it depends on is no longer valid",
    "dependency_restricted": "a fact it depends on is hidden from the actor",
    "insufficient_authority": "written with less authority than its target fact",
}


# json.dumps leaves these raw with ensure_ascii=False, yet str.splitlines and many
# renderers break lines at them, and bidirectional controls can visually reorder a
# line: escape them so a value always stays on its line and reads as written
_LINE_BREAK = re.compile("[\x85\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def inert(text: str) -> str:
    """A plain word as is; anything else JSON-encoded, so it reads as data."""
    return text if _PLAIN.fullmatch(text) else _value(text)


def _value(value: object) -> str:
    """JSON on one line: control characters and Unicode line separators escaped."""
    encoded = json.dumps(value, ensure_ascii=False)
    return _LINE_BREAK.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)


def render(
    resolution: Resolution, format: str = "text", *, keys: Iterable[str] | None = None
) -> str:
    if format == "text":
        return render_text(resolution)
    if format == "context":
        return render_context(resolution, keys=keys)
    if format == "json":
        return resolution.to_json()
    raise ValueError(f"unknown format {format!r} (expected text, json or context)")


def render_context(resolution: Resolution, *, keys: Iterable[str] | None = None) -> str:
    """The actor-facing block: binding facts, preferences, needs recheck, known unknowns.

    Linear in the admitted facts (plus one sort); ``keys`` keeps only the
    facts and known unknowns of those keys (the block a turn needs).
    """
    actor = resolution.actor
    lines = [
        f"# Authorized state for {inert(actor.id)} (tenant {inert(actor.tenant)},"
        f" scope {inert(actor.scope)}) at {format_ts(resolution.at)}"
    ]
    inputs = dict(resolution.recheck_inputs)
    wanted = None if keys is None else frozenset(keys)
    admitted = [a for a in resolution.admitted if wanted is None or a.key in wanted]
    ordered = sorted(admitted, key=lambda a: (a.key, a.fact))
    binding, preferences, recheck = [], [], []
    for a in ordered:
        if a.needs_recheck:
            recheck.append(a)
        elif a.priority == "hard" and a.kind != "preference":
            binding.append(a)
        else:
            preferences.append(a)
    unknown = [k for k in resolution.known_unknowns if wanted is None or k in wanted]

    def line(a: object) -> str:
        return f"- [{inert(a.fact)}] {inert(a.key)} = {_value(a.value)}"  # type: ignore[attr-defined]

    if binding:
        lines += ["## Binding", *map(line, binding)]
    if preferences:
        lines += ["## Preferences", *map(line, preferences)]
    if recheck:
        lines.append("## Needs recheck")
        for a in recheck:
            changed = ", ".join(inert(f) for f in inputs.get(a.fact, ()))
            lines.append(f"{line(a)} (an input changed: {changed})")
    if unknown:
        lines.append("## Known unknowns")
        lines += [f"- {inert(key)}: no current value" for key in unknown]
    return "\n".join(lines) + "\n"


def render_text(resolution: Resolution) -> str:
    """A readable report: admitted facts, exclusions with reasons, experiences, ignored events."""
    actor = resolution.actor
    roles = ", ".join(inert(r) for r in actor.roles) or "none"
    out = [
        f"Resolution for {inert(actor.id)} (tenant {inert(actor.tenant)}, scope {inert(actor.scope)},"
        f" roles {roles}, clearance {inert(actor.clearance or '')}) at {format_ts(resolution.at)}",
        f"log head {resolution.log}",
        f"policy   {resolution.policy}",
        f"digest   {resolution.digest}",
        "",
        f"ADMITTED ({len(resolution.admitted)})",
    ]
    rows = [
        [
            a.fact,
            a.key,
            _value(a.value),
            a.scope,
            a.authority,
            a.kind + ("" if a.priority == "hard" else f"/{a.priority}"),
            "needs recheck" if a.needs_recheck else "",
        ]
        for a in resolution.admitted
    ]
    out += _table(["fact", "key", "value", "scope", "authority", "kind", "recheck"], rows)
    out += ["", f"EXCLUDED ({len(resolution.excluded)})"]
    rows = []
    for x in resolution.excluded:
        for i, reason in enumerate(x.reasons):
            detail = EXPLANATIONS[reason.code]
            if reason.facts:
                detail += f" ({', '.join(reason.facts)})"
            rows.append(
                [
                    x.fact if i == 0 else "",
                    (x.key if x.key is not None else "-") if i == 0 else "",
                    reason.code,
                    " ".join(reason.events),
                    detail,
                ]
            )
    out += _table(["fact", "key", "code", "events", "why"], rows)
    if resolution.experiences:
        out += ["", f"EXPERIENCES ({len(resolution.experiences)})"]
        rows = []
        for v in resolution.experiences:
            bindings = ", ".join(f"{a} -> {b}" for a, b in v.bindings)
            why = "; ".join(f"{r.fact}: {r.code}" for r in v.reasons)
            rows.append([v.experience, v.verdict, bindings, why])
        out += _table(["experience", "verdict", "bindings", "used facts' reasons"], rows)
    if resolution.ignored:
        out += ["", f"IGNORED ({len(resolution.ignored)})"]
        rows = [[i.event, i.code, i.fact] for i in resolution.ignored]
        out += _table(["event", "code", "target fact"], rows)
    return "\n".join(out) + "\n"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    if not rows:
        return ["  (none)"]
    rows = [[inert(cell) if cell and j in (0, 1) else cell for j, cell in enumerate(r)] for r in rows]
    rows = [[_LINE_BREAK.sub(" ", cell.replace("\n", "\\n")) for cell in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    fmt = "  " + "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header).rstrip(), fmt.format(*("-" * w for w in widths)).rstrip()]
    lines += [fmt.format(*r).rstrip() for r in rows]
    return lines
