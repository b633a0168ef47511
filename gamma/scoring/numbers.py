"""Numbers and dates as a response may write them, for the search of withheld values.

:func:`normalise` folds the ways a text can hide a number from a plain reader (full-width
and other digit forms, zero-width and format characters, a number broken across one line
break); :func:`numbers` and :func:`dates` then read every number and date of the
normalised text, each with *every* value it can be read as, so a withheld value is found
however it is written. The rules are written out in SPEC.md §11.8. Pure and stdlib only;
English spelled-out numbers are read by a small deterministic parser, not a model.
"""

from __future__ import annotations

import re
import unicodedata
from fractions import Fraction
from typing import NamedTuple

__all__ = ["Date", "Number", "dates", "normalise", "numbers", "spelled"]

# --- normalisation ---------------------------------------------------------------------

_ARABIC_SEPARATORS = {"\u066b": ".", "\u066c": ",", "\u066a": "%"}
# Cyrillic and Greek letters that look like Latin ones ("Ιnitech" with a Greek Iota)
_LOOKALIKES = dict(zip(
    "АВЕЅІЈКМНОРСТХУаеіјорсхуѕԁԛԝΑΒΕΖΗΙΚΜΝΟΡΤΥΧοντ\u2212",
    "ABESIJKMHOPCTXYaeijopcxysdqwABEZHIKMNOPTYXovt-",
    strict=True,
))
# a separator and one line break inside a number: "$40,\n000" (never a bare "40\n000")
_BROKEN = re.compile(r"(?<=[0-9])([,.'\u2019])[ \t]*\r?\n[ \t]*(?=[0-9])"
                     r"|(?<=[0-9])[ \t]*\r?\n[ \t]*([,.'\u2019])(?=[0-9])")


def normalise(text: str) -> str:
    """``text`` as the number and date readers see it.

    NFKC (full-width digits, narrow and thin spaces become ASCII); every other decimal
    digit (Arabic-Indic, Devanagari, ...) becomes its ASCII digit and the Arabic decimal,
    thousands and percent signs become ``. , %``; format characters (category Cf: zero-width
    spaces and joiners, soft hyphens, direction marks) are removed; Cyrillic and Greek
    letters that look like Latin ones become those (``Ιnitech`` with a Greek Iota reads
    ``Initech``) and a minus sign a hyphen; a separator and one
    line break inside a number are joined (``"$40,\\n000"`` reads ``"$40,000"``).
    """
    if text.isascii():
        folded = text
    else:
        folded = unicodedata.normalize("NFKC", text)
        chars = []
        for c in folded:
            if c.isascii():
                chars.append(c)
            elif c in _ARABIC_SEPARATORS:
                chars.append(_ARABIC_SEPARATORS[c])
            elif c in _LOOKALIKES:
                chars.append(_LOOKALIKES[c])
            elif unicodedata.category(c) == "Cf":
                continue
            elif c.isdecimal():
                chars.append(str(unicodedata.decimal(c)))
            else:
                chars.append(c)
        folded = "".join(chars)
    if "\n" in folded:
        folded = _BROKEN.sub(lambda m: m.group(1) or m.group(2), folded)
    return folded


# --- numbers ---------------------------------------------------------------------------


class Number(NamedTuple):
    """One number of a text: its span, every value it can be read as, and its kind.

    ``currency`` is an ISO code or None; ``percent`` marks a percentage; ``year`` marks a
    plain four-digit integer from 1900 to 2099; ``dated`` marks such a year in a date
    context ("in 2026", "FY2026", "since 2024"), which is a year and no amount at all.
    """

    start: int
    end: int
    values: frozenset[Fraction]
    currency: str | None
    percent: bool
    year: bool
    dated: bool


