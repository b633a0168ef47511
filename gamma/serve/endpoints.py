"""gamma's own API over HTTP, and the registry of every decision endpoint by name.

A decision endpoint is a ``Handler``: a pure function of a view of the log at one
position, the authenticated caller, the time and the request body, so the
decision log can replay it over exactly the events it saw (``HANDLERS``). The
actor is the caller's; only an auditor may name another (``"subject"``, an actor
object), and the decision log records it as on behalf of that subject.

Nothing here answers differently for a fact of another tenant and a fact that
does not exist: both are ``gamma.integrations.binding``'s one message, which does
not echo the id. Writes (``append``) are held to ``Binding``'s rules, the ones the
MCP and LangGraph surfaces write under: the authority claimed within what the policy's
``[writers]`` give the caller, an assert only at a scope the caller reads, ids the
server's (derived as ``Binding`` derives them), references only to facts the caller sees.
Only an auditor chooses the time a request is decided at.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from gamma.audit.explain import explain as explain_fact
from gamma.core.reading.convert import converter
from gamma.core.reading.events import canonical_event, normal_actor
from gamma.core.terms.canonical import compact_json, parse_at
from gamma.core.terms.errors import (
    DuplicateIdError,
    InputError,
    UnknownReferenceError,
    ValueTypeError,
)
from gamma.core.terms.model import Actor, Event
from gamma.integrations.binding import (
    NO_SUCH_FACT,
    Binding,
    check_write_scope,
    content_id,
    visible_decision,
)
from gamma.scoring.findings import LogFacts, Validation, check_response, parse_stated
from gamma.serve import authzen
from gamma.serve.errors import Forbidden
from gamma.serve.types import Caller, Handler, View
from gamma.storage.engine import Engine

__all__ = [
    "HANDLERS",
    "AUTHZEN",
    "EventsView",
    "acting_actor",
    "append",
    "check",
    "explain_request",
    "handlers",
    "recorded_on_behalf",
    "outcome",
    "provable",
    "reasons",
    "request_time",
    "resolve_request",
]

#: The renderings ``/v1/resolve`` adds beside the record (``"json"``: the record alone).
VIEWS = ("context", "text", "json")


class EventsView(View, Protocol):
    """A view whose events can be read (``gamma.Engine`` and ``EngineState`` both are)."""

    @property
    def events(self) -> Sequence[Event]: ...


# -- what every own-API request shares ---------------------------------------------------


def _field(body: Mapping[str, Any], name: str, kind: type, *, required: bool = False) -> Any:
    value = body.get(name)
    if value is None:
        if required:
            raise InputError("missing", field=name)
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ValueTypeError(f"must be a {kind.__name__}", field=name)
    return value


def acting_actor(view: View, caller: Caller, body: Mapping[str, Any]) -> Actor:
    """The caller's actor, or for an auditor the ``subject`` it asks on behalf of.

    A non-auditor naming any subject but itself is refused (403): the actor is who
    authenticated, never a field a caller fills in.
    """
    subject = body.get("subject")
    if subject is None:
        return caller.actor
    if not isinstance(subject, Mapping):
        raise ValueTypeError("must be an actor object", field="subject")
    actor = normal_actor(subject, view.policy)
    if actor != caller.actor and not caller.auditor:
        raise Forbidden(f"caller {caller.name!r} is not an auditor: it may ask only as itself")
    return actor


def recorded_on_behalf(view: View, caller: Caller, endpoint: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The actors other than its own a caller asked as, as the decision log records them.

    None for the caller itself; one actor's object; ``{"actors": [...]}`` for a batch
    that named several. A subject that does not parse is left to the handler.
    """
    if endpoint in AUTHZEN_NAMES:
        actors = list(authzen.on_behalf(caller, endpoint, body, policy=view.policy))
    else:
        try:
            actors = [acting_actor(view, caller, body)]
        except (InputError, Forbidden):
            actors = []
        actors = [a for a in actors if a != caller.actor]
    if not actors:
        return None
    objects = [converter.unstructure(a) for a in actors]
    return objects[0] if len(objects) == 1 else {"actors": objects}


