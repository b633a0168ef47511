"""The event schema as the readers use it, read off the model's one declaration.

``gamma.core.terms.model`` states each event kind, its fields, their defaults and the
``Rule`` of each field. This module turns that into the tables the three decoders are built
from (``plain``'s msgspec structs, ``fastpath``'s check table, ``events``' field tuples), so
no reader writes a field list of its own: a field added to the model reaches them all, and
``tests/test_schema.py`` checks that each derived table names exactly the model's fields.
"""

from __future__ import annotations

from typing import Any, get_args

import attrs

from gamma.core.terms.model import EVENT_TYPES, ErasedValue, Event, Rule, Visibility, rule_of

__all__ = [
    "EVENT_FIELDS",
    "FAST_RULES",
    "LISTED",
    "STAMPED",
    "Slot",
    "fast_kinds",
    "fields_of",
    "named",
]

#: The rules the fast decoders read; a field of any other rule (issue 30's digests, an
#: erase's list, a migration's count) is the strict path's alone: a line holding it is
#: declined, and a kind that requires it has no fast form at all.
FAST_RULES = frozenset(Rule) - {Rule.DIGEST, Rule.COUNT, Rule.ERASED}


@attrs.frozen
class Slot:
    """One field of a kind: its name, its rule, whether it must be written, and for a field
    of rule ``ONE_OF`` the strings its Literal type allows."""

    name: str
    rule: Rule
    required: bool
    choices: tuple[str, ...] = ()

    @property
    def fast_required(self) -> bool:
        """Whether the fast decoders need it written: an assert without ``value`` is an erased
        one (SPEC §21), which only the strict path reads."""
        return self.required or self.rule is Rule.VALUE


def _choices(field: attrs.Attribute[Any]) -> tuple[str, ...]:
    """The strings of a field's ``Literal[...] | None`` type."""
    found: list[str] = []
    for member in get_args(field.type):
        found.extend(arg for arg in get_args(member) if isinstance(arg, str))
    return tuple(found)


def _slots(cls: type) -> tuple[Slot, ...]:
    """The public fields of an attrs class of the model, in declaration order."""
    attrs.resolve_types(cls)
    return tuple(
        Slot(
            name=field.name,
            rule=rule_of(field),
            required=field.default is attrs.NOTHING,
            choices=_choices(field) if rule_of(field) is Rule.ONE_OF else (),
        )
        for field in attrs.fields(cls)
        if field.init
    )


#: Each event class's fields, and those of the objects an event holds.
EVENT_FIELDS: dict[type, tuple[Slot, ...]] = {
    cls: _slots(cls) for cls in (*EVENT_TYPES.values(), Visibility, ErasedValue)
}


def fields_of(cls: type) -> tuple[Slot, ...]:
    """The fields of an event class (or of ``Visibility``, ``ErasedValue``)."""
    return EVENT_FIELDS[cls]


def named(cls: type, *rules: Rule) -> tuple[str, ...]:
    """The names of ``cls``'s fields of these rules, in declaration order (the order in which
    the strict path checks them, so the order its first error follows)."""
    return tuple(slot.name for slot in EVENT_FIELDS[cls] if slot.rule in rules)


def fast_kinds() -> dict[type[Event], tuple[Slot, ...]]:
    """The kinds the fast decoders read, with the fields they read: every field of a rule in
    ``FAST_RULES`` (a kind that requires a field of another rule is left out)."""
    return {
        cls: tuple(slot for slot in EVENT_FIELDS[cls] if slot.rule in FAST_RULES)
        for cls in EVENT_TYPES.values()
        if all(slot.rule in FAST_RULES for slot in EVENT_FIELDS[cls] if slot.required)
    }


#: A visibility's lists of names (who it lets see).
LISTED = named(Visibility, Rule.NAMES)

#: Every field of rule ``STAMP`` in any kind, ``ts`` first: where a raw line may hold a time.
STAMPED: tuple[str, ...] = tuple(
    dict.fromkeys(name for cls in EVENT_TYPES.values() for name in named(cls, Rule.STAMP))
)
