"""``GovernedStore``: a LangGraph ``BaseStore`` whose reads are what Γ admits for one bound actor.

A namespace is a scope path (``("helios", "launch")`` is the scope
``helios/launch``; the empty namespace is ``global``): each label is one scope
segment, so a label holding ``/`` (which would split the namespace) is refused
by every op, reads as writes. An item's key is the fact's key, and its value
dict is stored as the fact's value, in canonical JSON (floats refused, as
everywhere in gamma). ``put`` appends an ``assert`` written by the bound actor,
only at a namespace the actor reads (its scope, a parent, or ``()``: never
another user's), ``delete`` a ``retract`` of the item's admitted facts;
``get``, ``search`` and ``list_namespaces`` see only the facts Γ admits for the
actor at the store's clock, so a withheld item is simply absent, and the
resolution the reads came from, reasons and all, is ``store.last_resolution``
for the host's audit record. Scope and precedence are gamma's: an actor sees a
namespace's items when that namespace contains its scope, and the same key in
a more specific namespace overrides the general one (``overridden``).

As in LangGraph's ``InMemoryStore``, the reads of a batch see the store as it
was before the batch, and its writes (the last per namespace and key) are
appended together at the end, all of them or none. There is no semantic index:
``query`` does not rank, and results come in namespace, key and fact order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from gamma.core.reading.events import check_scope
from gamma.core.resolving.resolution import Resolution
from gamma.core.terms.canonical import canonical_json
from gamma.core.terms.decisions import Admitted
from gamma.core.terms.derivation import parse_derivation
from gamma.core.terms.errors import InputError, ValueTypeError
from gamma.core.terms.model import Actor, Assert
from gamma.face import checked
from gamma.integrations import MissingExtraError
from gamma.integrations.binding import Binding
from gamma.storage.engine import Engine

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        validate_op_namespace,
    )
except ImportError as exc:  # the optional extra is not installed: say which one
    raise MissingExtraError(__name__, "langgraph", exc.name) from exc

__all__ = ["GovernedStore", "NamespaceError", "scope_of", "namespace_of"]

GLOBAL = "global"


class NamespaceError(InputError, InvalidNamespaceError):
    """A namespace that is no scope path: LangGraph's error, and gamma's (field ``namespace``)."""


def scope_of(namespace: tuple[str, ...]) -> str:
    """The gamma scope of a namespace: its labels joined by ``/``; ``()`` is ``global``.

    Each label must be one scope segment (letters, digits, ``_.:-``): a ``/`` would
    silently make two labels of one, so it is refused, as is ``("global",)`` (write
    the global scope as ``()``) and LangGraph's reserved root ``langgraph``.
    """
    if namespace == (GLOBAL,):
        raise NamespaceError(
            "the namespace ('global',) is the global scope: write it as the empty namespace ()",
            field="namespace",
        )
    if namespace and namespace[0] == "langgraph":
        raise NamespaceError("the root label 'langgraph' is reserved by LangGraph",
                             field="namespace")
    for label in namespace:
        if not isinstance(label, str) or "/" in label or not check_scope(label):
            raise NamespaceError(
                f"invalid label {label!r} in namespace {namespace!r}: each label is one scope"
                " segment of letters, digits and _.:- (no '/', no spaces)", field="namespace",
            )
    return "/".join(namespace) if namespace else GLOBAL


def namespace_of(scope: str) -> tuple[str, ...]:
    return () if scope == GLOBAL else tuple(scope.split("/"))


def _encode(value: Mapping[str, Any]) -> str:
    if not isinstance(value, Mapping):
        raise ValueTypeError(
            f"an item's value must be a dict of JSON values (string keys, no floats), not"
            f" {type(value).__name__}: wrap a plain value as {{'value': ...}}", field="value",
        )
    try:
        return canonical_json(dict(value))
    except (TypeError, ValueError) as exc:
        raise ValueTypeError(
            f"an item's value must be JSON without floats (write decimals as strings): {exc}",
            field="value",
        ) from None


def _stored_value(value: Mapping[str, Any]) -> str | int | bool:
    """The fact value of an item: ``{"value": v}`` (and a derived item's ``value``) is stored as
    ``v`` itself when ``_decode`` reads it back as that dict, so a derivation can compute over
    it; any other dict as its canonical JSON."""
    if isinstance(value, Mapping) and set(value) - {"derivation"} == {"value"}:
        plain = value["value"]
        if isinstance(plain, (int, bool)) or (isinstance(plain, str) and not plain.startswith("{")):
            return plain
    return _encode(value)


def _decode(value: str | int | bool) -> dict[str, Any]:
    """The dict a value holds: a canonical JSON object decodes to itself, any other value
    (written by another surface) is ``{"value": value}``."""
    if isinstance(value, str) and value.startswith("{"):
        try:
            obj = json.loads(value)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and canonical_json(obj) == value:
            return obj
    return {"value": value}


class GovernedStore(BaseStore):
    """A LangGraph store over ``engine`` for ``actor`` (bound by the host, never by the graph).

    ``authority`` is what the actor's writes claim (never more than the policy's
    ``[writers]`` let it hold); ``clock`` gives the time reads resolve at and
    writes are stamped with (default: the UTC clock). Threads may share the engine (its
    calls are serialised); ``abatch`` runs on the caller's event loop.
    """

    @checked  # a str engine or actor is a TypeError naming it, not an AttributeError
    def __init__(
        self,
        engine: Engine,
        actor: Actor | Mapping[str, Any],
        *,
        authority: str | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.binding = Binding(engine, actor, authority=authority, clock=clock)
        self.last_resolution: Resolution | None = None
        self._asserted: dict[str, tuple[int, datetime]] = {}  # fact -> (position, ts)
        self._indexed = 0

    # -- the ops protocol --------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            if not isinstance(op, (GetOp, SearchOp, ListNamespacesOp, PutOp)):
                raise ValueError(f"unknown operation type: {type(op).__name__}")
            validate_op_namespace(op)
            scope_of(_named_namespace(op))  # reads refuse what writes refuse
            if isinstance(op, PutOp) and op.ttl is not None:
                raise NotImplementedError("GovernedStore keeps no TTL: facts expire by valid_until")
        reads = [op for op in ops if not isinstance(op, PutOp)]
        resolution = None
        if reads:
            only_gets = all(isinstance(op, GetOp) for op in reads)
            keys = sorted({op.key for op in reads if isinstance(op, GetOp)}) if only_gets else None
            resolution = self.binding.resolve(keys=keys)
            self.last_resolution = resolution
            self._index()
        results: list[Result] = []
        writes: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                writes[(tuple(op.namespace), op.key)] = op
                results.append(None)
                continue
            assert resolution is not None
            if isinstance(op, GetOp):
                results.append(self._get(resolution, op))
            elif isinstance(op, SearchOp):
                results.append(self._search(resolution, op))
            else:
                results.append(self._namespaces(resolution, op))
        if writes:
            self._write(list(writes.values()))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self.batch(ops)

    # -- reads -------------------------------------------------------------------------

    def _get(self, resolution: Resolution, op: GetOp) -> Item | None:
        scope = scope_of(tuple(op.namespace))
        held = [a for a in resolution.admitted if a.key == op.key and a.scope == scope]
        if not held:
            return None
        latest = max(held, key=lambda a: self._asserted[a.fact][0])
        item: Item = self._item(latest, Item)
        return item

    def _search(self, resolution: Resolution, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        found = []
        for admitted in resolution.admitted:
            namespace = namespace_of(admitted.scope)
            if namespace[: len(prefix)] != prefix:
                continue
            item = self._item(admitted, SearchItem)
            if op.filter and not all(_matches(item.value.get(k), v) for k, v in op.filter.items()):
                continue
            found.append((namespace, admitted.key, self._asserted[admitted.fact][0], item))
        found.sort(key=lambda row: row[:3])
        return [row[3] for row in found][op.offset : op.offset + op.limit]

    def _namespaces(self, resolution: Resolution, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = {namespace_of(a.scope) for a in resolution.admitted} - {()}
        matching = [
            ns for ns in spaces if all(_namespace_matches(c, ns) for c in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            matching = list({ns[: op.max_depth] for ns in matching})
        return sorted(matching)[op.offset : op.offset + op.limit]

    def _item(self, admitted: Admitted, cls: type[Item]) -> Any:
        _, ts = self._asserted[admitted.fact]
        return cls(
            namespace=namespace_of(admitted.scope), key=admitted.key,
            value=_decode(admitted.value), created_at=ts, updated_at=ts,
        )

    def _index(self) -> None:
        """Each assert's position and ts, read once from the events the engine gained since."""
        engine = self.binding.engine
        if len(engine) == self._indexed:
            return
        events = engine.events
        for pos in range(self._indexed, len(events)):
            event = events[pos]
            if isinstance(event, Assert):
                self._asserted[event.fact] = (pos, event.ts)
        self._indexed = len(events)

    # -- writes ------------------------------------------------------------------------

    def _derived(self, value: Mapping[str, Any]) -> dict[str, Any]:
        """The fields of a derived item ``{"value": v, "derivation": text}``: each input of the
        derivation is a key, read as the one fact of it the actor is admitted now."""
        derivation = value["derivation"]
        if set(value) != {"value", "derivation"} or not isinstance(derivation, str):
            raise ValueTypeError(
                "a derived item is {'value': stated value, 'derivation': text over item keys}",
                field="derivation",
            )
        names = parse_derivation(derivation, field="derivation").inputs
        held = self.binding.resolve(keys=names).admitted if names else ()
        depends_on = []
        for name in names:
            facts = [a.fact for a in held if a.key == name]
            if len(facts) != 1:
                raise ValueTypeError(
                    f"input {{{name}}} must be the key of one item you can read now", field="derivation"
                )
            depends_on.append(facts[0])
        fields: dict[str, Any] = {"kind": "derived", "derivation": derivation}
        if depends_on:
            fields["depends_on"] = depends_on
        return fields

    def _write(self, ops: list[PutOp]) -> None:
        deleted = sorted({op.key for op in ops if op.value is None})
        held: list[Admitted] = []
        if deleted:
            held = list(self.binding.resolve(keys=deleted).admitted)
        bodies: list[dict[str, Any]] = []
        for op in ops:
            scope = scope_of(tuple(op.namespace))
            if op.value is None:
                bodies += [
                    {"type": "retract", "fact": a.fact, "reason": "deleted from the LangGraph store"}
                    for a in held if a.key == op.key and a.scope == scope
                ]
                continue
            body: dict[str, Any] = {"type": "assert", "key": op.key, "value": _stored_value(op.value)}
            if scope != GLOBAL:
                body["scope"] = scope
            if isinstance(op.value, Mapping) and "derivation" in op.value:
                body.update(self._derived(op.value))
            bodies.append({**body, "fact": self.binding.new_fact_id(body)})
        if bodies:
            self.binding.write(bodies)


def _named_namespace(op: Op) -> tuple[str, ...]:
    """The namespace an op names: a search's prefix; a listing's conditions hold patterns,
    whose labels other than the wildcard ``*`` are checked as a namespace's are."""
    if isinstance(op, SearchOp):
        return tuple(op.namespace_prefix)
    if isinstance(op, (GetOp, PutOp)):
        return tuple(op.namespace)
    if isinstance(op, ListNamespacesOp):
        return tuple(p for c in op.match_conditions or () for p in c.path if p != "*")
    return ()


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's prefix / suffix conditions, ``*`` matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path):]
    return all(p == "*" or p == n for p, n in zip(path, part)) if path else True


def _matches(value: Any, wanted: Any) -> bool:
    """A filter as LangGraph's stores read it: equality, nested objects, ``$eq $ne $gt $gte
    $lt $lte``."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, dict) and all(_matches(value.get(k), v) for k, v in wanted.items())
    return bool(value == wanted)


_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b,
}


def _operator(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    if op not in _ORDER:
        raise ValueError(f"unsupported filter operator {op!r} (expected $eq, $ne, $gt, $gte, $lt, $lte)")
    try:
        return _ORDER[op](float(value), float(operand))
    except (TypeError, ValueError):
        return False