def request_time(endpoint: str, caller: Caller, body: Mapping[str, Any], now: datetime) -> datetime:
    """The time a request is decided at: AuthZEN's ``context.time``, own API's ``at``, else now.

    Only an auditor chooses it: another caller naming one is refused (403), since a time
    before a revoke would be granted what was revoked (the server decides at its clock)."""
    if endpoint in AUTHZEN_NAMES:
        chosen = authzen.context_time(body)
        field = "context.time"
    else:
        text = body.get("at")
        if text is not None and not isinstance(text, str):
            raise ValueTypeError("must be an RFC 3339 time", field="at")
        chosen = None if text is None else parse_at(text)
        field = "at"
    if chosen is None:
        return now
    authzen.own_time(caller, field)
    return chosen


def _own(view: EventsView, tenant: str) -> list[Event]:
    return [event for event in view.events if event.tenant == tenant]


# -- the decision endpoints (Handlers) ---------------------------------------------------


def resolve_request(view: View, caller: Caller, at: datetime, body: Mapping[str, Any]) -> dict[str, Any]:
    """The caller's resolution as ``gamma resolve --format json`` gives it, with its rendering.

    ``keys`` limits the context block to those keys' facts (as ``gamma resolve --key``);
    ``view`` picks what is rendered beside the record: ``context`` (default), ``text``
    or ``json`` (the record alone).
    """
    actor = acting_actor(view, caller, body)
    keys = _field(body, "keys", list)
    if keys is not None and not all(isinstance(k, str) for k in keys):
        raise ValueTypeError("must be a list of key names", field="keys")
    rendering = _field(body, "view", str) or "context"
    if rendering not in VIEWS:
        raise ValueTypeError(f"must be one of {', '.join(VIEWS)}", field="view")
    if keys is not None and rendering != "context":
        raise InputError("keys apply to the context view only", field="keys")
    resolution = view.resolve(actor, at)
    out: dict[str, Any] = {"resolution": resolution.to_dict()}
    if rendering != "json":
        out[rendering] = resolution.render(rendering, keys=keys or None)
    return out


def check(view: View, caller: Caller, at: datetime, body: Mapping[str, Any]) -> dict[str, Any]:
    """The host's check of a model's response (``gamma validate``'s JSON), for the host only.

    Its findings name withheld facts and would confirm a guess of a withheld value, so
    only an auditor caller (the host, after inference) may ask, never an agent a model
    drives (403); the subject is the actor whose response it checks. As
    ``Binding.validate``, it compares against that actor's own tenant only.
    """
    if not caller.auditor:
        raise Forbidden(f"caller {caller.name!r} is not an auditor: a response check names"
                        " withheld facts, so it is the host's, never an agent's")
    actor = acting_actor(view, caller, body)
    question = _field(body, "question", str, required=True)
    response = _field(body, "response", str, required=True)
    context = _field(body, "context", str)
    resolution = view.resolve(actor, at)
    found = check_response(
        resolution, LogFacts(_own(_events(view), actor.tenant)), question=question,
        stated=parse_stated(response), context=context,
    )
    return Validation(found).to_dict()


def explain_request(view: View, caller: Caller, at: datetime, body: Mapping[str, Any]) -> dict[str, Any]:
    """Why ``fact`` is admitted or excluded for the actor (``gamma explain --format json``).

    Only a fact the actor may see is explained (an auditor's view shows hidden ones,
    with their values), over its own tenant's events only.
    """
    actor = acting_actor(view, caller, body)
    fact = _field(body, "fact", str, required=True)
    if visible_decision(view, actor, at, fact, auditor=caller.auditor) is None:
        raise UnknownReferenceError(NO_SUCH_FACT.format(actor=actor.id), field="fact")
    events = _own(_events(view), actor.tenant)
    return explain_fact(events, fact, actor, at, policy=view.policy, auditor=caller.auditor).to_dict()


