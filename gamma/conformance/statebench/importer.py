"""Import StateBench timelines as gamma conformance cases.

StateBench (the ``statebench`` package, MIT) publishes timelines as JSON
Lines: an initial state (persistent facts, working set, environment with
``now``), then events (``conversation_turn``, ``state_write``,
``supersession``, ``query`` with ``ground_truth``).  This module turns each
query of a timeline into one gamma case (DESIGN section 9), asked at the
query's time over the events before it, plus a record of what only prose
carried, so nothing is silently dropped.

The conversion is pure: :func:`convert_timeline` takes the parsed JSON object
and returns ``(case, unmapped)``.  The only I/O is :func:`import_file` at the
bottom.  SPEC.md §15 states the mapping in prose; the rules in
short:

* every structured fact (initial persistent facts, initial environment
  entries, ``[SCOPE: label] key: value`` working-set items, and every write of
  a ``state_write`` / ``supersession`` before the case's query) becomes one
  ``assert``;
* ``supersedes`` / ``depends_on`` name a fact id or a key and become
  references to the latest earlier fact with that id (else that key);
* scope ``draft`` / ``hypothetical`` become ``status``; other non-global
  scopes and ``[SCOPE: ...]`` labels become gamma scopes (the actor stays at
  ``global``);
* ``[RESTRICTED: label]`` becomes ``visibility.clearance`` above the actor's
  (``[RESTRICTED: tenant_x]`` puts the fact in tenant ``tenant_x``);
  ``(valid through YYYY-MM-DD)`` becomes ``valid_until``;
* ``expect`` is derived from the ground truth only where the structure makes
  the outcome certain under the default policy; everything else is listed in
  the unmapped record.

The work is split along its seams, in the importer's own modules: strict field readers
and :class:`StatebenchError` (:mod:`gamma.conformance.statebench.fields`), reading the
timeline into events (:mod:`gamma.conformance.statebench.read`) and deriving the
expectations only where sure (:mod:`gamma.conformance.statebench.expect`).  This module
keeps the public surface.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from gamma.conformance.statebench.expect import (
    APPLICABILITY_FOR_VERDICT,
    add_experience,
    answer_pool,
    derive_outcome,
    fill_expectations,
)
from gamma.conformance.statebench.fields import (
    StatebenchError,
    field_error,
    field_list,
    field_object,
    field_text,
    field_time,
    format_time,
    join_path,
    optional_object,
    optional_text,
    required_field,
)
from gamma.conformance.statebench.read import (
    AUTHORITY_LADDER,
    RESTRICTED_CLEARANCE,
    TimelineBuild,
    duplicated_ids,
    emit_events,
    emit_initial_state,
)
from gamma.core.reading.convert import json_type
from gamma.core.reading.reader import read_bounded
from gamma.core.terms.canonical import compact_json
from gamma.core.terms.errors import InputError

__all__ = [
    "StatebenchError",
    "ImportReport",
    "convert_timeline",
    "convert_timeline_cases",
    "parse_timelines",
    "import_file",
    "AUTHORITY_LADDER",
    "RESTRICTED_CLEARANCE",
    "CF_AXES",
]

# StateBench v2's counterfactual axes and who can decide them (its
# generator.counterfactual.AXES table).
CF_AXES: dict[str, str] = {
    "access_control": "engine",
    "scope_binding": "engine",
    "actor_isolation": "engine",
    "temporal_validity": "model",
    "supersession": "model",
    "commitment_status": "model",
    "dependency_validity": "model",
}

_EVENT_TYPES = ("conversation_turn", "state_write", "supersession", "query")
_CF_ID_RE = re.compile(r"^(?P<prefix>[A-Z0-9_]+)-(?P<side>POS|CF)-(?P<n>\d+)$")


@attrs.frozen
class ImportReport:
    """What :func:`import_file` wrote: timelines read, cases written, unmapped items listed."""

    timelines: int
    cases: int
    unmapped: int
    unmapped_by_kind: tuple[tuple[str, int], ...] = ()


# --------------------------------------------------------------------------- #
# One timeline
# --------------------------------------------------------------------------- #


def convert_timeline_cases(obj: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every query of one timeline as its own ``(case, unmapped record)``, in order.

    Each case is asked at its query's time over the events up to that query. A
    timeline with one query (or none) keeps its id; with several, the n-th query's
    case is ``<timeline id>.q<n>`` (n from 1), and a pair keeps the same suffix.
    """
    count = _query_count(obj)
    if count <= 1:
        return [convert_timeline(obj)]
    return [convert_timeline(obj, which=n, suffix=f".q{n + 1}") for n in range(count)]


def _query_count(obj: dict[str, Any]) -> int:
    events = obj.get("events")
    if not isinstance(events, list):
        return 0
    return sum(isinstance(e, dict) and e.get("type") == "query" for e in events)


