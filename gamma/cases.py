"""Conformance cases: one governed question about one event log, with its expected outcome.

A case (DESIGN §9, SPEC.md §13) is a JSON object: the events (embedded,
or a ``log`` file relative to the case file), who asks (``actor``) and when (``at``), the
question and its ``probe`` keys, what Γ must decide (``expect``) and the closed answer
``pool``; pair, factorial and trap cases carry their labels. ``load_cases`` reads one case
per ``.json`` file or one per line of a suite's ``.jsonl`` file and validates everything,
events included, so an error names the file, the 1-based physical line and the field
(``events[3].visibility.roles``) before anything runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from .canonical import format_ts, parse_ts
from .errors import (
    DuplicateIdError,
    InputError,
    JSONSyntaxError,
    MissingFieldError,
    UnknownFieldError,
    ValueTypeError,
)
from .events import (
    decode_json,
    event_from_json,
    event_to_json,
    load_events,
    parse_actor,
    validate_log,
)
from .grading import Pool
from .model import Actor, Event
from .policy import DEFAULT_POLICY, Policy, load_policy
from .resolution import REASON_CODES, Resolution
from .resolver import resolve

__all__ = [
    "APPLICABILITY",
    "AXES",
    "CELLS",
    "DECIDERS",
    "FACTORIAL_TABLE",
    "GOVERNANCE",
    "MODES",
    "SIDES",
    "SUITES",
    "VERDICTS",
    "Case",
    "Expect",
    "load_cases",
    "parse_case",
]

SUITES: tuple[str, ...] = ("counterfactual", "factorial", "trap", "adversarial", "imported")
SIDES: tuple[str, ...] = ("positive", "counterfactual")
AXES: tuple[str, ...] = (
    "access_control",
    "scope_binding",
    "actor_isolation",
    "temporal_validity",
    "supersession",
    "commitment_status",
    "dependency_validity",
)
GOVERNANCE: tuple[str, ...] = ("valid", "superseded", "outranked", "expired", "unauthorized", "draft")
APPLICABILITY: tuple[str, ...] = ("applicable", "adaptable", "unusable")
CELLS: tuple[str, ...] = tuple(f"{g}/{a}" for g in GOVERNANCE for a in APPLICABILITY)
VERDICTS: tuple[str, ...] = ("KEEP", "ADAPT", "REJECT")
MODES: tuple[str, ...] = ("status", "salience", "sequence", "compound", "anti-trap")
DECIDERS: tuple[str, ...] = ("engine", "model")

#: The governance paper's table (SPEC §7): the verdict each factorial cell expects.
FACTORIAL_TABLE: Mapping[str, str] = MappingProxyType(
    {
        f"{g}/{a}": (
            {"applicable": "KEEP", "adaptable": "ADAPT", "unusable": "REJECT"}[a]
            if g == "valid"
            else "ADAPT"
            if g in ("superseded", "outranked")
            else "REJECT"
        )
        for g in GOVERNANCE
        for a in APPLICABILITY
    }
)

_FIELDS = (
    "id",
    "suite",
    "events",
    "log",
    "actor",
    "at",
    "question",
    "probe",
    "expect",
    "pool",
    "policy",
    "pair",
    "side",
    "axis",
    "decidable_by",
    "paper_decidable_by",
    "cell",
    "mode",
    "signature",
    "domain",
    "attack",
    "note",
)
_EXPECT_FIELDS = ("admitted", "excluded", "experiences", "ignored", "exact")
_IGNORED_CODES = ("insufficient_authority",)


def _frozen_map(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(sorted(value.items())))


@attrs.frozen(kw_only=True)
class Expect:
    """What Γ must decide. Listed expectations must hold; ``exact`` pins the admitted set.

    ``excluded`` maps a fact to codes it must carry (at least those); ``experiences`` maps
    an experience to its verdict; ``ignored`` maps an event to the code it is ignored with.
    """

    admitted: tuple[str, ...] = ()
    excluded: Mapping[str, tuple[str, ...]] = attrs.field(
        factory=dict, converter=_frozen_map, hash=False
    )
    experiences: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map, hash=False)
    ignored: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_map, hash=False)
    exact: bool = False

    def mismatches(self, resolution: Resolution) -> tuple[str, ...]:
        """Every way ``resolution`` falls short of these expectations (empty: it holds)."""
        found: list[str] = []
        admitted = {a.fact for a in resolution.admitted}
        codes = {x.fact: set(x.codes) for x in resolution.excluded}
        for fact in self.admitted:
            if fact not in admitted:
                why = sorted(codes[fact]) if fact in codes else "not in the log at t"
                found.append(f"admitted: {fact} is not admitted ({why})")
        if self.exact:
            extra = sorted(admitted - set(self.admitted))
            if extra:
                found.append(f"admitted: exact, but also admitted {extra}")
        for fact, wanted in self.excluded.items():
            if fact not in codes:
                state = "admitted" if fact in admitted else "not in the log at t"
                found.append(f"excluded: {fact} is {state}, expected {list(wanted)}")
            elif not set(wanted) <= codes[fact]:
                missing = sorted(set(wanted) - codes[fact])
                found.append(f"excluded: {fact} lacks {missing} (has {sorted(codes[fact])})")
        verdicts = {v.experience: v.verdict for v in resolution.experiences}
        for experience, verdict in self.experiences.items():
            got = verdicts.get(experience)
            if got != verdict:
                found.append(f"experiences: {experience} is {got}, expected {verdict}")
        ignored: dict[str, set[str]] = {}
        for item in resolution.ignored:
            ignored.setdefault(item.event, set()).add(item.code)
        for event, code in self.ignored.items():
            if code not in ignored.get(event, set()):
                found.append(f"ignored: {event} is not ignored with {code}")
        return tuple(found)

    def to_json(self) -> dict[str, Any]:
        return {
            "admitted": list(self.admitted),
            "excluded": {f: list(c) for f, c in self.excluded.items()},
            "experiences": dict(self.experiences),
            "ignored": dict(self.ignored),
            "exact": self.exact,
        }


@attrs.frozen(kw_only=True)
class Case:
    """One conformance case, validated. ``events()`` gives its validated gamma events."""

    id: str
    suite: str
    actor: Actor
    at: datetime
    question: str = ""
    probe: tuple[str, ...] = ()
    expect: Expect = attrs.field(factory=Expect)
    pool: Pool | None = None
    policy: str | None = None
    log: str | None = attrs.field(default=None, eq=False)
    pair: str | None = None
    side: str | None = None
    axis: str | None = None
    decidable_by: str | None = None
    paper_decidable_by: str | None = None
    cell: str | None = None
    mode: str | None = None
    signature: tuple[str, ...] | None = None
    domain: str | None = None
    attack: str | None = None
    note: str | None = None
    path: Path | None = attrs.field(default=None, eq=False)
    line: int | None = attrs.field(default=None, eq=False)
    _events: tuple[Event, ...] = attrs.field(default=(), eq=False, repr=False, alias="events")
    _policy: Policy = attrs.field(
        default=DEFAULT_POLICY, eq=False, repr=False, alias="policy_object"
    )

    def events(self) -> tuple[Event, ...]:
        """The case's validated events (embedded, or read from its ``log`` file)."""
        return self._events

    def get_policy(self) -> Policy:
        """The policy the case runs under: ``policy`` resolved, else the built-in default."""
        return self._policy

    @property
    def verdict(self) -> str | None:
        """The factorial cell's expected verdict (SPEC §7), or None outside the factorial."""
        return FACTORIAL_TABLE.get(self.cell) if self.cell is not None else None

    def resolve(self) -> Resolution:
        """Γ(events, actor, at) under the case's policy: the reference resolution."""
        return resolve(self._events, self.actor, self.at, self._policy)

    def where(self) -> str:
        """``file:line`` of the case, for messages."""
        place = str(self.path) if self.path is not None else "<case>"
        return f"{place}:{self.line}" if self.line is not None else place

    def to_json(self) -> dict[str, Any]:
        """The case as a JSON object, events embedded (a ``log`` is read in).

        ``parse_case(case.to_json(), path=case.path)`` gives back an equal case.
        """
        body: dict[str, Any] = {
            "id": self.id,
            "suite": self.suite,
            "events": [event_to_json(e) for e in self._events],
            "actor": _actor_json(self.actor),
            "at": format_ts(self.at),
            "question": self.question,
            "probe": list(self.probe),
            "expect": self.expect.to_json(),
        }
        if self.pool is not None:
            body["pool"] = {
                "gold": list(self.pool.gold),
                "drift": list(self.pool.drift),
                "distractors": list(self.pool.distractors),
            }
        for name in ("policy", "pair", "side", "axis", "decidable_by", "paper_decidable_by",
                     "cell", "mode", "domain", "attack", "note"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        if self.signature is not None:
            body["signature"] = list(self.signature)
        return body

    def request(self) -> dict[str, Any]:
        """What a system under test is given: no expectations, no pool, no labels.

        ``policy`` is the normalised policy object, so the receiver needs no file.
        """
        return {
            "id": self.id,
            "events": [event_to_json(e) for e in self._events],
            "actor": _actor_json(self.actor),
            "at": format_ts(self.at),
            "question": self.question,
            "probe": list(self.probe),
            "policy": self._policy.to_json(),
        }


def _actor_json(actor: Actor) -> dict[str, Any]:
    return {
        "id": actor.id,
        "tenant": actor.tenant,
        "roles": list(actor.roles),
        "clearance": actor.clearance,
        "scope": actor.scope,
    }


# -- loading -------------------------------------------------------------------------------


def load_cases(
    paths: str | Path | Iterable[str | Path], suite: str | None = None
) -> tuple[Case, ...]:
    """Read and validate cases from files and directories, optionally of one ``suite``.

    A ``.json`` file holds one case, a ``.jsonl`` file one case per line. A directory is
    walked recursively in sorted order; there, event logs (``*.events.jsonl``) and JSON
    files whose first object has no ``suite`` field (logs, actors, import reports) are
    skipped. A file named explicitly is always read as cases. Case ids must be unique.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if suite is not None and suite not in SUITES:
        raise ValueTypeError(f"unknown suite {suite!r} (known: {', '.join(SUITES)})", field="suite")
    logs: dict[Path, tuple[Event, ...]] = {}
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for path in _case_files(paths):
        for case in _read_file(path, logs):
            if case.id in seen:
                raise DuplicateIdError(
                    f"case id {case.id!r} is already used ({seen[case.id]})",
                    source=str(path), line=case.line, field="id",
                )
            seen[case.id] = case.where()
            if suite is None or case.suite == suite:
                cases.append(case)
    return tuple(cases)


def _case_files(paths: Iterable[str | Path]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for found in sorted(p for p in path.rglob("*") if p.is_file()):
                if found.name.endswith(".events.jsonl"):
                    continue
                if found.suffix in (".json", ".jsonl") and _looks_like_case(found):
                    yield found
        elif path.is_file():
            yield path
        else:
            raise InputError("no such file or directory", source=str(path))


def _looks_like_case(path: Path) -> bool:
    """Whether a file met while walking a directory holds cases: its first object has ``suite``.

    A file that is not JSON at all is read anyway, so its error is reported, not skipped.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return True
    if path.suffix == ".jsonl":
        text = next((line for line in text.splitlines() if line.strip()), "")
        if not text:
            return False
    try:
        first = json.loads(text)
    except (ValueError, RecursionError):
        return True
    return isinstance(first, dict) and "suite" in first


def _read_file(path: Path, logs: dict[Path, tuple[Event, ...]]) -> Iterator[Case]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise JSONSyntaxError(f"not UTF-8: {exc.reason}", source=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read cases: {exc.strerror}", source=str(path)) from None
    if path.suffix == ".jsonl":
        for number, line in enumerate(text.split("\n"), start=1):
            if line.strip():
                obj = decode_json(line, source=str(path), line=number)
                yield parse_case(obj, path=path, line=number, logs=logs)
    else:
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise JSONSyntaxError(
                f"invalid JSON: {exc.msg} (column {exc.colno})", source=str(path), line=exc.lineno
            ) from None
        except RecursionError:
            raise JSONSyntaxError("JSON nested too deeply", source=str(path)) from None
        lines = _field_lines(text)
        try:
            obj = decode_json(text, source=str(path))
        except InputError as exc:
            where = lines.get((exc.field or "").split(".")[0].split("[")[0])
            raise type(exc)(exc.message, source=str(path), line=where, field=exc.field) from None
        yield parse_case(obj, path=path, line=None, logs=logs, lines=lines)


def _field_lines(text: str) -> dict[str, int]:
    """Physical lines of a pretty-printed case's top-level fields and ``events[i]`` items."""
    decoder = json.JSONDecoder()
    lines: dict[str, int] = {}

    def skip(i: int) -> int:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        return i

    def line_of(i: int) -> int:
        return text.count("\n", 0, i) + 1

    i = skip(0)
    if i >= len(text) or text[i] != "{":
        return lines
    lines["{"] = line_of(i)
    i += 1
    while True:
        i = skip(i)
        if i >= len(text) or text[i] == "}":
            return lines
        if text[i] == ",":
            i += 1
            continue
        key, i = decoder.raw_decode(text, i)
        i = skip(i) + 1  # the colon
        i = skip(i)
        lines[str(key)] = line_of(i)
        if key == "events" and text[i] == "[":
            j, index = i + 1, 0
            while True:
                j = skip(j)
                if text[j] == "]":
                    i = j + 1
                    break
                if text[j] == ",":
                    j += 1
                    continue
                lines[f"events[{index}]"] = line_of(j)
                _, j = decoder.raw_decode(text, j)
                index += 1
        else:
            _, i = decoder.raw_decode(text, i)


class _Context:
    """Where a case is, for error messages: its file and the line of each field."""

    def __init__(self, path: Path | None, line: int | None, lines: Mapping[str, int]) -> None:
        self.source = str(path) if path is not None else "<case>"
        self.line = line
        self.lines = lines

    def line_for(self, field: str) -> int | None:
        if self.line is not None:
            return self.line
        head = field.split(".")[0]
        if head in self.lines:
            return self.lines[head]
        return self.lines.get(head.split("[")[0], self.lines.get("{"))

    def fail(self, cls: type[InputError], message: str, field: str) -> InputError:
        return cls(message, source=self.source, line=self.line_for(field), field=field)


def parse_case(
    obj: Any,
    *,
    path: Path | None = None,
    line: int | None = None,
    logs: dict[Path, tuple[Event, ...]] | None = None,
    lines: Mapping[str, int] | None = None,
) -> Case:
    """Validate one decoded case object. ``path`` anchors ``log`` and ``policy`` paths."""
    ctx = _Context(path, line, lines or {})
    if not isinstance(obj, dict):
        raise JSONSyntaxError("a case must be a JSON object", source=ctx.source, line=line)
    for name in obj:
        if name not in _FIELDS:
            raise ctx.fail(UnknownFieldError, "unknown case field", name)
    for name in ("id", "suite", "actor", "at", "expect"):
        if name not in obj:
            raise ctx.fail(MissingFieldError, "missing required field", name)
    for name, value in obj.items():
        if value is None:
            raise ctx.fail(ValueTypeError, "null is not allowed; leave the field out", name)
    case_id = _text(obj, "id", ctx)
    suite = _choice(obj, "suite", SUITES, ctx)
    if suite != "imported":
        for name in ("question", "probe", "pool"):
            if name not in obj:
                raise ctx.fail(MissingFieldError, f"missing required field (suite {suite})", name)
    policy_name = _text(obj, "policy", ctx) if "policy" in obj else None
    policy = _policy(policy_name, path, ctx) if policy_name is not None else DEFAULT_POLICY
    try:
        actor = parse_actor(obj["actor"], policy=policy, source=ctx.source)
    except InputError as exc:
        field = "actor" + (f".{exc.field}" if exc.field else "")
        raise type(exc)(exc.message, source=ctx.source, line=ctx.line_for("actor"), field=field) from None
    try:
        at = parse_ts(obj["at"])
    except ValueError as exc:
        raise ctx.fail(ValueTypeError, str(exc), "at") from None
    events, log_name = _events(obj, path, policy, ctx, logs if logs is not None else {})
    probe = _texts(obj, "probe", ctx) if "probe" in obj else ()
    if suite != "imported" and not probe:
        raise ctx.fail(ValueTypeError, "name at least one probe key", "probe")
    pool = None
    if "pool" in obj:
        try:
            pool = Pool.from_json(obj["pool"])
        except (TypeError, ValueError) as exc:
            raise ctx.fail(ValueTypeError, str(exc), "pool") from None
    labels = _labels(obj, suite, ctx)
    signature = _signature(obj, ctx) if "signature" in obj else None
    return Case(
        id=case_id,
        suite=suite,
        actor=actor,
        at=at,
        question=_text(obj, "question", ctx, empty=True) if "question" in obj else "",
        probe=probe,
        expect=_expect(obj["expect"], ctx),
        pool=pool,
        policy=policy_name,
        log=log_name,
        signature=signature,
        path=path,
        line=line,
        events=events,
        policy_object=policy,
        **labels,
    )


def _text(obj: dict[str, Any], name: str, ctx: _Context, *, empty: bool = False) -> str:
    value = obj[name]
    if not isinstance(value, str) or (not empty and not value):
        raise ctx.fail(ValueTypeError, "expected a non-empty string", name)
    return value


def _texts(obj: dict[str, Any], name: str, ctx: _Context) -> tuple[str, ...]:
    value = obj[name]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ctx.fail(ValueTypeError, "expected a list of non-empty strings", name)
    if len(set(value)) != len(value):
        raise ctx.fail(ValueTypeError, "lists an item twice", name)
    return tuple(value)


def _choice(obj: dict[str, Any], name: str, allowed: tuple[str, ...], ctx: _Context) -> str:
    value = obj[name]
    if value not in allowed or not isinstance(value, str):
        raise ctx.fail(ValueTypeError, f"expected one of {', '.join(allowed)}, got {value!r}", name)
    return value


def _policy(name: str, path: Path | None, ctx: _Context) -> Policy:
    """A policy path (relative to the case file) or a bare name found in a ``policies/`` dir.

    A bare name (``strict``) is looked up as ``policies/NAME.toml`` in the case file's
    directory and each parent directory, nearest first.
    """
    base = path.parent if path is not None else Path.cwd()
    if name.endswith(".toml") or "/" in name:
        candidate = base / name
        if not candidate.is_file():
            raise ctx.fail(ValueTypeError, f"no such policy file {str(candidate)!r}", "policy")
        return load_policy(candidate)
    for folder in (base, *base.resolve().parents):
        candidate = folder / "policies" / f"{name}.toml"
        if candidate.is_file():
            return load_policy(candidate)
    raise ctx.fail(ValueTypeError, f"no policy named {name!r} in a policies/ directory", "policy")


def _events(
    obj: dict[str, Any],
    path: Path | None,
    policy: Policy,
    ctx: _Context,
    logs: dict[Path, tuple[Event, ...]],
) -> tuple[tuple[Event, ...], str | None]:
    if ("events" in obj) == ("log" in obj):
        raise ctx.fail(MissingFieldError, "give exactly one of 'events' and 'log'", "events")
    if "log" in obj:
        name = _text(obj, "log", ctx)
        target = (path.parent if path is not None else Path.cwd()) / name
        if not target.is_file():
            raise ctx.fail(InputError, f"no such log file {str(target)!r}", "log")
        key = target.resolve()
        if key not in logs:
            logs[key] = load_events(target, policy=policy)
        return logs[key], name
    raw = obj["events"]
    if not isinstance(raw, list):
        raise ctx.fail(ValueTypeError, "expected a list of events", "events")
    parsed: list[tuple[int | None, Event]] = []
    for index, item in enumerate(raw):
        where = f"events[{index}]"
        try:
            event = event_from_json(item, policy=policy)
        except InputError as exc:
            field = where + (f".{exc.field}" if exc.field else "")
            raise type(exc)(exc.message, source=ctx.source, line=ctx.line_for(where), field=field) from None
        parsed.append((index, event))
    try:
        validate_log(parsed)
    except InputError as exc:
        index = exc.line if exc.line is not None else 0
        where = f"events[{index}]"
        field = where + (f".{exc.field}" if exc.field else "")
        raise type(exc)(exc.message, source=ctx.source, line=ctx.line_for(where), field=field) from None
    return tuple(event for _, event in parsed), None


def _expect(raw: Any, ctx: _Context) -> Expect:
    if not isinstance(raw, dict):
        raise ctx.fail(ValueTypeError, "expected an object", "expect")
    for name in raw:
        if name not in _EXPECT_FIELDS:
            raise ctx.fail(UnknownFieldError, "unknown field", f"expect.{name}")

    def ids(name: str) -> tuple[str, ...]:
        value = raw.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ctx.fail(ValueTypeError, "expected a list of fact ids", f"expect.{name}")
        return tuple(value)

    def mapping(name: str, check: Any) -> dict[str, Any]:
        value = raw.get(name, {})
        if not isinstance(value, dict):
            raise ctx.fail(ValueTypeError, "expected an object", f"expect.{name}")
        for key, item in value.items():
            if not key:
                raise ctx.fail(ValueTypeError, "an id must be non-empty", f"expect.{name}")
            check(item, f"expect.{name}.{key}")
        return value

    def codes(item: Any, field: str) -> None:
        if not isinstance(item, list) or not item or not all(c in REASON_CODES for c in item):
            raise ctx.fail(
                ValueTypeError, f"expected a non-empty list of codes from {', '.join(REASON_CODES)}", field
            )

    def verdict(item: Any, field: str) -> None:
        if item not in VERDICTS or not isinstance(item, str):
            raise ctx.fail(ValueTypeError, f"expected one of {', '.join(VERDICTS)}", field)

    def ignored_code(item: Any, field: str) -> None:
        if item not in _IGNORED_CODES or not isinstance(item, str):
            raise ctx.fail(ValueTypeError, f"expected one of {', '.join(_IGNORED_CODES)}", field)

    exact = raw.get("exact", False)
    if not isinstance(exact, bool):
        raise ctx.fail(ValueTypeError, "expected true or false", "expect.exact")
    admitted = ids("admitted")
    excluded = {k: tuple(v) for k, v in mapping("excluded", codes).items()}
    both = sorted(set(admitted) & set(excluded))
    if both:
        raise ctx.fail(ValueTypeError, f"facts both admitted and excluded: {both}", "expect")
    return Expect(
        admitted=admitted,
        excluded=excluded,
        experiences=mapping("experiences", verdict),
        ignored=mapping("ignored", ignored_code),
        exact=exact,
    )


def _labels(obj: dict[str, Any], suite: str, ctx: _Context) -> dict[str, Any]:
    """The optional labels, checked for consistency with the suite."""
    labels: dict[str, Any] = {}
    for name in ("pair", "axis", "cell", "mode", "domain", "attack", "note"):
        if name in obj:
            labels[name] = _text(obj, name, ctx)
    if "side" in obj:
        labels["side"] = _choice(obj, "side", SIDES, ctx)
    for name in ("decidable_by", "paper_decidable_by"):
        if name in obj:
            labels[name] = _choice(obj, name, DECIDERS, ctx)
    if ("pair" in labels) != ("side" in labels):
        raise ctx.fail(MissingFieldError, "'pair' and 'side' go together", "side" if "pair" in labels else "pair")
    if suite == "counterfactual":
        for name in ("pair", "side", "axis", "decidable_by"):
            if name not in labels:
                raise ctx.fail(MissingFieldError, "missing required field (suite counterfactual)", name)
        if labels["axis"] not in AXES:
            raise ctx.fail(ValueTypeError, f"expected one of {', '.join(AXES)}", "axis")
    if suite == "factorial" and "cell" not in labels:
        raise ctx.fail(MissingFieldError, "missing required field (suite factorial)", "cell")
    if "cell" in labels and suite != "imported" and labels["cell"] not in CELLS:
        raise ctx.fail(ValueTypeError, "expected governance/applicability, e.g. superseded/adaptable", "cell")
    if suite == "trap":
        if "mode" not in labels:
            raise ctx.fail(MissingFieldError, "missing required field (suite trap)", "mode")
        if "signature" not in obj:
            raise ctx.fail(MissingFieldError, "missing required field (suite trap)", "signature")
    if "mode" in labels and labels["mode"] not in MODES:
        raise ctx.fail(ValueTypeError, f"expected one of {', '.join(MODES)}", "mode")
    return labels


def _signature(obj: dict[str, Any], ctx: _Context) -> tuple[str, ...]:
    from .readers import READERS

    names = _texts(obj, "signature", ctx)
    unknown = sorted(set(names) - set(READERS))
    if unknown:
        raise ctx.fail(ValueTypeError, f"unknown reader names {unknown}", "signature")
    return tuple(sorted(names))