# CURRENCY_SYMBOLS (lower-case keys), MAGNITUDES, MONTH_NUMBERS and DAY_OF_MONTH are also the
# token scanner's (lexicon.py): keep every key it matches.
CURRENCY_SYMBOLS = {"$": "USD", "us$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
_CODES = ("USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD")
_WORDS = {"dollar": "USD", "dollars": "USD", "bucks": "USD", "euro": "EUR", "euros": "EUR",
          "pound": "GBP", "pounds": "GBP", "yen": "JPY", "francs": "CHF"}
MAGNITUDES = {"k": 10**3, "thousand": 10**3, "grand": 10**3, "m": 10**6, "mm": 10**6,
              "mn": 10**6, "mil": 10**6, "million": 10**6, "b": 10**9, "bn": 10**9,
              "billion": 10**9, "trillion": 10**12, "tn": 10**12}
_CODE = "|".join(_CODES)
_CURRENCY_WORD = "|".join(sorted(_WORDS, key=len, reverse=True))
_NUMERAL = re.compile(
    rf"""
    (?<![^\W_])(?<![0-9][.,])
    (?:(?P<sym>US\$|[$€£¥])[ ]?|(?P<code>{_CODE})[ ]?)?
    (?P<int>[0-9]{{1,3}}(?P<sep>[,.' \u2019])[0-9]{{3}}(?:(?P=sep)[0-9]{{3}})*(?![0-9])|[0-9]+)
    (?:(?P<dec>[.,])(?P<frac>[0-9]+))?
    (?:[eE](?P<exp>[+-]?[0-9]{{1,3}}))?
    (?![0-9])
    (?P<mag>[ ]?(?:k|K|M|MM|mn|bn|B|tn|(?i:mil))(?![^\W_])
        |[ ](?i:thousand|million|billion|trillion|grand)(?![^\W_]))?
    (?:[ ]?(?P<sym2>[$€£¥])|[ ]?(?P<code2>{_CODE})(?![^\W_])|[ ](?i:(?P<word>{_CURRENCY_WORD}))(?![^\W_]))?
    (?P<qual>-?(?i:ish)(?![^\W_])|\+)?
    (?P<pct>[ ]?(?:%|(?i:percent|per[ ]cent|pct)(?![^\W_])))?
    (?(pct)(?:-?(?i:ish)|\+)?)
    (?![^\W_])(?![.,][0-9])
    """,
    re.VERBOSE,
)
_YEAR_CONTEXT = re.compile(
    r"(?i:\b(?:in|since|by|until|till|year|during|fy|cy|q[1-4]|h[12])"
    r"[ '\u2019]*|\bfy|(?:january|february|march|april|may|june|july|august|september"
    r"|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?,?[ ]"
    r"(?:[0-9]{1,2}(?:st|nd|rd|th)?,?[ ])?)\Z"
)


def numbers(text: str) -> list[Number]:
    """Every number of a normalised ``text`` in text order, spelled-out ones included.

    Numbers inside a date or a clock time (see :func:`dates`) are not read as numbers.
    """
    blocked = [(d.start, d.end) for d in dates(text)]
    found: list[Number] = []
    if any(c.isdigit() for c in text):
        for m in _NUMERAL.finditer(text):
            s, e = m.span()
            if any(bs < e and s < be for bs, be in blocked):
                continue
            number = _read(m, text)
            if number is not None:
                found.append(number)
    found += spelled(text)
    found.sort()
    return found


def _read(m: re.Match[str], text: str) -> Number | None:
    g = m.groupdict()
    sep, dec = g["sep"], g["dec"]
    if sep is not None and dec == sep:
        return None  # "40,000,5": no reading
    digits = g["int"].replace(sep, "") if sep else g["int"]
    values = {Fraction(digits + ("." + g["frac"] if dec else ""))}
    if sep == "." and dec is None and g["int"].count(".") == 1:
        values.add(Fraction(g["int"]))  # "40.000": forty thousand, or forty
    scale = Fraction(1)
    if g["exp"]:
        scale *= Fraction(10) ** int(g["exp"])
    if g["mag"]:
        scale *= MAGNITUDES[g["mag"].strip().lower()]
    currency = None
    if g["sym"] or g["sym2"]:
        currency = CURRENCY_SYMBOLS[(g["sym"] or g["sym2"]).lower()]
    elif g["code"] or g["code2"]:
        currency = g["code"] or g["code2"]
    elif g["word"]:
        currency = _WORDS[g["word"].lower()]
    percent = g["pct"] is not None
    plain = not (sep or dec or g["exp"] or g["mag"] or currency or percent or g["qual"])
    year = plain and len(digits) == 4 and 1900 <= int(digits) <= 2099
    dated = year and _YEAR_CONTEXT.search(text, max(0, m.start() - 24), m.start()) is not None
    return Number(m.start(), m.end(), frozenset(v * scale for v in values),
                  currency, percent, year, dated)


# --- spelled-out numbers ---------------------------------------------------------------

_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    " fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_SCALES = {"thousand": 10**3, "grand": 10**3, "million": 10**6, "billion": 10**9,
           "trillion": 10**12}
