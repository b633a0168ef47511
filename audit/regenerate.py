"""Regenerate the golden audit records in audit/ from the fixtures in fixtures/.

    python audit/regenerate.py           # write every record, remove stale ones
    python audit/regenerate.py --check   # write nothing; exit 1 if anything would change

audit/ mirrors fixtures/ (SPEC.md §10.5):

- a conformance case file ``fixtures/D/C.json`` -> ``audit/D/C.json``;
- a case on a line of a suite ``fixtures/D/S.jsonl`` -> ``audit/D/S/<case id>.json``;
- an event log ``fixtures/D/L.jsonl`` resolved for a request named N in
  ``audit/requests.toml`` -> ``audit/D/L.N.json`` (N defaults to the stem of
  the request's actor file).

Cases are read with ``gamma.conformance.cases`` (a JSON object with ``suite``), so a
case's golden record is the audit record of its reference resolution, under
its own policy. Every valid event log under fixtures/ must be covered, by a
request or by a case whose ``log`` names it. Other files (actors, response
sets) are ignored; logs and case files that fail validation are skipped with
a notice (error fixtures: there is nothing to audit). A record that differs
only in ``engine`` (the gamma version) passes --check. Exit status: 0 up to
date (or written), 1 --check found a difference or a log is not covered, 2 the
manifest or a requested log is broken.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from gamma import InputError, Policy, load_events, parse_actor, resolve
from gamma.audit.replay import audit_record, diff_records, parse_audit
from gamma.conformance.cases import Case, load_cases
from gamma.core.reading.strictjson import decode_json
from gamma.core.terms.canonical import canonical_json, parse_ts
from gamma.core.terms.model import Actor, Event
from gamma.core.terms.policy import DEFAULT_POLICY, load_policy

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = "requests.toml"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class ManifestError(Exception):
    """audit/requests.toml or a log it requests is broken (exit 2)."""


@attrs.frozen(kw_only=True)
class Request:
    """One golden record to produce: where it goes and what it resolves.

    Either ``case`` (a validated conformance case) or the manifest's ``log``,
    ``actor``, ``at`` and ``policy`` (resolved relative to ``root``).
    """

    record: Path  # relative to the root: audit/...
    source: str  # where it comes from, for messages
    root: Path
    case: Case | None = None
    log: Path | None = None
    actor: Any = None  # an actor file (str, relative to root) or an inline table
    at: Any = None
    policy: str | None = None  # a file relative to root, or a name under policies/


@attrs.frozen
class Inputs:
    events: tuple[Event, ...]
    actor: Actor
    at: datetime
    policy: Policy


@attrs.frozen
class Discovery:
    requests: tuple[Request, ...]
    uncovered: tuple[str, ...]  # valid event logs no request or case covers
    skipped: tuple[str, ...]  # notices: error fixtures and unreadable files


def _rel(path: Path, root: Path) -> str:
    return path.resolve().relative_to(root.resolve()).as_posix()


def discover(root: Path = ROOT) -> Discovery:
    """Every golden record the fixtures call for, in a stable order."""
    fixtures, audit = root / "fixtures", root / "audit"
    requests = _manifest(root)
    logs: list[Path] = []
    skipped: list[str] = []
    for path in sorted(fixtures.rglob("*.json*")):
        if path.suffix not in (".json", ".jsonl") or not path.is_file():
            continue
        source = _rel(path, root)
        try:
            first = _first_object(path)
            if isinstance(first, dict) and "suite" in first:
                cases = load_cases(path)
            elif isinstance(first, dict) and "type" in first and path.suffix == ".jsonl":
                logs.append(path)
                continue
            else:
                continue  # an actor, a response set...: nothing to audit
        except (InputError, UnicodeDecodeError) as exc:
            skipped.append(f"{source}: {exc}")
            continue
        mirror = audit / path.relative_to(fixtures)
        for case in cases:
            if path.suffix == ".json":
                record, where = mirror, source
            else:
                record = mirror.with_suffix("") / f"{_UNSAFE.sub('_', case.id)}.json"
                where = f"{source}:{case.line}"
            requests.append(Request(record=record, source=where, root=root, case=case))
    _no_collisions(requests)
    covered = {r.log.resolve() for r in requests if r.log is not None}
    covered |= {
        (r.case.path.parent / r.case.log).resolve()
        for r in requests
        if r.case is not None and r.case.path is not None and r.case.log is not None
    }
    uncovered = []
    for path in logs:
        if path.resolve() in covered:
            continue
        try:
            load_events(path)
        except InputError as exc:
            skipped.append(f"{_rel(path, root)}: {exc}")
            continue
        uncovered.append(_rel(path, root))
    requests = [attrs.evolve(r, record=Path(_rel(r.record, root))) for r in requests]
    ordered = tuple(sorted(requests, key=lambda r: r.record))
    return Discovery(ordered, tuple(uncovered), tuple(skipped))


def _first_object(path: Path) -> Any:
    """The file's JSON object (a .json file) or its first line's (a .jsonl file)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        text = next((line for line in text.split("\n") if line.strip()), "null")
    return decode_json(text, source=str(path))


