"""An assert's stated ``derivation`` checked at the door (issue 29), by every way in.

The strict reader raises ``check_derivation``'s error; the fast readers (``plain``,
``fastpath``) accept a line only when ``derivation_sound`` says the strict one would, so
the three ways give the same event or leave the line to the strict path and its error.
"""

from __future__ import annotations

from gamma.core.terms.derivation import Derivation, parse_derivation
from gamma.core.terms.errors import InputError, ValueTypeError
from gamma.core.terms.model import Assert

__all__ = ["check_derivation", "derivation_sound"]


def check_derivation(event: Assert, *, source: str | None, line: int | None) -> Derivation:
    """An assert's ``derivation``: only on a derived fact, parsed (its errors name the column),
    each input a fact of ``depends_on`` or a key one of them holds (logcheck checks keys)."""
    assert event.derivation is not None
    if event.kind != "derived":
        raise ValueTypeError(
            "a derivation is only allowed on an assert of kind 'derived'",
            source=source, line=line, field="derivation",
        )
    derivation = parse_derivation(event.derivation, source=source, line=line, field="derivation")
    if derivation.inputs and not event.depends_on:
        raise ValueTypeError(
            f"input {{{derivation.inputs[0]}}} names no fact: list its fact in depends_on",
            source=source, line=line, field="derivation",
        )
    return derivation


def derivation_sound(event: Assert) -> bool:
    """Whether ``check_derivation`` accepts the event's derivation (a fast reader's test)."""
    try:
        check_derivation(event, source=None, line=None)
    except InputError:
        return False
    return True