def convert_timeline(
    obj: dict[str, Any], *, which: int | None = None, suffix: str = ""
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Convert one parsed StateBench timeline into ``(case, unmapped record)`` for one of its
    queries: the ``which``-th (from 0; default the last), its case id the timeline id
    followed by ``suffix``.

    Raises :class:`StatebenchError` (``line`` None) naming the field at fault.
    """
    timeline = field_object(obj, "")
    timeline_id = field_text(required_field(timeline, "id", ""), "id", empty=False)
    if "/" in timeline_id or "\\" in timeline_id or "\0" in timeline_id or timeline_id[0] == ".":
        raise field_error("id", f"cannot name a case file: {timeline_id!r}")
    track = field_text(required_field(timeline, "track", ""), "track", empty=False)
    actors = field_object(required_field(timeline, "actors", ""), "actors")
    user = field_object(required_field(actors, "user", "actors"), "actors.user")
    user_id = field_text(required_field(user, "id", "actors.user"), "actors.user.id", empty=False)
    tenant = field_text(required_field(user, "org", "actors.user"), "actors.user.org", empty=False)
    role = optional_text(user, "role", "actors.user")
    initial = field_object(required_field(timeline, "initial_state", ""), "initial_state")
    raw_events = field_list(required_field(timeline, "events", ""), "events")
    environment = optional_object(initial, "environment", "initial_state")
    now = None
    if environment.get("now") is not None:
        now = field_time(environment["now"], "initial_state.environment.now")

    # Read every event's type and time first; the case asks the last query.
    kinds: list[str] = []
    stamps: list[datetime] = []
    for i, raw in enumerate(raw_events):
        event = field_object(raw, f"events[{i}]")
        kind = field_text(required_field(event, "type", f"events[{i}]"), f"events[{i}].type")
        if kind not in _EVENT_TYPES:
            raise field_error(f"events[{i}].type", f"unknown event type {kind!r}")
        kinds.append(kind)
        stamps.append(field_time(required_field(event, "ts", f"events[{i}]"), f"events[{i}].ts"))
    queries = [i for i, kind in enumerate(kinds) if kind == "query"]
    chosen = (queries[-1] if which is None else queries[which]) if queries else None

    build = TimelineBuild(tenant=tenant)
    build.duplicated = duplicated_ids(initial, raw_events, kinds, chosen)
    emit_initial_state(build, initial, environment, now, min(stamps) if stamps else None)
    turns = emit_events(build, raw_events, kinds, stamps, chosen,
                         last=queries[-1] if queries else None)

    case_id = timeline_id + suffix
    case: dict[str, Any] = {"id": case_id, "suite": "imported"}
    times = [t for t in (now, build.last_ts) if t is not None]
    query: dict[str, Any] | None = None
    if chosen is not None:
        query = field_object(raw_events[chosen], f"events[{chosen}]")
        times.append(stamps[chosen])
        case["question"] = field_text(
            required_field(query, "prompt", f"events[{chosen}]"), f"events[{chosen}].prompt"
        )
    else:
        build.note("no_query", "events")
    if not times:
        raise field_error("events", "no timestamp anywhere: cannot choose the probe time")
    at = max(times)
    case["at"] = format_time(at)
    actor: dict[str, Any] = {"id": user_id, "tenant": tenant}
    if role:
        actor["roles"] = [role]
    case["actor"] = actor

    outcome = derive_outcome(build.facts, tenant, at)
    expect: dict[str, Any] = {
        "admitted": [],
        "excluded": {},
        "experiences": {},
        "ignored": {},
        "exact": False,
    }
    admitted: set[str] = set()
    excluded: dict[str, set[str]] = {}
    gold: list[str] = []
    drift: list[str] = []
    if query is not None:
        gpath = f"events[{chosen}].ground_truth"
        truth = field_object(required_field(query, "ground_truth", f"events[{chosen}]"), gpath)
        fill_expectations(build, outcome, truth, gpath, admitted, excluded, gold, drift)
        expected = truth.get("expected_applicability")
        if expected is not None:
            epath = join_path(gpath, "expected_applicability")
            if expected not in APPLICABILITY_FOR_VERDICT:
                raise field_error(epath, f"must be KEEP, ADAPT or REJECT, not {expected!r}")
            add_experience(build, case, expect, outcome, epath, expected, turns, timeline_id)

    expect["admitted"] = sorted(admitted)
    expect["excluded"] = {f: sorted(c) for f, c in sorted(excluded.items())}
    case["events"] = build.events
    probe = sorted({f.key for f in build.facts if f.id in admitted or f.id in excluded})
    if probe:
        case["probe"] = probe
    case["expect"] = expect
    pool = answer_pool(build, outcome, gold, drift)
    if pool and pool.get("gold"):  # without a gold answer there is nothing to grade
        case["pool"] = pool
    if track.startswith("cf_"):
        _pair_fields(build, case, track[3:], timeline_id, suffix)

    record = {
        "case": case_id,
        "items": build.items,
        "query": f"events[{chosen}]" if chosen is not None else None,
        "timeline": timeline_id,
        "track": track,
    }
    return case, record


def _pair_fields(
    build: TimelineBuild, case: dict[str, Any], axis: str, timeline_id: str, suffix: str = ""
) -> None:
    """A cf_* track names the axis; the generator's ids name the side and, by counter, the pair.

    StateBench builds each pair's positive side first, so ``X-POS-n`` pairs
    with ``X-CF-(n+1)``; both get pair ``X-n``.
    """
    case["axis"] = axis
    if axis in CF_AXES:
        case["decidable_by"] = CF_AXES[axis]
    match = _CF_ID_RE.match(timeline_id)
    if match:
        number = int(match.group("n"))
        first = number if match.group("side") == "POS" else number - 1
        if first >= 1:
            case["side"] = "positive" if match.group("side") == "POS" else "counterfactual"
            case["pair"] = f"{match.group('prefix')}-{first:0{len(match.group('n'))}d}{suffix}"
    if "pair" not in case:
        build.note("pair", "id", timeline_id)


# --------------------------------------------------------------------------- #
# Files
# --------------------------------------------------------------------------- #


def _decode_line(text: str) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)


def parse_timelines(lines: Iterable[str]) -> list[tuple[int, dict[str, Any]]]:
    """Decode JSON Lines into ``(line number, timeline)`` pairs; blank lines are skipped."""
    out: list[tuple[int, dict[str, Any]]] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obj = _decode_line(text)
        except ValueError as exc:  # JSONDecodeError is a ValueError
            raise StatebenchError(f"not a JSON object: {exc}", line=number) from None
        except RecursionError:
            raise StatebenchError("JSON nested too deeply", line=number) from None
        if not isinstance(obj, dict):
            raise StatebenchError(f"a timeline must be a JSON object, not {json_type(obj)}",
                                  line=number)
        out.append((number, obj))
    return out


def _dump_case(case: dict[str, Any]) -> bytes:
    return (json.dumps(case, sort_keys=True, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _dump_line(record: dict[str, Any]) -> bytes:
    text = compact_json(record)
    return (text + "\n").encode("utf-8")


def import_file(path: str | Path, out_dir: str | Path) -> ImportReport:
    """Convert every timeline of ``path`` and write ``out_dir/<id>.json`` and ``unmapped.jsonl``.

    The whole input is converted before anything is written, so a malformed
    line leaves ``out_dir`` untouched. Errors name the file, the line and the field.
    """
    try:
        return _import_file(path, out_dir)
    except StatebenchError as exc:
        raise StatebenchError(exc.message, source=str(path), line=exc.line, field=exc.field) from None


def _import_file(path: str | Path, out_dir: str | Path) -> ImportReport:
    try:
        with Path(path).open("rb") as stream:  # no line held past the limit (SPEC §18)
            raw = read_bounded(stream, source=str(path))
    except OSError as exc:
        raise StatebenchError(f"cannot read timelines: {exc.strerror}") from None
    except InputError as exc:  # a line past the limit, or bytes that are not UTF-8
        raise StatebenchError(exc.message, line=exc.line) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise StatebenchError(f"not UTF-8: {exc.reason}", line=line) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    outputs: list[tuple[str, bytes]] = []
    records: list[bytes] = []
    kinds: Counter[str] = Counter()
    seen: dict[str, int] = {}
    timelines = 0
    for number, obj in parse_timelines(text.split("\n")):
        try:
            converted = convert_timeline_cases(obj)
        except StatebenchError as exc:
            raise StatebenchError(exc.message, line=number, field=exc.field) from None
        timelines += 1
        for case, record in converted:
            if case["id"] in seen:
                raise StatebenchError(
                    f"case id {case['id']!r} already used on line {seen[case['id']]}",
                    line=number,
                    field="id",
                )
            seen[case["id"]] = number
            outputs.append((f"{case['id']}.json", _dump_case(case)))
            records.append(_dump_line(record))
            kinds.update(item["kind"] for item in record["items"])
    if not timelines:
        raise StatebenchError("no timelines: the file holds no JSON line", line=1)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StatebenchError(f"cannot make the output folder {str(out)!r}: {exc.strerror}") from None
    for name, data in outputs:
        (out / name).write_bytes(data)
    (out / "unmapped.jsonl").write_bytes(b"".join(records))
    return ImportReport(
        timelines=timelines,
        cases=len(outputs),
        unmapped=sum(kinds.values()),
        unmapped_by_kind=tuple(sorted(kinds.items())),
    )