def _events(view: View) -> EventsView:
    if not hasattr(view, "events"):
        raise TypeError("this view keeps no events")
    return view  # type: ignore[return-value]


# -- writes and proofs (not Handlers: they change or read the store itself) --------------


#: The id an event type's body names for what it introduces, which the server assigns.
OWN_IDS = {"assert": "fact", "experience": "experience"}
#: The prefix of each id the server assigns, by field (``e-``: an event's ``id``).
PREFIXES = {"id": "e-", "fact": "f-", "experience": "x-"}
#: The fields of an event that refer to stored facts (each checked as the caller sees them).
REFERENCES = ("supersedes", "depends_on", "uses")


def append(engine: Engine, caller: Caller, body: Mapping[str, Any], *, at: datetime) -> dict[str, Any]:
    """Append ``events`` as the caller, all or none, as ``gamma append`` stores them.

    The server assigns every id (``id``; an assert's ``fact``, an experience's
    ``experience``): a caller that names one is refused (400), since an id it chose could
    collide with another tenant's or a hidden one and the refusal would tell them apart.
    The ids are derived from the caller's tenant, actor and the event as sent
    (``binding.content_id``), so a retried identical request stores nothing twice, and are
    returned as ``assigned``. Each event's ``tenant`` and ``actor`` are the caller's (filled
    in; another is 403); its ``authority`` may not exceed what the policy's ``[writers]`` give
    the caller (``Binding``'s check); an ``assert`` lands only at a scope the caller reads; a
    key-wide ``grant`` or ``revoke`` is an auditor's (403: it reaches hidden facts); a
    fact it refers to (``fact``, ``supersedes``, ``depends_on``, ``uses``) must be one the
    caller sees at ``at`` (``visible_decision``), else the one ``NO_SUCH_FACT`` refusal.
    """
    events = _field(body, "events", list, required=True)
    if not events:
        raise InputError("no events to append", field="events")
    lines: list[str] = []
    assigned: list[dict[str, str]] = []
    for index, event in enumerate(events):
        where = f"events[{index}]"
        if not isinstance(event, Mapping):
            raise ValueTypeError("must be an event object", field=where)
        own_id = OWN_IDS.get(event.get("type"))  # type: ignore[arg-type]
        for name in ("id", own_id):
            if name is not None and name in event:
                raise InputError(f"the server assigns {name!r}: leave it out (the answer's"
                                 " 'assigned' names it)", field=f"{where}.{name}")
        for name, own in (("tenant", caller.actor.tenant), ("actor", caller.actor.id)):
            if event.get(name, own) != own:
                raise Forbidden(f"{where}.{name}: caller {caller.name!r} writes only as {own!r}")
        authority = event.get("authority")
        if authority is not None and not isinstance(authority, str):
            raise ValueTypeError("must be a level name", field=f"{where}.authority")
        try:
            Binding(engine, caller.actor, authority=authority)  # the [writers] check
        except InputError as exc:
            raise ValueTypeError(exc.message, field=f"{where}.authority") from None
        check_write_scope(caller.actor, event, field=f"{where}.scope")
        if event.get("type") in ("grant", "revoke") and "key" in event and not caller.auditor:
            raise Forbidden(f"{where}.key: caller {caller.name!r} is not an auditor: a key-wide"
                            f" {event['type']} reaches facts it may not see")
        _check_references(engine, caller, at, event, where)
        full = {**event, "tenant": caller.actor.tenant, "actor": caller.actor.id}
        ids: dict[str, str] = {}
        if own_id is not None:
            ids[own_id] = content_id(PREFIXES[own_id], caller.actor, full)
        ids["id"] = content_id(PREFIXES["id"], caller.actor, {**full, **ids})
        assigned.append(ids)
        lines.append(compact_json({**full, **ids}))
    try:
        result = engine.append(lines, source="<request>")
    except UnknownReferenceError as exc:  # its message may name another tenant's fact
        raise UnknownReferenceError(NO_SUCH_FACT.format(actor=caller.actor.id),
                                    field=_request_field(exc)) from None
    except DuplicateIdError as exc:  # its message names the id: the caller's own, but say less
        raise DuplicateIdError("the id derived from this event is taken: the batch repeats an"
                               " event, or one like it is stored with another 'ts'",
                               field=_request_field(exc)) from None
    return {**result.to_dict(), "assigned": assigned, "position": len(engine)}