_ALL = sorted([*_UNITS, *_TENS, "hundred", *_SCALES], key=len, reverse=True)
_NUMWORD = "(?:" + "|".join(_ALL) + ")"
_SPELLED = re.compile(
    rf"(?i)(?<![^\W_])(?:an?[ ]+(?=hundred|thousand|million|billion))?{_NUMWORD}"
    rf"(?:(?:[ ]+and[ ]+|[ ]*-[ ]*|[ ]+){_NUMWORD})*(?![^\W_])"
    rf"(?:[ ]*(?P<pct>%|percent|per[ ]cent)|[ ]+(?P<word>{_CURRENCY_WORD}))?(?![^\W_])"
)


def spelled(text: str) -> list[Number]:
    """English spelled-out numbers of ``text``: "forty thousand", "twenty-two percent".

    A run of number words is read when it parses (units, tens, "hundred", scales, "and",
    a leading "a"); it is a number only when it has two or more number words or is
    followed by a percent or currency word, so a lone "one" or "ten" is never one.
    """
    found: list[Number] = []
    if not any(c in "otfsenhzbmOTFSENHZBMAa" for c in text):
        return found
    for m in _SPELLED.finditer(text):
        words = re.findall(r"[A-Za-z]+", m.group(0))
        number_words = [w.lower() for w in words if w.lower() not in ("a", "an", "and")]
        if m.group("pct") is None and m.group("word") is None:
            number_words = [w for w in number_words if w not in ("percent", "per", "cent")]
        else:
            tail = m.group("pct") or m.group("word")
            number_words = number_words[: len(number_words) - len(re.findall(r"[A-Za-z]+", tail))]
        value = _parse(number_words)
        if value is None:
            continue
        if len(number_words) < 2 and m.group("pct") is None and m.group("word") is None:
            continue
        currency = _WORDS[m.group("word").lower()] if m.group("word") else None
        found.append(Number(m.start(), m.end(), frozenset({Fraction(value)}), currency,
                            m.group("pct") is not None, False, False))
    return found


def _parse(words: list[str]) -> int | None:
    """The value of a run of English number words, or None when it is no one number."""
    total = current = 0
    last = ""  # the class of the previous word: unit, teen, ten, hundred, scale
    for word in words:
        if word in _UNITS:
            value = _UNITS[word]
            if last in ("unit", "teen") or (last == "ten" and value >= 10):
                return None
            current += value
            last = "unit" if value < 10 else "teen"
        elif word in _TENS:
            if last in ("unit", "teen", "ten"):
                return None
            current += _TENS[word]
            last = "ten"
        elif word == "hundred":
            if last in ("hundred",) or current % 100 >= 100:
                return None
            current = (current or 1) * 100
            last = "hundred"
        elif word in _SCALES:
            if last == "scale":
                return None
            total += (current or 1) * _SCALES[word]
            current = 0
            last = "scale"
        else:
            return None
    return total + current if last else None


# --- dates -----------------------------------------------------------------------------


