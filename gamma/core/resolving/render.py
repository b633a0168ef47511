"""Rendering a Resolution for people (``text``) and for the prompt (``context``).

Everything taken from the log (ids, keys, values) is rendered as inert data:
values are JSON-encoded, and an id or key that is not a plain word is too, so
nothing stored can break a line, open a section or pose as an instruction.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from gamma.core.terms.canonical import format_ts
from gamma.core.terms.decisions import Admitted, Recomputed
from gamma.core.terms.errors import LimitError, ValueTypeError
from gamma.core.terms.limits import MAX_CONTEXT_BYTES

if TYPE_CHECKING:  # a type only: resolution imports this module to render itself
    from gamma.core.resolving.resolution import Resolution

__all__ = [
    "render", "render_text", "render_context", "inert", "EXPLANATIONS", "HEADINGS",
    "section_of", "context_line", "unknown_line", "context_text",
]  # fmt: skip

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
    "derivation_failed": "its derivation gives no value over its inputs' current values",
    "recomputed": "its stated value is not what its derivation gives now",
    "erased": "its value was erased for good (an erase event); only its commitment stays",
    "insufficient_authority": "written with less authority than its target fact",
}


# json.dumps leaves these raw with ensure_ascii=False, yet str.splitlines and many
# renderers break lines at them, bidirectional controls can visually reorder a line,
# and format characters (category Cf: zero-width spaces and joiners, U+FEFF, U+061C,
# the tag block U+E0000-U+E007F) are invisible to a reader yet read by a model. Every
# character that is not ASCII-printable is checked: control (Cc), format (Cf), line and
# paragraph separators (Zl, Zp), lone surrogates (Cs), unassigned (Cn) and the whole tag
# block are escaped.
_SUSPECT = re.compile("[^\x20-\x7e]")
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp", "Cn"})


def _unsafe(char: str) -> bool:
    return 0xE0000 <= ord(char) <= 0xE007F or unicodedata.category(char) in _UNSAFE_CATEGORIES


def _escape(char: str) -> str:
    """The JSON escape of one character (a surrogate pair above U+FFFF)."""
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _escape_unsafe(text: str) -> str:
    return _SUSPECT.sub(lambda m: _escape(m.group()) if _unsafe(m.group()) else m.group(), text)


def inert(text: str) -> str:
    """A plain word as is; anything else JSON-encoded, so it reads as data."""
    return text if _PLAIN.fullmatch(text) else _value(text)


def _value(value: object) -> str:
    """JSON on one line: control, format and invisible characters escaped. The text of
    ``json.dumps(value, ensure_ascii=False)``, without making an encoder per call (a context
    line is rendered per admitted fact a turn changes): a string is what that encoder
    writes of one, anything else goes through one encoder with the same options."""
    text = _encode_string(value) if type(value) is str else _ENCODER.encode(value)
    return _escape_unsafe(text) if _SUSPECT.search(text) else text


#: What ``json.dumps(value, ensure_ascii=False)`` uses (its defaults but ``ensure_ascii``).
_ENCODER = json.JSONEncoder(ensure_ascii=False)
_encode_string = json.encoder.encode_basestring


def render(
    resolution: Resolution, format: str = "text", *, keys: Iterable[str] | None = None
) -> str:
    if format == "text":
        return render_text(resolution)
    if format == "context":
        return render_context(resolution, keys=keys)
    if format == "json":
        return resolution.to_json()
    raise ValueTypeError(f"unknown format {format!r} (expected text, json or context)", field="format")


def render_context(resolution: Resolution, *, keys: Iterable[str] | None = None) -> str:
    """The actor-facing block: binding facts, preferences, needs recheck, known unknowns.

    Linear in the admitted facts (plus one sort); ``keys`` keeps only the
    facts and known unknowns of those keys (the block a turn needs). A block past
    MAX_CONTEXT_BYTES is refused, never cut (SPEC §18): a cut block would drop binding facts
    the model must obey without it knowing, so the caller narrows it (``keys``) instead.
    An engine's resolution carries its sections already rendered (``gamma.core.resolving.context``):
    they are joined, not rendered again, to the same bytes.
    """
    actor = resolution.actor
    header = (
        f"# Authorized state for {inert(actor.id)} (tenant {inert(actor.tenant)},"
        f" scope {inert(actor.scope)}) at {format_ts(resolution.at)}\n"
    )
    wanted = None if keys is None else frozenset(keys)
    kept = resolution._context
    if kept is not None and kept.rendered(resolution):
        return _within_limit(header + kept.text(wanted))
    inputs = dict(resolution.recheck_inputs)
    admitted = [a for a in resolution.admitted if wanted is None or a.key in wanted]
    sections: tuple[list[str], list[str], list[str]] = ([], [], [])
    for a in sorted(admitted, key=lambda a: (a.key, a.fact)):
        sections[section_of(a)].append(context_line(a, inputs.get(a.fact, ())))
    unknown = [unknown_line(k) for k in resolution.known_unknowns if wanted is None or k in wanted]
    return _within_limit(header + context_text((*sections, unknown)))


#: The context block's section headings, in order: an admitted fact's ``section_of`` indexes
#: the first three; the known unknowns are the fourth.
HEADINGS = ("## Binding", "## Preferences", "## Needs recheck", "## Known unknowns")


def section_of(a: Admitted) -> int:
    """The section of the context block an admitted fact is listed in (an index of HEADINGS)."""
    if a.needs_recheck:
        return 2
    return 0 if a.priority == "hard" and a.kind != "preference" else 1


def context_line(a: Admitted, inputs: Iterable[str] = ()) -> str:
    """An admitted fact's line of the context block; ``inputs``: its changed inputs, shown when
    it needs recheck (the one place a line is rendered, whole or incrementally)."""
    text = f"- [{inert(a.fact)}] {inert(a.key)} = {_value(a.value)}"
    if isinstance(a, Recomputed):  # the computed value only: the stale one never shows
        text += f" ({_computed_from(a)})"
    if a.needs_recheck:
        text += f" (an input changed: {', '.join(inert(f) for f in inputs)})"
    return text


def unknown_line(key: str) -> str:
    """A known unknown's line of the context block."""
    return f"- {inert(key)}: no current value"