def _request_field(exc: InputError) -> str | None:
    """The field of a store refusal as the request names it (``events[i].field``)."""
    if exc.line is None or exc.field is None:
        return exc.field
    return f"events[{exc.line - 1}].{exc.field}"


def _check_references(
    view: View, caller: Caller, at: datetime, event: Mapping[str, Any], where: str
) -> None:
    """Every fact ``event`` refers to is one the caller sees at ``at`` (an auditor: any of its
    tenant), else ``NO_SUCH_FACT``: hidden, another tenant's and absent are one answer."""
    named: list[tuple[str, object]] = []
    if event.get("type") not in OWN_IDS and "fact" in event:
        named.append((f"{where}.fact", event["fact"]))
    for name in REFERENCES:
        listed = event.get(name)
        if isinstance(listed, list):
            named.extend((f"{where}.{name}[{i}]", fact) for i, fact in enumerate(listed))
    for field, fact in named:
        if not isinstance(fact, str):
            continue  # the store refuses its type, naming the field
        if visible_decision(view, caller.actor, at, fact, auditor=caller.auditor) is None:
            raise UnknownReferenceError(NO_SUCH_FACT.format(actor=caller.actor.id), field=field)


def provable(event: Event | None, caller: Caller) -> str:
    """The canonical line of an event the caller may have proved: an auditor's, any (only an
    auditor gets here: ``Service._prove``); another caller's, one of its tenant's, another
    tenant's reported exactly as one that does not exist."""
    if event is None or not (caller.auditor or event.tenant == caller.actor.tenant):
        raise UnknownReferenceError(f"no event by that id that {caller.actor.id!r} can see",
                                    field="event")
    return canonical_event(event)


# -- the registry ----------------------------------------------------------------------

#: The AuthZEN endpoints (helper module ``authzen``), by the name the decision log uses.
AUTHZEN: dict[str, Handler] = {
    "evaluation": authzen.evaluation,
    "evaluations": authzen.evaluations,
    "search/resource": authzen.search_resource,
    "search/action": authzen.search_action,
}
AUTHZEN_NAMES = (*AUTHZEN, "search/subject")

OWN: dict[str, Handler] = {"resolve": resolve_request, "check": check, "explain": explain_request}


def handlers(callers: Iterable[Caller]) -> dict[str, Handler]:
    """Every decision endpoint by name, subject search bound to the server's callers."""
    bound: Handler = functools.partial(authzen.search_subject, callers=tuple(callers))
    return {**AUTHZEN, "search/subject": bound, **OWN}


#: The registry without callers (subject search then knows of none): replay binds its own.
HANDLERS: dict[str, Handler] = handlers(())


def reasons(response: Mapping[str, Any]) -> list[str]:
    """The reason codes a decision names (sorted, unique), for the decision log's ``reasons``:
    AuthZEN's ``context.reasons``, a resolution's or explanation's ``code``/``codes``, a
    validation's violation codes."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for name, value in node.items():
                if name == "code" and isinstance(value, str):
                    found.add(value)
                elif name in ("codes", "reasons") and isinstance(value, list):
                    found.update(v for v in value if isinstance(v, str))
                    walk(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(response)
    return sorted(found)


def outcome(status: int, response: Mapping[str, Any]) -> str:
    """The metrics' outcome of one decision: permit or deny (AuthZEN), ok, or refused."""
    if status != 200:
        return "refused"
    decision = response.get("decision")
    if isinstance(decision, bool):
        return "permit" if decision else "deny"
    return "ok"

