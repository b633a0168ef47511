"""The OpenID AuthZEN Authorization API 1.0 over Γ: may this subject rely on this fact or key now.

One action, ``rely``; two resource types, ``fact`` (a fact id) and ``key`` (true
when some fact of the key is admitted). The subject is the authenticated caller's
actor: a caller names itself; only an auditor names another actor, through the
subject's ``properties``. A denial's ``context`` carries gamma's reason codes as
the subject may see them: a fact of another tenant, one out of its scope and one
withheld from it are all answered as a fact that does not exist, byte for byte
(the rule of ``gamma.integrations.binding``), and nothing carries an event id or
the chain head. Every handler is a pure function of the view, the caller, the
time and the body, so the decision log replays it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from gamma.core.reading.events import normal_actor, parse_actor
from gamma.core.terms.canonical import parse_at
from gamma.core.terms.decisions import VISIBILITY_CODES, Admitted, Excluded
from gamma.core.terms.errors import (
    ActorError,
    InputError,
    MissingFieldError,
    ValueTypeError,
)
from gamma.core.terms.model import Actor
from gamma.core.terms.policy import DEFAULT_POLICY, Policy
from gamma.integrations.binding import NO_SUCH_FACT, visible_decision
from gamma.serve.errors import Forbidden
from gamma.serve.types import Caller, View

__all__ = [
    "ACTIONS",
    "ENDPOINTS",
    "RESOURCE_TYPES",
    "SEMANTICS",
    "context_time",
    "own_time",
    "discovery",
    "evaluation",
    "evaluations",
    "on_behalf",
    "search_action",
    "search_resource",
    "search_subject",
    "subject_actor",
]

#: The one action gamma decides: may the subject rely on the resource now.
RELY = "rely"
ACTIONS = (RELY,)
RESOURCE_TYPES = ("fact", "key")
SEMANTICS = ("execute_all", "deny_on_first_deny", "permit_on_first_permit")
#: handler name (the decision log's endpoint) -> default path (AuthZEN 1.0, Transport)
ENDPOINTS = {
    "evaluation": "/access/v1/evaluation",
    "evaluations": "/access/v1/evaluations",
    "search/subject": "/access/v1/search/subject",
    "search/resource": "/access/v1/search/resource",
    "search/action": "/access/v1/search/action",
}
_METADATA = {
    "evaluation": "access_evaluation_endpoint",
    "evaluations": "access_evaluations_endpoint",
    "search/subject": "search_subject_endpoint",
    "search/resource": "search_resource_endpoint",
    "search/action": "search_action_endpoint",
}
#: the subject properties an auditor names another actor with
ACTOR_PROPERTIES = ("tenant", "roles", "clearance", "scope")
PAGE_LIMIT = 1000
NO_SUCH_KEY = "no fact of that key that {actor!r} can see"
_NO_SECONDS = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2})([Zz]|[+-][0-9]{2}:[0-9]{2})")
_ENTITIES = ("subject", "action", "resource", "context")

Body = Mapping[str, Any]
Response = dict[str, Any]


# -- the handlers ------------------------------------------------------------------------


def evaluation(view: View, caller: Caller, at: datetime, body: Body) -> Response:
    """``POST /access/v1/evaluation``: one decision, ``{"decision": bool, "context"?: {...}}``."""
    body = _body(body)
    return _evaluate(view, caller, at, body, {name: name for name in _ENTITIES})


def evaluations(view: View, caller: Caller, at: datetime, body: Body) -> Response:
    """``POST /access/v1/evaluations``: the batch, in request order, under its semantic.

    The top-level ``subject``, ``action``, ``resource`` and ``context`` are defaults an
    item's own replace whole. Without items it is one evaluation (its response shape).
    An item that cannot be evaluated (malformed, or a subject the caller may not name)
    is a denial whose ``context.error`` says why (AuthZEN certification 3.4.1); a
    malformed payload as a whole is an InputError.
    """
    body = _body(body)
    items = body.get("evaluations")
    if items is None or (isinstance(items, list) and not items):
        return evaluation(view, caller, at, body)
    if not isinstance(items, list):
        raise ValueTypeError("evaluations must be an array of evaluation objects", field="evaluations")
    semantic = _semantic(body.get("options"))
    out: list[Response] = []
    for index, item in enumerate(items):
        where = f"evaluations[{index}]"
        try:
            if not isinstance(item, Mapping):
                raise ValueTypeError("an evaluation must be a JSON object", field=where)
            merged: dict[str, Any] = {}
            fields: dict[str, str] = {}
            for name in _ENTITIES:
                if name in item:
                    merged[name], fields[name] = item[name], f"{where}.{name}"
                elif name in body:
                    merged[name], fields[name] = body[name], name
                else:
                    fields[name] = f"{where}.{name}"
            result = _evaluate(view, caller, at, merged, fields)
        except (InputError, Forbidden) as exc:
            result = _failed(exc)
        if semantic == "deny_on_first_deny" and not result["decision"]:
            result = {**result, "context": {**result.get("context", {}), "code": "200",
                                            "reason": "deny_on_first_deny"}}
            out.append(result)
            break
        out.append(result)
        if semantic == "permit_on_first_permit" and result["decision"]:
            break
    return {"evaluations": out}


def search_subject(
    view: View, caller: Caller, at: datetime, body: Body, *, callers: Iterable[Caller]
) -> Response:
    """``POST /access/v1/search/subject`` (auditors only): which configured callers' actors
    may rely on this resource; each result names the actor in ``properties``, so it can be
    asked about again on its behalf. ``resource.properties.tenant`` keeps one tenant."""
    if not caller.auditor:
        raise Forbidden(f"caller {caller.name!r} is no auditor: only an auditor searches subjects")
    body = _body(body)
    kind = _string(_body_object(body.get("subject"), "subject"), "type", "subject")
    action = _action(body.get("action"), "action")
    resource_type, resource_id = _resource(body.get("resource"), "resource")
    tenant = _resource_tenant(body.get("resource"))
    at = _chosen(caller, body, at)
    found: dict[str, Response] = {}
    if action == RELY and resource_type in RESOURCE_TYPES:
        for other in callers:
            actor = normal_actor(other.actor, view.policy)
            if tenant is not None and actor.tenant != tenant:
                continue
            result = _subject_entity(kind, actor)
            order = json.dumps(result, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
            if order not in found and _decide(view, actor, at, resource_type, resource_id)["decision"]:
                found[order] = result
    return _page("search/subject", body, sorted(found.items()))


def search_resource(view: View, caller: Caller, at: datetime, body: Body) -> Response:
    """``POST /access/v1/search/resource``: the facts (or keys) this subject may rely on now,
    by id in code-point order, ``page.limit`` at a time (at most 1,000 are given)."""
    body = _body(body)
    actor = subject_actor(caller, body.get("subject"), "subject", policy=view.policy)
    action = _action(body.get("action"), "action")
    _, resource_type = _resource_type(body.get("resource"), "resource")
    at = _chosen(caller, body, at)
    ids: list[str] = []
    if action == RELY and resource_type in RESOURCE_TYPES:
        admitted = view.resolve(actor, at).admitted
        ids = sorted({a.fact if resource_type == "fact" else a.key for a in admitted})
    items = [(id_, {"type": resource_type, "id": id_}) for id_ in ids]
    return _page("search/resource", body, items)


def search_action(view: View, caller: Caller, at: datetime, body: Body) -> Response:
    """``POST /access/v1/search/action``: ``[{"name": "rely"}]`` when the subject may rely on
    the resource now, else no results."""
    body = _body(body)
    actor = subject_actor(caller, body.get("subject"), "subject", policy=view.policy)
    resource_type, resource_id = _resource(body.get("resource"), "resource")
    at = _chosen(caller, body, at)
    items: list[tuple[str, Response]] = []
    if resource_type in RESOURCE_TYPES and _decide(view, actor, at, resource_type, resource_id)["decision"]:
        items = [(RELY, {"name": RELY})]
    return _page("search/action", body, items)


def discovery(base_url: str) -> dict[str, Any]:
    """The PDP metadata served at ``/.well-known/authzen-configuration`` for ``base_url``
    (the server's public https origin; a trailing slash is dropped)."""
    base = base_url.rstrip("/")
    out: dict[str, Any] = {"policy_decision_point": base}
    for name, path in ENDPOINTS.items():
        out[_METADATA[name]] = base + path
    return out


# -- who and when ------------------------------------------------------------------------


def subject_actor(
    caller: Caller, subject: object, field: str, *, policy: Policy | None = None
) -> Actor:
    """The actor a request's ``subject`` (at ``field``) asks as.

    A caller that is no auditor may name only itself (its actor's id): its own actor,
    whatever ``properties`` say; another id is Forbidden. An auditor naming itself
    without actor properties asks as itself; otherwise the subject is the actor
    ``{id, tenant, roles?, clearance?, scope?}`` from ``id`` and ``properties``
    (``tenant`` required), checked against ``policy`` (the app logs it as on behalf).
    """
    obj = _body_object(subject, field)
    _string(obj, "type", field)
    subject_id = _string(obj, "id", field)
    properties = obj.get("properties")
    if properties is not None and not isinstance(properties, Mapping):
        raise ValueTypeError("properties must be a JSON object", field=f"{field}.properties")
    if not caller.auditor:
        if subject_id != caller.actor.id:
            raise Forbidden(
                f"caller {caller.name!r} asks as {caller.actor.id!r} only: naming another"
                " subject is for an auditor"
            )
        return caller.actor
    named = {k: properties[k] for k in ACTOR_PROPERTIES if properties is not None and k in properties}
    if not named and subject_id == caller.actor.id:
        return caller.actor
    if "tenant" not in named:
        raise MissingFieldError(
            "an auditor asking on behalf of another actor names its tenant (and roles,"
            " clearance, scope as it holds them)", field=f"{field}.properties.tenant",
        )
    try:
        return parse_actor({"id": subject_id, **named}, policy=policy or DEFAULT_POLICY)
    except ActorError as exc:
        where = "id" if exc.field == "id" else f"properties.{exc.field}"
        raise ActorError(exc.message, field=f"{field}.{where}") from None


def on_behalf(caller: Caller, endpoint: str, body: Body, *, policy: Policy | None = None) -> tuple[Actor, ...]:
    """The actors other than the caller's own that a well-formed request asks as, in order of
    first mention (for the decision log); a subject that does not parse is left to the handler."""
    if not isinstance(body, Mapping) or endpoint == "search/subject":
        return ()
    subjects: list[tuple[object, str]] = [(body.get("subject"), "subject")]
    items = body.get("evaluations") if endpoint == "evaluations" else None
    for index, item in enumerate(items if isinstance(items, list) else ()):
        if isinstance(item, Mapping) and "subject" in item:
            subjects.append((item["subject"], f"evaluations[{index}].subject"))
    out: list[Actor] = []
    for subject, field in subjects:
        try:
            actor = subject_actor(caller, subject, field, policy=policy)
        except (InputError, Forbidden):
            continue
        if actor != caller.actor and actor not in out:
            out.append(actor)
    return tuple(out)


def context_time(body: Body) -> datetime | None:
    """A request's ``context.time``, or None: RFC 3339 with an offset, seconds optional as in
    the AuthZEN examples (``2025-06-27T18:03-07:00``). The app decides at it (else at its
    clock); an item of a batch with a ``context`` of its own decides at that one's."""
    return _time(body.get("context") if isinstance(body, Mapping) else None, "context")


def _chosen(caller: Caller, body: Body, at: datetime) -> datetime:
    """The request's ``context.time`` when its caller may choose one, else ``at``."""
    when = context_time(body)
    if when is None:
        return at
    own_time(caller, "context.time")
    return when


def own_time(caller: Caller, field: str) -> None:
    """Only an auditor chooses the time a request is decided at (403 for anyone else): a
    time before a revoke would grant what was revoked, whatever token the request holds."""
    if not caller.auditor:
        raise Forbidden(f"caller {caller.name!r} is not an auditor: only an auditor chooses the"
                        f" time ({field}); others are decided at the server's clock")


def _time(context: object, field: str) -> datetime | None:
    if context is None:
        return None
    if not isinstance(context, Mapping):
        raise ValueTypeError("context must be a JSON object", field=field)
    value = context.get("time")
    if value is None:
        return None
    text = value
    if isinstance(value, str) and (short := _NO_SECONDS.fullmatch(value)) is not None:
        text = f"{short.group(1)}:00{short.group(2)}"
    try:
        return parse_at(text)
    except InputError as exc:
        raise ValueTypeError(exc.message, field=f"{field}.time") from None


# -- deciding ----------------------------------------------------------------------------


def _evaluate(view: View, caller: Caller, at: datetime, body: Body, fields: Mapping[str, str]) -> Response:
    """One evaluation of ``body``'s entities; ``fields`` says where each came from."""
    for name in ("subject", "action", "resource"):
        if name not in body:
            raise MissingFieldError(f"an evaluation names a {name}", field=fields[name])
    actor = subject_actor(caller, body["subject"], fields["subject"], policy=view.policy)
    action = _action(body["action"], fields["action"])
    if action != RELY:
        raise ValueTypeError(
            f"gamma decides one action, {RELY!r}: may the subject rely on the resource now",
            field=f"{fields['action']}.name",
        )
    resource_type, resource_id = _resource(body["resource"], fields["resource"])
    if resource_type not in RESOURCE_TYPES:
        raise ValueTypeError(
            "a resource is {\"type\": \"fact\" | \"key\", \"id\": ...}", field=f"{fields['resource']}.type"
        )
    when = _time(body.get("context"), fields["context"])
    if when is not None:
        own_time(caller, f"{fields['context']}.time")
    return _decide(view, actor, when or at, resource_type, resource_id)


def _decide(view: View, actor: Actor, at: datetime, resource_type: str, resource_id: str) -> Response:
    """The decision for a well-formed request: a function of what ``actor`` may see only."""
    if resource_type == "fact":
        decision = visible_decision(view, actor, at, resource_id)
        if decision is None:
            return _unknown("unknown_fact", NO_SUCH_FACT.format(actor=actor.id))
        if isinstance(decision, Admitted):
            return {"decision": True, "context": {"needs_recheck": True}} if decision.needs_recheck \
                else {"decision": True}
        return {"decision": False, "context": {"reasons": sorted(set(decision.codes))}}
    resolution = view.resolve(actor, at, keys=[resource_id])
    admitted = sorted(a.fact for a in resolution.admitted if a.key == resource_id)
    if admitted:
        return {"decision": True, "context": {"facts": admitted}}
    codes = sorted({
        code for x in resolution.excluded if x.key == resource_id and _seen(x) for code in x.codes
    })
    if codes:
        return {"decision": False, "context": {"reasons": codes}}
    if resource_id in resolution.known_unknowns:  # by the operator's disclosure.restricted_keys
        return {"decision": False, "context": {"reasons": ["restricted"]}}
    return _unknown("unknown_key", NO_SUCH_KEY.format(actor=actor.id))


def _seen(excluded: Excluded) -> bool:
    return not any(code in VISIBILITY_CODES for code in excluded.codes)


def _unknown(code: str, message: str) -> Response:
    return {"decision": False, "context": {"reasons": [code], "message": message}}


def _failed(exc: InputError | Forbidden) -> Response:
    """An item of a batch that could not be evaluated: denied, saying why (AuthZEN 1.0, Errors)."""
    if isinstance(exc, InputError):
        error: dict[str, Any] = {"status": 400, "message": exc.message}
        if exc.field is not None:
            error["field"] = exc.field
    else:
        error = {"status": exc.status, "message": str(exc)}
    return {"decision": False, "context": {"error": error}}


# -- reading requests --------------------------------------------------------------------


def _body(body: object) -> Body:
    if not isinstance(body, Mapping):
        raise ValueTypeError("the request body must be a JSON object")
    return body


def _body_object(value: object, field: str) -> Mapping[str, Any]:
    if value is None:
        raise MissingFieldError(f"{field} is required", field=field)
    if not isinstance(value, Mapping):
        raise ValueTypeError(f"{field} must be a JSON object", field=field)
    return value


def _string(obj: Mapping[str, Any], name: str, field: str) -> str:
    where = f"{field}.{name}"
    if name not in obj:
        raise MissingFieldError(f"{where} is required", field=where)
    value = obj[name]
    if not isinstance(value, str) or not value:
        raise ValueTypeError(f"{where} must be a non-empty string", field=where)
    return value


def _action(value: object, field: str) -> str:
    obj = _body_object(value, field)
    properties = obj.get("properties")
    if properties is not None and not isinstance(properties, Mapping):
        raise ValueTypeError("properties must be a JSON object", field=f"{field}.properties")
    return _string(obj, "name", field)


def _resource_type(value: object, field: str) -> tuple[Mapping[str, Any], str]:
    obj = _body_object(value, field)
    properties = obj.get("properties")
    if properties is not None and not isinstance(properties, Mapping):
        raise ValueTypeError("properties must be a JSON object", field=f"{field}.properties")
    return obj, _string(obj, "type", field)


def _resource(value: object, field: str) -> tuple[str, str]:
    obj, kind = _resource_type(value, field)
    return kind, _string(obj, "id", field)


def _resource_tenant(resource: object) -> str | None:
    properties = resource.get("properties") if isinstance(resource, Mapping) else None
    tenant = properties.get("tenant") if isinstance(properties, Mapping) else None
    if tenant is not None and (not isinstance(tenant, str) or not tenant):
        raise ValueTypeError("a tenant is a non-empty string", field="resource.properties.tenant")
    return tenant


def _semantic(options: object) -> str:
    if options is None:
        return SEMANTICS[0]
    if not isinstance(options, Mapping):
        raise ValueTypeError("options must be a JSON object", field="options")
    semantic = options.get("evaluations_semantic", SEMANTICS[0])
    if semantic not in SEMANTICS:
        raise ValueTypeError(
            f"evaluations_semantic is one of {', '.join(SEMANTICS)}", field="options.evaluations_semantic"
        )
    return str(semantic)


def _subject_entity(kind: str, actor: Actor) -> Response:
    return {"type": kind, "id": actor.id, "properties": {
        "tenant": actor.tenant, "roles": list(actor.roles), "clearance": actor.clearance,
        "scope": actor.scope}}


# -- pages -------------------------------------------------------------------------------


def _page(endpoint: str, body: Body, items: Sequence[tuple[str, Response]]) -> Response:
    """``items`` (sorted by their first element) from after ``page.token``, ``page.limit`` of
    them, with the spec's ``page`` (``next_token`` empty on the last page).

    The token names the last item given (so results appended meanwhile are not repeated)
    and a digest of the request without the token: a changed request is refused.
    """
    page = body.get("page")
    if page is not None and not isinstance(page, Mapping):
        raise ValueTypeError("page must be a JSON object", field="page")
    page = page or {}
    limit = page.get("limit", PAGE_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueTypeError("page.limit is a non-negative integer", field="page.limit")
    limit = min(limit, PAGE_LIMIT)  # a larger page is given in pages of PAGE_LIMIT
    digest = _digest(endpoint, body)
    start = 0
    after: str | None = None
    if page.get("token") is not None:
        after = _after(page["token"], digest)
        start = _bisect(items, after)
    shown = items[start:start + limit]
    more = start + limit < len(items)
    last = shown[-1][0] if shown else after
    next_token = _token(last, digest) if more else ""
    return {"page": {"next_token": next_token, "count": len(shown), "total": len(items)},
            "results": [item for _, item in shown]}


def _bisect(items: Sequence[tuple[str, Response]], after: str | None) -> int:
    lo, hi = 0, len(items)
    while lo < hi and after is not None:
        mid = (lo + hi) // 2
        if items[mid][0] <= after:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _digest(endpoint: str, body: Body) -> str:
    page = body.get("page")
    rest = {**body, "page": {k: v for k, v in page.items() if k != "token"}} \
        if isinstance(page, Mapping) else dict(body)
    text = json.dumps([endpoint, rest], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _token(after: str | None, digest: str) -> str:
    text = json.dumps({"after": after, "request": digest}, sort_keys=True, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii").rstrip("=")


def _after(token: object, digest: str) -> str | None:
    """Where a page token resumes; InputError (``page.token``) when it is not one of ours or
    was given for another request."""
    refused = ValueTypeError("not a page token of this server", field="page.token")
    if not isinstance(token, str) or not token:
        raise refused
    try:
        obj = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("utf-8", "surrogatepass"))
    except (ValueError, binascii.Error):
        raise refused from None
    if not isinstance(obj, dict) or set(obj) != {"after", "request"} or not (
        obj["after"] is None or isinstance(obj["after"], str)
    ):
        raise refused
    if obj["request"] != digest:
        raise ValueTypeError(
            "the request changed since this page token: all but page.token must stay the same",
            field="page.token",
        )
    after: str | None = obj["after"]
    return after