class Date(NamedTuple):
    """One date of a text: ``(year or None, month, day)``, read only when unambiguous."""

    start: int
    end: int
    ymd: tuple[int | None, int, int]


MONTH_NUMBERS = {m: i for i, m in enumerate(
    "jan feb mar apr may jun jul aug sep oct nov dec".split(), start=1)}
_MONTH = (r"(?i:january|february|march|april|may|june|july|august|september|october"
          r"|november|december|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?")
DAY_OF_MONTH = r"(?:[12][0-9]|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_DATE = re.compile(
    rf"""
    (?<![^\W_])(?<![0-9][.,/-])
    (?:(?P<y1>[0-9]{{4}})(?P<s1>[-./])(?P<a1>[0-9]{{1,2}})(?P=s1)(?P<b1>[0-9]{{1,2}})
        (?:T[0-9]{{2}}:[0-9]{{2}}(?::[0-9]{{2}}(?:\.[0-9]+)?)?(?:Z|[+-][0-9]{{2}}:?[0-9]{{2}})?)?
      |(?P<a2>[0-9]{{1,2}})(?P<s2>[-./])(?P<b2>[0-9]{{1,2}})(?P=s2)(?P<y2>[0-9]{{4}})
      |(?P<m3>{_MONTH})[ ]+(?P<d3>{DAY_OF_MONTH})(?![0-9:])(?:,?[ ]+(?P<y3>[0-9]{{4}}))?
      |(?P<d4>{DAY_OF_MONTH})(?:[ ]+of)?[ ]+(?P<m4>{_MONTH})(?:,?[ ]+(?P<y4>[0-9]{{4}}))?
      |(?P<a6>[0-9]{{1,2}})/(?P<b6>[0-9]{{1,2}})(?![/0-9])
      |(?P<clock>[0-9]{{1,2}}:[0-9]{{2}}(?::[0-9]{{2}})?)
    )
    (?![^\W_])(?![.,/-][0-9])
    """,
    re.VERBOSE,
)


def dates(text: str) -> list[Date]:
    """Every date of a normalised ``text``: ISO and ``y/m/d``, ``d.m.y`` / ``m/d/y`` and a
    yearless ``m/d`` / ``d/m`` (read day-first or month-first only when one reading alone
    is a date, or both are the same),
    and month names either side of the day. Clock times are returned with ``ymd``
    ``(None, 0, 0)``: they block number reading and match no date.
    """
    found: list[Date] = []
    if not any(c.isdigit() for c in text):
        return found
    for m in _DATE.finditer(text):
        g = m.groupdict()
        s, e = m.span()
        if g["clock"]:
            found.append(Date(s, e, (None, 0, 0)))
        elif g["y1"]:
            ymd = _valid(int(g["y1"]), int(g["a1"]), int(g["b1"]))
            if ymd:
                found.append(Date(s, e, ymd))
        elif g["y2"] or g["a6"]:
            a, b = int(g["a2"] or g["a6"]), int(g["b2"] or g["b6"])
            y = int(g["y2"]) if g["y2"] else None
            readings = {r for r in (_valid(y, b, a), _valid(y, a, b)) if r}
            if len(readings) == 1:
                found.append(Date(s, e, readings.pop()))
            else:
                found.append(Date(s, e, (None, 0, 0)))  # ambiguous: a date, none we read
        else:
            month = MONTH_NUMBERS[(g["m3"] or g["m4"])[:3].lower()]
            day = int(re.sub(r"\D", "", g["d3"] or g["d4"]))
            year = g["y3"] or g["y4"]
            ymd = _valid(int(year) if year else None, month, day)
            if ymd:
                found.append(Date(s, e, ymd))
    return found


def _valid(year: int | None, month: int, day: int) -> tuple[int | None, int, int] | None:
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        return None
    if day > (29 if month == 2 else 30 if month in (4, 6, 9, 11) else 31):
        return None
    return (year, month, day)
