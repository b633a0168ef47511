"""The public door (``gamma.face.checked``): its fast pairing of arguments with their names
agrees with ``Signature.bind`` on every call shape, the wrong ones included."""

from __future__ import annotations

import inspect
import typing
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gamma.face import checked, compile_hint

NAMES = ("actor", "at", "keys", "whole")


def plain(actor: str, at: int, keys: str | None = None, *, whole: bool = False) -> tuple[Any, ...]:
    return actor, at, keys, whole


DOOR = checked(plain)
SIGNATURE = inspect.signature(plain)
CHECKS = {name: compile_hint(hint) for name, hint in typing.get_type_hints(plain).items()}
VALUES = ("a", 1, None, True, 2.5)


def calls() -> st.SearchStrategy[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Up to four positional values and any keywords (unknown names and repeats too), each
    of the right type or not."""
    value = st.sampled_from(VALUES)
    args = st.lists(value, max_size=4).map(tuple)
    kwargs = st.dictionaries(st.sampled_from((*NAMES, "other")), value, max_size=4)
    return st.tuples(args, kwargs)


@given(calls())
def test_the_door_pairs_arguments_as_bind_does(
    call: tuple[tuple[Any, ...], dict[str, Any]],
) -> None:
    """The door refuses exactly the calls ``bind`` refuses or whose bound values a hint
    refuses (naming the parameter), and passes every other call through unchanged."""
    args, kwargs = call
    try:
        bound = SIGNATURE.bind(*args, **kwargs).arguments
    except TypeError as exc:
        try:
            DOOR(*args, **kwargs)
        except TypeError as raised:
            assert str(raised) == f"plain(): {exc}"
        else:
            raise AssertionError(f"{call} was let through") from None
        return
    wrong = [name for name, value in bound.items() if not CHECKS[name](value)]
    try:
        result = DOOR(*args, **kwargs)
    except TypeError as raised:
        assert wrong and str(raised).startswith(f"plain(): {wrong[0]} must be ")
    else:
        assert not wrong
        assert result == plain(*args, **kwargs)
