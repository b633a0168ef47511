"""The public face's door: ``gamma.X`` checks its arguments' types against X's annotations.

A caller who hands ``gamma.resolve`` a string for an actor gets a ``TypeError`` naming the
parameter, never an ``AttributeError`` from deep inside. The rooms below keep their plain
functions (deep imports are not checked); this module imports nothing of gamma, so the check
costs ``import gamma`` nothing until a function is first used.
"""

from __future__ import annotations

import collections.abc as abc
import functools
import inspect
import itertools
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = ["checked", "compile_hint", "describe"]

PublicFunction = TypeVar("PublicFunction", bound=Callable[..., Any])

#: Containers whose items are checked too: materialised, so a look costs no work the function
#: would not do (a generator or a store's lazy view is checked by the function that reads it).
_MATERIAL = (list, tuple, str, bytes, bytearray, dict)
_BY_POSITION = inspect.Parameter.POSITIONAL_OR_KEYWORD
_BY_KEYWORD = inspect.Parameter.KEYWORD_ONLY


def checked(function: PublicFunction) -> PublicFunction:
    """``function`` behind a check of every argument against its annotation."""
    signature = inspect.signature(function)
    built: list[dict[str, tuple[Check, Any]]] = []

    def checks() -> dict[str, tuple[Check, Any]]:
        """Built at the first call: a method's hints may name its own class, not yet defined
        when the decorator runs."""
        if not built:
            hints = typing.get_type_hints(function)
            built.append({name: (compile_hint(hint), hint) for name, hint in hints.items()
                          if name != "return"})  # fmt: skip
        return built[0]

    params = signature.parameters
    # A call that names each argument once, by position or keyword, of a signature without
    # ``*args``/``**kwargs`` or positional-only parameters, needs no ``Signature.bind`` (about
    # 6 us a call, on every turn of a host): its arguments are paired with their names here.
    simple = all(p.kind in (_BY_POSITION, _BY_KEYWORD) for p in params.values())
    positional = tuple(name for name, p in params.items() if p.kind is _BY_POSITION)
    named = frozenset(params)
    required = frozenset(name for name, p in params.items() if p.default is p.empty)

    def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterable[tuple[str, Any]]:
        if simple and len(args) <= len(positional):
            given = positional[: len(args)]
            if (kwargs.keys() <= named and kwargs.keys().isdisjoint(given)
                    and required <= kwargs.keys() | set(given)):  # fmt: skip
                # in the signature's order, as ``bind`` gives them: the first wrong is named
                later = ((name, kwargs[name]) for name in params if name in kwargs)
                return itertools.chain(zip(given, args), later)
        try:
            return signature.bind(*args, **kwargs).arguments.items()
        except TypeError as exc:
            raise TypeError(f"{function.__qualname__}(): {exc}") from None

    @functools.wraps(function)
    def door(*args: Any, **kwargs: Any) -> Any:
        known = checks()
        for name, value in arguments(args, kwargs):
            check, hint = known.get(name, (None, None))
            if check is not None and not check(value):
                raise TypeError(f"{function.__qualname__}(): {name} must be {describe(hint)},"
                                f" not {type(value).__name__}")  # fmt: skip
        return function(*args, **kwargs)

    return typing.cast(PublicFunction, door)


Check = Callable[[Any], bool]


def _anything(value: Any) -> bool:
    return True


def compile_hint(hint: Any) -> Check:
    """A predicate for the annotation (the forms gamma's signatures use), built once: a
    million events cost one ``isinstance`` each."""
    if hint is Any:
        return _anything
    if hint is None or hint is type(None):
        return lambda value: value is None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        plain = tuple(o for o in options if isinstance(o, type) and o not in _SPECIAL
                      and not getattr(o, "_is_protocol", False))  # fmt: skip
        others = [compile_hint(o) for o in options if o not in plain]
        if not others:
            return lambda value: isinstance(value, plain)
        return lambda value: isinstance(value, plain) or any(c(value) for c in others)
    if hint is typing.IO or origin is typing.IO:
        return lambda value: callable(getattr(value, "write", None))
    if origin is None:
        return _plain(hint)
    if not isinstance(origin, type):
        return _anything  # a form this door does not know: the function checks it
    return _container(origin, typing.get_args(hint))


def _classes(hint: Any) -> tuple[type, ...] | None:
    """The classes of an annotation that is a plain class or a union of them, else None."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    if all(isinstance(o, type) and o not in _SPECIAL and not getattr(o, "_is_protocol", False)
           and not typing.get_args(o) for o in options):  # fmt: skip
        return tuple(options)
    return None


#: Types whose check is not a plain isinstance (True is no number; an int is a float).
_SPECIAL = (int, float)


def _plain(hint: Any) -> Check:
    if not isinstance(hint, type):
        return _anything
    if hint is int:
        return lambda value: isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return lambda value: isinstance(value, (int, float)) and not isinstance(value, bool)
    if getattr(hint, "_is_protocol", False):  # a structural type: what it needs is its members
        members = [m for m in vars(hint) if not m.startswith("_")]
        return lambda value: all(hasattr(value, m) for m in members)
    return lambda value: isinstance(value, hint)


def _container(origin: type, args: tuple[Any, ...]) -> Check:
    if not args:
        return lambda value: isinstance(value, origin)
    if issubclass(origin, abc.Mapping):
        key, item = compile_hint(args[0]), compile_hint(args[-1])
        return lambda value: isinstance(value, origin) and (
            not isinstance(value, dict) or all(key(k) and item(v) for k, v in value.items())
        )
    if origin is tuple and args[-1] is not Ellipsis:
        parts = [compile_hint(a) for a in args]
        return lambda value: isinstance(value, tuple) and len(value) == len(parts) and all(
            c(v) for c, v in zip(parts, value, strict=True)
        )
    item = compile_hint(args[0])
    classes = _classes(args[0])

    def check(value: Any) -> bool:
        # a string where strings are wanted is one name, not its characters; a mapping where
        # items are wanted is one object, not its keys: both are the caller's slip
        if not isinstance(value, origin) or isinstance(value, (str, abc.Mapping)):
            return False
        if not isinstance(value, _MATERIAL):
            return True
        if classes is not None:  # the common case, events: a builtin loop, 25 ns an item
            return all(map(isinstance, value, itertools.repeat(classes)))
        return all(map(item, value))

    return check


def describe(hint: Any) -> str:
    """The annotation as a reader would say it: ``str or Path``."""
    if hint is None or hint is type(None):
        return "None"
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(option) for option in typing.get_args(hint))
    if origin is not None:
        inner = ", ".join(describe(a) for a in typing.get_args(hint))
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return getattr(hint, "__name__", str(hint))
