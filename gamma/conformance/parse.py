"""Strict parsing of one case object: every field checked, every error naming its line and field.

:func:`parse_case` turns a decoded JSON object into a :class:`~gamma.conformance.model.Case`,
validating its events (embedded, or a ``log`` file relative to the case file), its
actor and policy, its expectations and its labels against the suite. It is kept
apart from :mod:`gamma.conformance.cases`, which finds and reads case files, because this is
where the rules live; :mod:`gamma.conformance.cases` re-exports :func:`parse_case`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gamma.conformance.model import (
    AXES,
    CELLS,
    DECIDERS,
    MODES,
    READER_NAMES,
    SIDES,
    SUITES,
    VERDICTS,
    Case,
    Expect,
)
from gamma.core.reading.events import parse_actor
from gamma.core.reading.reader import read, read_objects_log
from gamma.core.terms.canonical import parse_ts
from gamma.core.terms.decisions import REASON_CODES
from gamma.core.terms.errors import (
    InputError,
    JSONSyntaxError,
    MissingFieldError,
    UnknownFieldError,
    ValueTypeError,
)
from gamma.core.terms.model import Event
from gamma.core.terms.policy import DEFAULT_POLICY, Policy, load_policy
from gamma.data import POLICY_NAMES, policy_by_name
from gamma.scoring.grading import Pool

__all__ = ["parse_case"]

_CASE_FIELDS = (
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
        if name not in _CASE_FIELDS:
            raise ctx.fail(UnknownFieldError, "unknown case field", name)
    for name in ("id", "suite", "actor", "at", "expect"):
        if name not in obj:
            raise ctx.fail(MissingFieldError, "missing required field", name)
    for name, value in obj.items():
        if value is None:
            raise ctx.fail(ValueTypeError, "null is not allowed; leave the field out", name)
    case_id = _string_field(obj, "id", ctx)
    suite = _choice(obj, "suite", SUITES, ctx)
    if suite != "imported":
        for name in ("question", "probe", "pool"):
            if name not in obj:
                raise ctx.fail(MissingFieldError, f"missing required field (suite {suite})", name)
    policy_name = _string_field(obj, "policy", ctx) if "policy" in obj else None
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
    events, log_name = _case_events(obj, path, policy, ctx, logs if logs is not None else {})
    probe = _string_list(obj, "probe", ctx) if "probe" in obj else ()
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
        question=_string_field(obj, "question", ctx, empty=True) if "question" in obj else "",
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


def _string_field(obj: dict[str, Any], name: str, ctx: _Context, *, empty: bool = False) -> str:
    value = obj[name]
    if not isinstance(value, str) or (not empty and not value):
        raise ctx.fail(ValueTypeError, "expected a non-empty string", name)
    return value


def _string_list(obj: dict[str, Any], name: str, ctx: _Context) -> tuple[str, ...]:
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
    directory and each parent directory, nearest first, then among the named policies
    that ship with gamma.
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
    if name in POLICY_NAMES:  # the named policies that ship with gamma
        return policy_by_name(name)
    raise ctx.fail(
        ValueTypeError,
        f"no policy named {name!r} in a policies/ directory, nor among {', '.join(POLICY_NAMES)}",
        "policy",
    )


def _case_events(
    obj: dict[str, Any],
    path: Path | None,
    policy: Policy,
    ctx: _Context,
    logs: dict[Path, tuple[Event, ...]],
) -> tuple[tuple[Event, ...], str | None]:
    if ("events" in obj) == ("log" in obj):
        raise ctx.fail(MissingFieldError, "give exactly one of 'events' and 'log'", "events")
    if "log" in obj:
        name = _string_field(obj, "log", ctx)
        target = (path.parent if path is not None else Path.cwd()) / name
        if not target.is_file():
            raise ctx.fail(InputError, f"no such log file {str(target)!r}", "log")
        key = target.resolve()
        if key not in logs:
            logs[key] = read(target, policy=policy)
        return logs[key], name
    raw = obj["events"]
    if not isinstance(raw, list):
        raise ctx.fail(ValueTypeError, "expected a list of events", "events")
    try:  # each event's errors, then the log's rules: the line of either is the event's index
        return read_objects_log(raw, policy=policy, first=0), None
    except InputError as exc:
        index = exc.line if exc.line is not None else 0
        where = f"events[{index}]"
        field = where + (f".{exc.field}" if exc.field else "")
        raise type(exc)(exc.message, source=ctx.source, line=ctx.line_for(where), field=field) from None


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
            labels[name] = _string_field(obj, name, ctx)
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
    names = _string_list(obj, "signature", ctx)
    unknown = sorted(set(names) - set(READER_NAMES))
    if unknown:
        raise ctx.fail(ValueTypeError, f"unknown reader names {unknown}", "signature")
    return tuple(sorted(names))