def context_text(sections: Sequence[Sequence[str]]) -> str:
    """The block after its header: each non-empty section's heading and lines (one per line)."""
    lines: list[str] = []
    for heading, found in zip(HEADINGS, sections):
        if found:
            lines.append(heading)
            lines += found
    return "\n".join(lines) + "\n" if lines else ""


def _within_limit(block: str) -> str:
    """The block, or a LimitError when its UTF-8 is past MAX_CONTEXT_BYTES (SPEC §18)."""
    if len(block) * 4 > MAX_CONTEXT_BYTES:  # else its UTF-8 cannot be past the limit
        size = len(block.encode("utf-8", "surrogatepass"))
        if size > MAX_CONTEXT_BYTES:
            raise LimitError(
                f"the context block would be {size} bytes, past the limit of {MAX_CONTEXT_BYTES}:"
                " it is refused, never cut (a cut would drop binding facts); ask for fewer keys",
                field="context",
            )
    return block


def _recomputed(a: object) -> str:
    """The text report's note on a recomputed value: its inputs and the stated value it replaced."""
    if not isinstance(a, Recomputed):
        return ""
    note = _computed_from(a)
    return note if a.stale is None else f"{note}, stated {_value(a.stale.value)}"


def _computed_from(a: Recomputed) -> str:
    """``recomputed from F1, F2``, or ``recomputed`` for a derivation of constants only."""
    used = ", ".join(inert(f) for f in a.inputs.facts)
    return f"recomputed from {used}" if used else "recomputed"


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
    position = dict(resolution.positions)
    retract_reasons = dict(resolution.retract_reasons)

    def by_position(fact: str) -> tuple[int, list[tuple[int, str]]]:
        # log order; without positions (a resolution read back from JSON) F3 still before F17
        natural = [(int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"(\d+)", fact) if p]
        return (position.get(fact, len(position)), natural)

    rows = [
        [
            a.fact,
            a.key,
            _value(a.value),
            a.scope,
            a.authority,
            a.kind + ("" if a.priority == "hard" else f"/{a.priority}"),
            "needs recheck" if a.needs_recheck else _recomputed(a),
        ]
        for a in sorted(resolution.admitted, key=lambda a: by_position(a.fact))
    ]
    out += _table(["fact", "key", "value", "scope", "authority", "kind", "recheck"], rows)
    out += ["", f"EXCLUDED ({len(resolution.excluded)})"]
    rows = []
    for x in sorted(resolution.excluded, key=lambda x: by_position(x.fact)):
        for i, reason in enumerate(x.reasons):
            detail = EXPLANATIONS[reason.code]
            if reason.code == "superseded" and reason.facts:
                detail = f"superseded by {', '.join(inert(f) for f in reason.facts)}"
            elif reason.code == "retracted" and x.fact in retract_reasons and not (
                {"access_denied", "dependency_restricted"} & set(x.codes)
            ):
                detail += f": {_value(retract_reasons[x.fact])}"
            elif reason.facts:
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


#: The widest a cell may make its column (characters).
_PAD_LIMIT = 120


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    if not rows:
        return ["  (none)"]
    rows = [[inert(cell) if cell and j in (0, 1) else cell for j, cell in enumerate(r)] for r in rows]
    rows = [[_escape_unsafe(cell.replace("\n", "\\n")) for cell in r] for r in rows]
    # a cell past _PAD_LIMIT overflows its column rather than widen it for every row: one
    # long id must not pad each line of the table to its length (output linear, SPEC §5)
    widths = [max([len(h), *(len(r[i]) for r in rows if len(r[i]) <= _PAD_LIMIT)])
              for i, h in enumerate(header)]
    fmt = "  " + "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header).rstrip(), fmt.format(*("-" * w for w in widths)).rstrip()]
    lines += [fmt.format(*r).rstrip() for r in rows]
    return lines
