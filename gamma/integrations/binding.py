"""One actor bound by the host to a ``gamma.Engine``: the reads and writes both agent surfaces make.

The actor, its tenant and the authority its writes claim come from the host's
configuration, checked once here against the policy's ``[writers]``: a claim
above what the policy lets that writer hold is refused, never capped silently.
Every read first folds what other writers appended to a store (``refresh``) and
answers at the binding's clock (the UTC clock unless the host gives one). Writes
are ordinary events validated by the engine like any other: an ``assert`` or a
``retract`` whose writer is the bound actor, at a scope the actor reads (one
that contains its own), whose ids are derived from the log's length and the
content (so the same log and the same calls give the same ids, and an id
commits to nothing the actor cannot see), and whose ``ts`` is the clock, or the
last event's ``ts`` when the clock is behind it.

Nothing here answers differently for a fact the actor cannot see and a fact
that does not exist: a reference to either is one message, which does not even
echo the id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import attrs

from gamma.core.incremental.engine import Decision
from gamma.core.reading.events import check_scope, normal_actor
from gamma.core.resolving.phases import scope_contains
from gamma.core.resolving.render import EXPLANATIONS
from gamma.core.resolving.resolution import Resolution
from gamma.core.terms.canonical import compact_json, format_ts, sha256_hex
from gamma.core.terms.decisions import VISIBILITY_CODES, Admitted, Excluded, Recomputed
from gamma.core.terms.errors import (
    InputError,
    TimestampOrderError,
    UnknownReferenceError,
    ValueTypeError,
)
from gamma.core.terms.model import Actor, Event, Value
from gamma.face import checked
from gamma.scoring.findings import LogFacts, Validation, check_response, parse_stated
from gamma.storage.engine import Engine
from gamma.storage.store import AppendResult

__all__ = [
    "Binding",
    "Checks",
    "Forgotten",
    "ReadOnlyError",
    "WriteScopeError",
    "Written",
    "check_write_scope",
    "content_id",
    "relied_record",
    "utc_now",
    "visible_decision",
]

#: The one answer to a reference the actor cannot follow, whether the fact is hidden from
#: it, another tenant's or absent: no id echoed, so the bytes are the same for each.
NO_SUCH_FACT = "no fact by that id that {actor!r} can see"


class Checks(Protocol):
    """What ``visible_decision`` reads: ``gamma.Engine`` and ``EngineState`` both are."""

    def check(
        self, actor: Actor | Mapping[str, object], at: datetime | str, facts: Iterable[str]
    ) -> dict[str, Decision]: ...


def visible_decision(
    view: Checks, actor: Actor, at: datetime, fact: str, *, auditor: bool = False
) -> Decision | None:
    """``fact``'s decision for ``actor`` at ``at``, or None when it is hidden from the actor
    (excluded with a code of the visibility group), another tenant's, or not asserted by
    ``at``: the one rule every surface answers by, so the three are told apart nowhere.

    ``auditor``: the caller may read what is hidden from ``actor`` (its hidden facts are
    then decisions; another tenant's and unasserted facts are still None)."""
    try:
        decision = view.check(actor, at, [fact])[fact]
    except UnknownReferenceError:
        return None
    if not auditor and isinstance(decision, Excluded) and not VISIBILITY_CODES.isdisjoint(
        decision.codes
    ):
        return None
    return decision


def content_id(prefix: str, actor: Actor, body: Mapping[str, Any], **seed: Any) -> str:
    """An id derived from the writer, its tenant and what it writes (and ``seed``), nothing
    else: it commits to nothing the writer cannot see, and the same write gives the same id
    (so a retried one is skipped as already stored)."""
    data = {**seed, "tenant": actor.tenant, "writer": actor.id, "body": dict(body)}
    return prefix + sha256_hex(compact_json(data))[:24]


def relied_record(a: Admitted) -> dict[str, Any]:
    """An admitted fact as a caller relying on it reads it (the MCP tools, the change feed):
    a recomputed one with its inputs, never its stale stated value."""
    out: dict[str, Any] = {"fact": a.fact, "key": a.key, "value": a.value, "scope": a.scope,
           "authority": a.authority, "kind": a.kind, "priority": a.priority,
           "needs_recheck": a.needs_recheck}  # fmt: skip
    if isinstance(a, Recomputed):
        out["inputs"] = {"events": list(a.inputs.events), "facts": list(a.inputs.facts)}
    return out


def check_write_scope(actor: Actor, body: Mapping[str, Any], *, field: str = "scope") -> None:
    """An assert lands only at a scope its writer reads: its own, a parent, or ``global``
    (every surface that writes as an actor: Binding's tools, ``gamma serve``'s append)."""
    scope = body.get("scope", "global")
    if body.get("type") != "assert" or not isinstance(scope, str):
        return
    if check_scope(scope) and not scope_contains(scope, actor.scope):
        raise WriteScopeError(
            f"{actor.id!r} writes only where it reads: scope {scope!r} does not contain its"
            f" scope {actor.scope!r} (write at {actor.scope!r}, a parent of it, or 'global')",
            field=field,
        )


@attrs.frozen
class Written:
    """What a write appended: the facts its events name, their event ids, the append's result.

    ``facts`` lists the ``fact`` of each event that names one, in order; an event that
    names none (a key-wide ``grant`` or ``revoke``, an ``experience``) adds nothing there,
    so ``facts`` lines up with ``events`` only when every event names a fact (as the
    single event of ``remember`` and ``forget`` does)."""

    facts: tuple[str, ...]
    events: tuple[str, ...]
    result: AppendResult


@attrs.frozen
class Forgotten:
    """What a ``forget`` did: the retract written, and whether it withdrew the fact.

    ``effective`` is False when the retract changes nothing: ``why`` is then the
    code ``ignored`` gives it (``insufficient_authority``: the fact was written
    with more authority than the actor's), or ``already_retracted``.
    """

    written: Written
    effective: bool
    why: str | None = None
    detail: str | None = None


class ReadOnlyError(InputError):
    """The binding serves a log it cannot write (a JSONL file is read once)."""


class WriteScopeError(InputError):
    """A write at a scope the bound actor does not read: it would land in another's memory."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class Binding:
    """``actor`` reading and writing through ``engine``, at the authority the host lets it claim.

    ``authority`` is the level the actor's events claim (None: unwritten, so the
    policy default, capped at what the writer holds); a level above what the
    policy's ``[writers]`` give the actor's id is a ValueTypeError (field
    ``authority``). ``clock`` returns the time reads resolve at (aware).
    """

    @checked  # a str engine or actor is a TypeError naming it, not an AttributeError
    def __init__(
        self,
        engine: Engine,
        actor: Actor | Mapping[str, Any],
        *,
        authority: str | None = None,
        clock: Callable[[], datetime] | None = None,
        writable: bool = True,
        read_only_reason: str = "this log is read-only",
    ) -> None:
        policy = engine.policy
        self.engine = engine
        self.actor = normal_actor(actor, policy)
        if authority is not None:
            if not policy.knows_authority(authority):
                raise ValueTypeError(
                    f"unknown authority level {authority!r} (the policy's ladder:"
                    f" {', '.join(policy.authority_ladder)})", field="authority",
                )
            held = policy.authority_ladder[policy.writer_rank(self.actor.id)]
            if policy.authority_rank(authority) > policy.writer_rank(self.actor.id):
                raise ValueTypeError(
                    f"writer {self.actor.id!r} holds at most {held!r} under this policy"
                    f" ([writers], authority.writer_default); it cannot claim {authority!r}",
                    field="authority",
                )
        self.authority = authority
        self._clock = clock or utc_now
        self.writable = writable
        self._read_only_reason = read_only_reason

    # -- reads -------------------------------------------------------------------------

    def now(self) -> datetime:
        at = self._clock()
        if not isinstance(at, datetime) or at.utcoffset() is None:
            raise ValueTypeError("the clock must return an aware datetime", field="clock")
        return at.astimezone(UTC)

    def resolve(self, keys: Iterable[str] | None = None) -> Resolution:
        """Γ for the bound actor now, over everything the store holds (refreshed first)."""
        self.engine.refresh()
        return self.engine.resolve(self.actor, self.now(), keys=keys)

    def validate(self, question: str, response: str, context: str | None = None) -> Validation:
        """The host's check of ``response`` against the bound actor's resolution now.

        For the host only, after inference: its findings name withheld facts, so
        no tool a model calls returns them. It compares against the actor's own
        tenant (an actor's check never holds another tenant's values); the
        auditor's check across tenants is ``gamma.validate`` on the log.
        """
        resolution = self.resolve()
        stated = parse_stated(response)
        tenant = self.actor.tenant
        own: list[Event] = [e for e in self.engine.events if e.tenant == tenant]
        found = check_response(
            resolution, LogFacts(own), question=question, stated=stated, context=context,
        )
        return Validation(found)

    # -- writes ------------------------------------------------------------------------

    def remember(
        self,
        key: str,
        value: Value,
        *,
        scope: str | None = None,
        kind: str | None = None,
        depends_on: Sequence[str] = (),
        supersedes: Sequence[str] = (),
        derivation: str | None = None,
    ) -> Written:
        """Append an ``assert`` of ``key = value``: its fact id, event id and the append's result.
        A ``derivation`` (over ``depends_on``) makes it a derived fact unless ``kind`` says
        otherwise (then the append refuses it, naming the field)."""
        body: dict[str, Any] = {"type": "assert", "key": key, "value": value}
        if scope is not None:
            body["scope"] = scope
        if kind is None and derivation is not None:
            kind = "derived"
        if kind is not None:
            body["kind"] = kind
        if derivation is not None:
            body["derivation"] = derivation
        self.engine.refresh()
        if depends_on:
            self._refer(depends_on, "depends_on")
            body["depends_on"] = list(depends_on)
        if supersedes:
            self._refer(supersedes, "supersedes")
            body["supersedes"] = list(supersedes)
        fact = "f-" + self._digest(body)
        return self._write([{**body, "fact": fact}])

    def forget(self, fact: str, reason: str | None = None) -> Forgotten:
        """Append a ``retract`` of ``fact`` (one the actor can see), and say what it did.

        Only a fact the actor can see gets here, so saying that a higher authority
        keeps it tells the actor nothing it could not read from ``gamma explain``.
        """
        self.engine.refresh()
        self._refer([fact], "fact")
        body: dict[str, Any] = {"type": "retract", "fact": fact}
        if reason is not None:
            body["reason"] = reason
        written = self._write([body])
        return self._effect(fact, written)

    def write(self, bodies: Sequence[Mapping[str, Any]]) -> Written:
        """Append events (without envelope) as the bound actor, all of them or none."""
        self.engine.refresh()
        return self._write([dict(b) for b in bodies])

    def new_fact_id(self, body: Mapping[str, Any]) -> str:
        return "f-" + self._digest(body)

    # -- helpers -----------------------------------------------------------------------

    def _refer(self, facts: Sequence[str], field: str) -> None:
        """Every fact must be of the actor's tenant and not hidden from it (a visibility code).

        One message whether the fact is another tenant's, unknown, or hidden, so a
        reference cannot probe what the actor may not see.
        """
        at = self.now()
        for index, fact in enumerate(facts):
            where = f"{field}[{index}]" if field != "fact" else field
            if visible_decision(self.engine, self.actor, at, fact) is None:
                raise UnknownReferenceError(NO_SUCH_FACT.format(actor=self.actor.id), field=where)

    def _effect(self, fact: str, written: Written) -> Forgotten:
        """Whether the retract just written withdrew ``fact``, read as Γ reads it at its ``ts``."""
        event = written.events[0]
        retract = next(e for e in reversed(self.engine.events) if e.id == event)
        decision = self.engine.check(self.actor, retract.ts, [fact])[fact]
        if isinstance(decision, Excluded):
            for reason in decision.reasons:
                if reason.code == "retracted":
                    if event in reason.events:
                        return Forgotten(written, effective=True)
                    return Forgotten(written, effective=False, why="already_retracted",
                                     detail="an earlier retract already withdrew it")
        resolution = self.engine.resolve(self.actor, retract.ts, keys=[decision.key or ""])
        for ignored in resolution.ignored:
            if ignored.event == event and ignored.fact == fact:
                # worded as gamma explain words it, naming the level the retract counted at
                policy = self.engine.policy
                level = policy.authority_ladder[policy.event_rank(self.authority, self.actor.id)]
                detail = (f"retract ignored: {ignored.code.replace('_', ' ')} ({level}):"
                          f" {EXPLANATIONS.get(ignored.code, ignored.code)}; the fact stays")
                return Forgotten(written, effective=False, why=ignored.code, detail=detail)
        return Forgotten(written, effective=True)

    def _digest(self, body: Mapping[str, Any]) -> str:
        # the log's length, not its head: the head commits to every value, other tenants'
        # and hidden ones too, and an id derived from it would let a guess be checked
        return content_id("", self.actor, body, position=len(self.engine))

    def _check_scopes(self, bodies: Sequence[Mapping[str, Any]]) -> None:
        for body in bodies:
            check_write_scope(self.actor, body)

    def _write(self, bodies: list[dict[str, Any]]) -> Written:
        if not self.writable:
            raise ReadOnlyError(self._read_only_reason)
        self._check_scopes(bodies)
        for attempt in (1, 2):
            events = []
            ts = format_ts(self._write_ts())
            for body in bodies:
                event = {**body, "tenant": self.actor.tenant, "actor": self.actor.id, "ts": ts}
                if self.authority is not None:
                    event["authority"] = self.authority
                event["id"] = "e-" + self._digest(event)
                events.append(event)
            # read before the append: nothing may fail once the write has landed
            facts = tuple(str(e["fact"]) for e in events if e.get("fact") is not None)
            ids = tuple(str(e["id"]) for e in events)
            try:
                # as JSON lines: the text path checks what a hand-built object may skip
                lines = [compact_json(event) for event in events]
                result = self.engine.append(lines, source="<binding>")
                return Written(facts=facts, events=ids, result=result)
            except TimestampOrderError:
                if attempt == 2:
                    raise
                self.engine.refresh()  # another writer appended a later ts since: once more
        raise AssertionError("unreachable")

    def _write_ts(self) -> datetime:
        now = self.now()
        if len(self.engine):
            last = self.engine.events[-1].ts
            if last > now:
                return last
        return now