def _manifest(root: Path) -> list[Request]:
    path = root / "audit" / MANIFEST
    if not path.exists():
        return []
    try:
        entries = tomllib.loads(path.read_text(encoding="utf-8")).get("request", [])
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{_rel(path, root)}: {exc}") from None
    requests = []
    for index, entry in enumerate(entries):
        where = f"{_rel(path, root)} request {index + 1}"
        unknown = set(entry) - {"log", "actor", "at", "name", "policy"}
        missing = {"log", "actor", "at"} - set(entry)
        if unknown or missing:
            raise ManifestError(f"{where}: unknown {sorted(unknown)}, missing {sorted(missing)}")
        log, fixtures = (root / entry["log"]).resolve(), (root / "fixtures").resolve()
        if not log.is_relative_to(fixtures):
            raise ManifestError(f"{where}: log {entry['log']!r} is not under fixtures/")
        actor = entry["actor"]
        name = entry.get("name") or (Path(actor).stem if isinstance(actor, str) else None)
        if not isinstance(name, str) or not name or _UNSAFE.search(name):
            raise ManifestError(f"{where}: needs a plain name (letters, digits, _ . -)")
        policy = entry.get("policy")
        if policy is not None and not isinstance(policy, str):
            raise ManifestError(f"{where}: policy must be a file or a name under policies/")
        mirror = root / "audit" / log.relative_to(fixtures)
        requests.append(Request(
            record=mirror.with_name(f"{mirror.stem}.{name}.json"), source=where, root=root,
            log=log, actor=actor, at=entry["at"], policy=policy,
        ))  # fmt: skip
    return requests


def _no_collisions(requests: list[Request]) -> None:
    seen: dict[Path, str] = {}
    for request in requests:
        key = request.record.resolve()
        if key in seen:
            raise ManifestError(
                f"{request.source} and {seen[key]} both map to {request.record}: rename one"
            )
        seen[key] = request.source


def inputs(request: Request) -> Inputs:
    """The validated log, actor, time and policy a request resolves."""
    if request.case is not None:
        case = request.case
        return Inputs(case.events(), case.actor, case.at, case.get_policy())
    assert request.log is not None
    policy = DEFAULT_POLICY
    if request.policy is not None:
        named = request.root / "policies" / f"{request.policy}.toml"
        policy = load_policy(request.root / request.policy if not named.is_file() else named)
    events = load_events(request.log, policy=policy)
    actor = request.actor
    if isinstance(actor, str):
        path = request.root / actor
        actor = decode_json(path.read_text(encoding="utf-8"), source=str(path))
    try:
        at = parse_ts(request.at)
    except ValueError as exc:
        raise InputError(str(exc), source=request.source, field="at") from None
    return Inputs(events, parse_actor(actor, policy=policy, source=request.source), at, policy)


def expected(request: Request) -> tuple[dict[str, Any], Inputs]:
    """The golden record a request produces, with the inputs it was resolved from."""
    given = inputs(request)
    resolution = resolve(given.events, given.actor, given.at, given.policy)
    return audit_record(resolution, given.events), given


def run(root: Path, *, check: bool) -> int:
    try:
        found = discover(root)
    except ManifestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems: list[str] = []
    notes = [f"skipped {s}" for s in found.skipped]
    wanted: set[Path] = set()
    written = 0
    for request in found.requests:
        try:
            record, _ = expected(request)
        except (InputError, OSError) as exc:
            if request.case is None:
                print(f"error: {request.source}: {exc}", file=sys.stderr)
                return 2
            notes.append(f"skipped {request.source}: {exc}")
            continue
        path = root / request.record
        wanted.add(path.resolve())
        text = canonical_json(record) + "\n"
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            continue
        if check:
            if _engine_only(current, record):
                notes.append(f"{request.record.as_posix()}: written by another gamma version")
            else:
                problems.append(_explain(request, current, record))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")
        written += 1
    for path in sorted((root / "audit").rglob("*.json"), reverse=True):
        if path.resolve() in wanted:
            continue
        if check:
            problems.append(f"{_rel(path, root)}: stale (no fixture produces it)")
        else:
            path.unlink()
            written += 1
            if path.parent != root / "audit" and not any(path.parent.iterdir()):
                path.parent.rmdir()
    hint = f"no golden record: add a [[request]] to audit/{MANIFEST}"
    problems += [f"{log}: {hint}" for log in found.uncovered]
    for line in notes + problems:
        print(line, file=sys.stderr)
    if check:
        verdict = "up to date" if not problems else f"{len(problems)} problem(s)"
        print(f"{len(wanted)} golden audit records: {verdict}")
    else:
        print(f"{len(wanted)} golden audit records, {written} written or removed")
    return 1 if problems else 0


def _engine_only(current: str | None, record: dict[str, Any]) -> bool:
    """The file is what would be written, but for the engine version that wrote it."""
    try:
        old = json.loads(current or "null")
    except ValueError:
        return False
    if not isinstance(old, dict) or "engine" not in old:
        return False
    return canonical_json({**old, "engine": record["engine"]}) == canonical_json(record) and (
        current == canonical_json(old) + "\n"
    )


def _explain(request: Request, current: str | None, record: dict[str, Any]) -> str:
    where = request.record.as_posix()
    if current is None:
        return f"{where}: missing (from {request.source})"
    try:
        old = parse_audit(current, source=where)
    except InputError as exc:
        return f"{where}: malformed: {exc}"
    diff = diff_records(old, record)
    if diff.same:
        return f"{where}: not in canonical form: regenerate"
    body = diff.render(a="golden", b="now").rstrip("\n").replace("\n", "\n    ")
    return f"{where}: differs from {request.source}:\n    {body}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 on any difference"
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="project root (default: this repo)")
    args = parser.parse_args(argv)
    return run(args.root, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
