"""Closed-pool grading: which of a fixed set of candidate answers a response names.

A pair side is correct when its answer grades ``gold``. Options are plain strings matched
as whole words, case-insensitively, longest first; a mention under negation ("not $200,000
any more") names nothing. Pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from gamma.scoring.lexicon import negation

__all__ = ["CATEGORIES", "GRADES", "Pool", "grade", "mentions"]

CATEGORIES: tuple[str, ...] = ("gold", "drift", "other")
GRADES: tuple[str, ...] = ("gold", "drift", "other", "off_pool", "ambiguous")
_POOL_FIELDS = {"gold": "gold", "drift": "drift", "distractors": "other"}


@attrs.frozen
class Pool:
    """The candidate answers to one question.

    ``gold`` entries are aliases of the one right answer; each ``drift`` entry (a stale
    value) and each distractor is an answer of its own. An option may not appear in two
    categories (case-insensitively): the grade would depend on which was tried first.
    """

    gold: tuple[str, ...]
    drift: tuple[str, ...] = ()
    distractors: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        seen: dict[str, str] = {}
        for field in _POOL_FIELDS:
            value = getattr(self, field)
            if not isinstance(value, tuple):
                raise TypeError(f"pool {field} must be a tuple of str, not {type(value).__name__}")
            for option in value:
                if not isinstance(option, str) or not option.strip():
                    raise ValueError(
                        f"pool {field} options must be non-empty strings, not {option!r}")
                key = _key(option)
                if seen.setdefault(key, field) != field:
                    raise ValueError(
                        f"pool option {option!r} is in both {seen[key]} and {field}")
        if not self.gold:
            raise ValueError("pool gold must name at least one option")

    @classmethod
    def from_json(cls, obj: object) -> Pool:
        """Build a pool from its JSON form: ``{"gold": [...], "drift": [...],
        "distractors": [...]}``; a single string stands for a one-item list."""
        if not isinstance(obj, Mapping):
            raise ValueError(f"pool must be a JSON object, not {type(obj).__name__}")
        unknown = sorted(set(obj) - set(_POOL_FIELDS))
        if unknown:
            raise ValueError(f"pool has unknown fields {unknown}; expected {sorted(_POOL_FIELDS)}")
        if "gold" not in obj:
            raise ValueError("pool is missing the field 'gold'")
        fields: dict[str, tuple[str, ...]] = {}
        for field in _POOL_FIELDS:
            raw = obj.get(field, [])
            if isinstance(raw, str):
                raw = [raw]
            if not isinstance(raw, list) or not all(isinstance(o, str) for o in raw):
                raise ValueError(f"pool {field} must be a string or a list of strings, not {raw!r}")
            fields[field] = tuple(raw)
        return cls(**fields)

    def to_dict(self) -> dict[str, list[str]]:
        """The JSON form ``from_json`` reads."""
        return {field: list(getattr(self, field)) for field in _POOL_FIELDS}


def _key(option: str) -> str:
    return " ".join(option.split()).casefold()


def _pattern(option: str) -> re.Pattern[str]:
    """Whole-word pattern: word characters (and parts joined by ``-`` or ``_``) may not
    continue the option on either side, nor may ``,000`` or ``.5`` continue a number."""
    body = r"\s+".join(re.escape(part) for part in option.split())
    left = right = ""
    if re.match(r"[^\W_]", option.strip()):
        left = r"(?<![^\W_])(?<![^\W_][-_])"
        if option.strip()[0].isdigit():
            left += r"(?<![0-9][.,])"
    if re.search(r"[^\W_]\Z", option.strip()):
        right = r"(?![^\W_])(?![-_][^\W_])"
        if option.strip()[-1].isdigit():
            right += r"(?![.,][0-9])"
    return re.compile(left + body + right, re.IGNORECASE)


def _scan(answer: str, pool: Pool) -> list[tuple[int, str, str, bool]]:
    """Every claimed mention as (start, category, option, negated), in text order.

    Options are tried longest first; a match overlapping a span already claimed is
    dropped, so "$150,000" consumes its span before "$150" can match inside it.
    """
    options = [(cat, opt) for field, cat in _POOL_FIELDS.items() for opt in getattr(pool, field)]
    order = {cat: i for i, cat in enumerate(CATEGORIES)}
    options.sort(key=lambda co: (-len(_key(co[1])), order[co[0]], _key(co[1]), co[1]))
    negated = negation(answer)
    claimed: list[tuple[int, int]] = []
    found: list[tuple[int, str, str, bool]] = []
    for cat, opt in options:
        for m in _pattern(opt).finditer(answer):
            s, e = m.span()
            if any(s < ce and cs < e for cs, ce in claimed):
                continue
            claimed.append((s, e))
            found.append((s, cat, opt, negated(s)))
    found.sort()
    return found


def mentions(answer: str, pool: Pool) -> tuple[tuple[str, str], ...]:
    """The non-negated (category, option) pairs ``answer`` names, each once, in order of
    first appearance; categories are ``gold``, ``drift`` and ``other`` (a distractor)."""
    if not isinstance(answer, str):
        raise TypeError(f"answer must be a str, not {type(answer).__name__}")
    out: list[tuple[str, str]] = []
    for _start, cat, opt, negated in _scan(answer, pool):
        if not negated and (cat, opt) not in out:
            out.append((cat, opt))
    return tuple(out)


def grade(answer: str, pool: Pool) -> str:
    """One of ``gold``, ``drift``, ``other`` (a distractor only), ``off_pool`` (nothing
    named) or ``ambiguous`` (two or more distinct answers named; gold aliases are one)."""
    answers = {("gold", "") if cat == "gold" else (cat, _key(opt))
               for cat, opt in mentions(answer, pool)}
    if not answers:
        return "off_pool"
    if len(answers) > 1:
        return "ambiguous"
    return next(iter(answers))[0]
