"""Conformance cases: one governed question about one event log, with its expected outcome.

A case (DESIGN §9, SPEC.md §13) is a JSON object: the events (embedded,
or a ``log`` file relative to the case file), who asks (``actor``) and when (``at``), the
question and its ``probe`` keys, what Γ must decide (``expect``) and the closed answer
``pool``; pair, factorial and trap cases carry their labels. ``load_cases`` reads one case
per ``.json`` file or one per line of a suite's ``.jsonl`` file and validates everything,
events included, so an error names the file, the 1-based physical line and the field
(``events[3].visibility.roles``) before anything runs.

This module finds and reads case files. What a case is (:class:`Case`, :class:`Expect`
and the label tables) lives in :mod:`gamma.conformance.model`, and the strict checking of one
case object (:func:`parse_case`) in :mod:`gamma.conformance.parse`; both are re-exported here,
so ``gamma.conformance.cases`` stays the one place to import cases from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from gamma.conformance.model import (
    APPLICABILITY,
    AXES,
    CELLS,
    DECIDERS,
    FACTORIAL_CELLS,
    GOVERNANCE,
    MODES,
    SIDES,
    SUITES,
    VERDICTS,
    Case,
    Expect,
)
from gamma.conformance.parse import parse_case
from gamma.core.reading.strictjson import decode_json
from gamma.core.terms.errors import DuplicateIdError, InputError, JSONSyntaxError, ValueTypeError
from gamma.core.terms.model import Event

__all__ = [
    "APPLICABILITY",
    "AXES",
    "CELLS",
    "DECIDERS",
    "FACTORIAL_CELLS",
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


def load_cases(
    paths: str | Path | Iterable[str | Path], suite: str | None = None
) -> tuple[Case, ...]:
    """Read and validate cases from files and directories, optionally of one ``suite``.

    A ``.json`` file holds one case, a ``.jsonl`` file one case per line. A directory is
    walked recursively in sorted order; there, event logs (``*.events.jsonl``), JSON Lines
    files whose first object has no ``suite`` field (logs, replies) and ``.json`` actors
    (objects with only actor fields) are skipped; every other ``.json`` file is read as a
    case, so a case with a misspelt field is an error, never silently left out. A file named
    explicitly is always read as cases. Case ids must be unique.
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
    if path.suffix == ".json":
        return not (isinstance(first, dict) and first and set(first) <= _ACTOR_FIELDS)
    return isinstance(first, dict) and "suite" in first


_ACTOR_FIELDS = frozenset({"id", "tenant", "roles", "clearance", "scope"})


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
