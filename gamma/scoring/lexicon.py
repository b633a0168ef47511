"""The salient-token grammar: one left-to-right scanner, negation and sentence position.

Private to :mod:`gamma.scoring.tokens`, which builds :class:`~gamma.scoring.tokens.Token` values from the
units produced here. Pure and stdlib only. SPEC.md §11 states the same grammar
in prose; keep the two in step.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable, Hashable, Sequence
from fractions import Fraction
from typing import NamedTuple

# The day, month and amount tables of numbers.py: every key this scanner can match is there.
from gamma.scoring.numbers import CURRENCY_SYMBOLS, DAY_OF_MONTH, MAGNITUDES, MONTH_NUMBERS

# --- building blocks (ASCII digits only: Unicode digits never become numbers) ---------

_SP = r"[ \t\u00a0\u202f]"  # spaces allowed inside one token (never a line break)
_NUM = r"(?:[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?|\.[0-9]+)"
_START = r"(?<![^\W_])(?<![0-9][.,])"  # not glued to a word, nor to "1." / "1,"
_END = r"(?![^\W_]|[.,][0-9])"  # not followed by a word character, nor by ".5" / ",000"
_MONTH_NAME = (  # a full name, or an abbreviation with an optional full stop
    r"(?:(?:January|February|March|April|May|June|July|August|September|October|November"
    r"|December)|(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.?)"
)
_CURRENCY_CODE = r"(?:USD|EUR|GBP)"
_MEASURE_UNITS = r"(?i:KB|MB|GB|TB|PB|GHz|MHz)"

# Alternatives are tried in this order at each position; the first that matches wins,
# so a date or an amount consumes its span before any word inside it is looked at.
_SCAN = re.compile(
    rf"""
    (?P<url>(?<![^\W_])(?:https?://|www\.)[^\s<>"'`]*[^\s<>"'`.,;:!?)\]}}*])
    |(?P<email>(?<![\w.+-])[\w.+-]+@[^\W_][\w-]*(?:\.[\w-]+)+)
    |(?P<iso>(?<![^\W_])(?<![0-9][.,-])
        (?P<iso_y>[0-9]{{4}})-(?P<iso_m>0[1-9]|1[0-2])-(?P<iso_d>0[1-9]|[12][0-9]|3[01])
        (?:T[0-9]{{2}}:[0-9]{{2}}(?::[0-9]{{2}}(?:\.[0-9]+)?)?(?:Z|[+-][0-9]{{2}}:?[0-9]{{2}})?)?
        (?![^\W_]|-[0-9]))
    |(?P<time>{_START}[0-9]{{1,2}}:[0-9]{{2}}(?::[0-9]{{2}})?(?:{_SP}?[AaPp]\.?[Mm]\.?)?{_END})
    |(?P<dm>(?<![^\W_])(?P<dm_m>{_MONTH_NAME}){_SP}+(?P<dm_d>{DAY_OF_MONTH}){_END}
        (?:,?{_SP}+(?P<dm_y>[0-9]{{4}}){_END})?)
    |(?P<md>{_START}(?P<md_d>{DAY_OF_MONTH})(?:{_SP}+of)?{_SP}+(?P<md_m>{_MONTH_NAME})(?![^\W_])
        (?:,?{_SP}+(?P<md_y>[0-9]{{4}}){_END})?)
    |(?P<cur>(?:(?P<cur_sym>US\$|[$€£])|(?<![^\W_])(?P<cur_code>{_CURRENCY_CODE})){_SP}?
        (?P<cur_num>{_NUM})
        (?P<cur_mag>{_SP}?(?i:thousand|million|billion|trillion|bn|mn)|MM|[kKmMbB])?
        (?:{_SP}?(?P<cur_code2>{_CURRENCY_CODE}))?{_END})
    |(?P<pct>{_START}(?P<pct_num>{_NUM}){_SP}?(?:%|(?i:percent|per{_SP}cent|pct)(?![^\W_])))
    |(?P<unit>{_START}(?P<unit_num>{_NUM}){_SP}?(?P<unit_u>{_MEASURE_UNITS}){_END})
    |(?P<num>{_START}(?P<num_num>{_NUM})
        (?P<num_mag>k|K|M|bn|{_SP}(?i:thousand|million|billion|trillion))?
        (?:{_SP}?(?P<num_code>{_CURRENCY_CODE}))?{_END})
    |(?P<word>[^\W_]+(?:[-\u2010\u2011'\u2019._][^\W_]+)*)
    """,
    re.VERBOSE,
)

_ORDINAL_OR_CLOCK = re.compile(r"[0-9]+(?:st|nd|rd|th)|[0-9]{1,2}(?:am|pm)", re.IGNORECASE)
_CONTRACTION = re.compile("['\u2019](?:t|d|ll|ve|re|m)\\Z", re.IGNORECASE)
_POSSESSIVE = re.compile("['\u2019]s\\Z", re.IGNORECASE)
_HYPHENS = str.maketrans({"\u2010": "-", "\u2011": "-", "\u2019": "'"})

# --- the published stop list (SPEC.md §11 reproduces it) -------------------------

STOP_WORDS: frozenset[str] = frozenset("""
january february march april may june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec
monday tuesday wednesday thursday friday saturday sunday
mon tue tues wed thu thur thurs fri sat sun today tomorrow yesterday
keep adapt reject verdict verdicts binding bindings
i mr mrs ms miss mx dr prof sir madam
a an the this that these those there here it its he she they them we us you your yours
our ours my me his her hers their theirs who whom whose what which when where why how
yes no not none never nothing ok okay sure certainly please thanks thank sorry hello hi
dear regards best note notes answer summary recommendation
and or nor but so yet however although though instead also then thus therefore
if unless because since while whereas as at by for from in into of off on onto out over
per to up upon with within without about above after against along among around before
behind below between beyond during except inside near outside through under until via
is are was were be been being am do does did done have has had can could would should
will shall may might must let all any both each either every few many more most much
neither no other others several some such only just one
based according unfortunately currently previously now still hence overall finally first
second next last given current new total important warning reason step option question
response context fact facts value status decision result conclusion update correction fyi tbd
usd eur gbp pm utc gmt
""".split())
# Two-letter acronyms that are names, not the function words they spell in lower case.
_CAPS_KEPT = frozenset({"US", "IT"})

_CUES = frozenset({"not", "no", "never", "cannot", "without", "none"})
_CLAUSE_WORDS = frozenset({"but", "however", "although", "yet", "instead"})
_CLAUSE_MARKS = frozenset(".;:!?,\n\r\u2026")
_OPENERS = frozenset(" \t\n\r\u00a0\u202f\"'\u201c\u2018([{*_#>\u2022\u2013\u2014-")
_CLOSERS = frozenset("\"'\u201d\u2019)]}*_")
_ABBREVIATION = re.compile(
    r"(?<![\w.])(?:mr|mrs|ms|mx|dr|prof|st|jr|sr|vs|cf|approx|e\.g|i\.e)\.\Z", re.IGNORECASE)


class Unit(NamedTuple):
    """One scanned span: a salient token (``kind`` set) or a plain word (``kind`` None)."""

    start: int
    end: int
    kind: str | None
    norm: Hashable
    bare_digit: bool  # a bare one-digit number: salient in sources only


def scan(text: str) -> list[Unit]:
    """Split ``text`` into units, left to right; every word-like span is one unit."""
    return [_classify(m) for m in _SCAN.finditer(text)]


def _fraction(text: str) -> Fraction:
    return Fraction(text.replace(",", ""))


def _magnitude(mag: str | None) -> int:
    if not mag:
        return 1
    return MAGNITUDES[mag.strip(" \t\u00a0\u202f").lower()]


def _date(year: str | None, month: str, day: str) -> tuple[int | None, int, int]:
    m = MONTH_NUMBERS[month[:3].lower()] if not month.isdigit() else int(month)
    d = int(day.rstrip("stndrh"))
    return (int(year) if year else None, m, d)


def _classify(m: re.Match[str]) -> Unit:
    g = m.groupdict()
    s, e = m.span()
    if g["url"] or g["email"]:
        return Unit(s, e, "identifier", m.group().casefold(), False)
    if g["iso"]:
        return Unit(s, e, "date", _date(g["iso_y"], g["iso_m"], g["iso_d"]), False)
    if g["time"]:
        return Unit(s, e, None, None, False)
    if g["dm"]:
        return Unit(s, e, "date", _date(g["dm_y"], g["dm_m"], g["dm_d"]), False)
    if g["md"]:
        return Unit(s, e, "date", _date(g["md_y"], g["md_m"], g["md_d"]), False)
    if g["cur"]:
        code = g["cur_code2"] or g["cur_code"] or CURRENCY_SYMBOLS[g["cur_sym"].lower()]
        value = _fraction(g["cur_num"]) * _magnitude(g["cur_mag"])
        return Unit(s, e, "amount", (value, code), False)
    if g["pct"]:
        return Unit(s, e, "percent", _fraction(g["pct_num"]), False)
    if g["unit"]:
        norm = g["unit_num"].replace(",", "") + g["unit_u"].casefold()
        return Unit(s, e, "identifier", norm, False)
    if g["num"]:
        value = _fraction(g["num_num"]) * _magnitude(g["num_mag"])
        plain = not g["num_mag"] and not g["num_code"]
        bare_digit = plain and len(g["num_num"]) == 1
        return Unit(s, e, "amount", (value, g["num_code"]), bare_digit)
    return _classify_word(g["word"], s, e)


def _classify_word(word: str, s: int, e: int) -> Unit:
    has_digit = any(c in "0123456789" for c in word)
    has_letter = any(c.isalpha() for c in word)
    if has_digit and has_letter:
        if _ORDINAL_OR_CLOCK.fullmatch(word) or "'" in word or "\u2019" in word:
            return Unit(s, e, None, None, False)
        return Unit(s, e, "identifier", word.translate(_HYPHENS).casefold(), False)
    base = _POSSESSIVE.sub("", word)
    if not any(c.isupper() for c in base) or _CONTRACTION.search(base) or _stopped(base):
        return Unit(s, e, None, None, False)
    return Unit(s, e, "proper", unicodedata.normalize("NFC", base.translate(_HYPHENS)), False)


def _stopped(word: str) -> bool:
    if len(word) > 1 and word.isupper() and word in _CAPS_KEPT:
        return False
    return word.casefold() in STOP_WORDS


# --- sentence position -----------------------------------------------------------------


def sentence_initial(text: str, start: int) -> bool:
    """True when only spaces and openers (quotes, brackets, list and emphasis marks)
    separate ``start`` from the start of the text, a line break, or a ``. ! ? …`` followed
    by a space (a full stop after a title or "e.g." does not count)."""
    i = start
    spaced = False
    while i > 0 and text[i - 1] in _OPENERS:
        if text[i - 1] in "\n\r":
            return True
        spaced = spaced or text[i - 1].isspace()
        i -= 1
    if i == 0:
        return True
    if not spaced:
        return False
    while i > 0 and text[i - 1] in _CLOSERS:
        i -= 1
    if i > 0 and text[i - 1] in "!?\u2026":
        return True
    if i > 0 and text[i - 1] == ".":
        return not _ABBREVIATION.search(text, 0, i)
    return False


# --- negation --------------------------------------------------------------------------


def _is_cue(word: str) -> bool:
    return word in _CUES or word.endswith(("n't", "n\u2019t"))


def negated_before(text: str, units: Sequence[Unit], pos: int, count: int | None = None) -> bool:
    """True when one of the three units before ``pos`` is a negation cue and no clause
    boundary lies between the cue and ``pos``. ``units[:count]`` (all of ``units`` by
    default) are the units of ``text`` that end at or before ``pos``."""
    cursor = pos
    last = len(units) if count is None else count
    for i in range(last - 1, max(last - 3, 0) - 1, -1):
        unit = units[i]
        if any(c in _CLAUSE_MARKS for c in text[unit.end:cursor]):
            return False
        word = text[unit.start:unit.end].lower()
        if word in _CLAUSE_WORDS:
            return False
        if _is_cue(word) or (word == "longer" and _follows_no(text, units, i)):
            return True
        cursor = unit.start
    return False


def negation(text: str) -> Callable[[int], bool]:
    """Scan ``text`` once; the result tells whether a span starting at an offset is
    negated, reading the units of the whole text that end at or before that offset."""
    units = scan(text)
    ends = [u.end for u in units]

    def negated(pos: int) -> bool:
        return negated_before(text, units, pos, bisect.bisect_right(ends, pos))

    return negated


def _follows_no(text: str, units: Sequence[Unit], i: int) -> bool:
    """Whether unit ``i`` is preceded by "no" and a space: "no longer" is one cue."""
    if i == 0:
        return False
    prev = units[i - 1]
    return text[prev.start:prev.end].lower() == "no" and text[prev.end:units[i].start].isspace()
