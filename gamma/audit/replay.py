"""Audit records and replay: what an actor was allowed to see, re-derived from the log.

An audit record is the resolution's JSON object (DESIGN §6, which names its
``format`` and the ``engine``, the gamma version that wrote it) plus ``events``
(how many log events it covers: up to and including the last with ``ts <= at``).
A record written before resolutions named their format has no ``format``: it is
of format 1. Replay recomputes Γ
over exactly those events, so events appended later cannot disturb it, and
checks their chain head against the record's ``log``. The resolver stays
pure: files are read and written here, never there.

Comparing two records lives in :mod:`gamma.audit.diff`; its names are
re-exported here, so ``from gamma.audit import diff_records`` is the one import.
"""

from __future__ import annotations

import codecs
import os
import re
import secrets
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import attrs
import cattrs

from gamma.audit.diff import (
    AuditDiff,
    Change,
    ExperienceChange,
    FactChange,
    IgnoredChange,
    Outcome,
    diff_records,
)
from gamma.core.integrity.chain import head_of
from gamma.core.integrity.commitment import HEX_DIGEST, erased_copy
from gamma.core.integrity.merkle import CompactRange, TreeHead, leaf_hash
from gamma.core.reading.convert import first_failure
from gamma.core.reading.events import canonical_event, parse_actor
from gamma.core.reading.strictjson import decode_json
from gamma.core.resolving.render import inert
from gamma.core.resolving.resolution import FORMAT, UNDIGESTED, Resolution
from gamma.core.resolving.resolver import erasures_of, resolve
from gamma.core.terms.canonical import canonical_json, digest_of, parse_ts
from gamma.core.terms.decisions import (
    REASON_CODES,
    Admitted,
    Excluded,
    ExperienceVerdict,
    Ignored,
    Reason,
    UsedReason,
)
from gamma.core.terms.errors import (
    InputError,
    JSONSyntaxError,
    LimitError,
    MissingFieldError,
    PolicyError,
    UnknownFieldError,
    ValueTypeError,
)
from gamma.core.terms.model import Actor, Assert, Event, heard_by
from gamma.core.terms.policy import Policy
from gamma.core.terms.version import __version__
from gamma.data import named_policies

__all__ = [
    "RECORD_FIELDS", "AuditDiff", "Change", "ExperienceChange", "FactChange", "IgnoredChange",
    "Outcome", "ReplayResult", "audit_record", "check_record", "covered", "diff_records",
    "parse_audit", "read_audit", "record_digest", "replay", "write_audit",
]  # fmt: skip

RECORD_FIELDS: tuple[str, ...] = (
    "actor", "admitted", "at", "digest", "engine", "events",
    "excluded", "experiences", "format", "ignored", "log", "policy", "tree",
)  # fmt: skip
_NOT_DIGESTED = UNDIGESTED | {"events"}


def _names(cls: type) -> frozenset[str]:
    return frozenset(a.name for a in attrs.fields(cls) if a.init)


# section -> (item fields, nested list field and its item fields); every field is always written
_SHAPES: dict[str, tuple[frozenset[str], tuple[str, frozenset[str]] | None]] = {
    "admitted": (_names(Admitted), None),
    "excluded": (_names(Excluded), ("reasons", _names(Reason))),
    "experiences": (_names(ExperienceVerdict), ("reasons", _names(UsedReason))),
    "ignored": (_names(Ignored), None),
}


def _engine() -> str:
    return __version__


# -- writing -----------------------------------------------------------------------------


def covered(events: Sequence[Event], at: datetime) -> int:
    """How many events a resolution at ``at`` covers: those with ``ts <= at``."""
    return len(heard_by(events, at))


def audit_record(resolution: Resolution, events: Sequence[Event]) -> dict[str, Any]:
    """The resolution's JSON object plus ``events`` (the log events it covers)."""
    count = covered(events, resolution.at)
    return {**resolution.to_dict(), "events": count}


def write_audit(
    path: str | Path, resolution: Resolution, events: Sequence[Event]
) -> dict[str, Any]:
    """Write the audit record atomically as canonical JSON and a newline; return the record.

    A temporary file in the same directory is renamed over ``path``, so a
    reader never sees half a record, even if the writer dies.
    """
    record = audit_record(resolution, events)
    _atomic_write(Path(path), canonical_json(record) + "\n")
    return record


def _atomic_write(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise InputError(f"cannot write audit record: {exc.strerror}", source=str(path)) from None


# -- reading -----------------------------------------------------------------------------


#: The most bytes of one audit record file. A record is one canonical JSON line that grows with
#: its log (SPEC §5's bound), so the log line's 1 MiB cannot hold it; this cap keeps an endless
#: stream of bytes that could be JSON (``yes ' '``) from holding more than it.
MAX_AUDIT_BYTES = 1 << 30
_CHUNK = 1 << 16
#: Bytes no JSON document holds anywhere (a control character in a string must be escaped).
_NOT_JSON = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def read_audit(path: str | Path) -> dict[str, Any]:
    """Read and check an audit record file; InputError names the field when it is malformed."""
    source = str(path)
    try:
        with Path(path).open("rb") as stream:
            text = _read_record(stream, source=source)
    except FileNotFoundError:
        raise InputError("no such audit record", source=source) from None
    except OSError as exc:
        raise InputError(f"cannot read audit record: {exc.strerror}", source=source) from None
    return parse_audit(text, source=source)


def _read_record(stream: IO[bytes], *, source: str) -> str:
    """The file's text, refused as the bytes come: at the first byte no JSON holds (``/dev/zero``
    fails at its first), the first bytes not UTF-8 (``/dev/urandom``), or past MAX_AUDIT_BYTES."""
    utf8 = codecs.getincrementaldecoder("utf-8")()
    parts: list[str] = []
    taken = 0
    while chunk := stream.read(_CHUNK):
        taken += len(chunk)
        if taken > MAX_AUDIT_BYTES:
            raise LimitError(f"an audit record of more than {MAX_AUDIT_BYTES} bytes", source=source)
        bad = _NOT_JSON.search(chunk)
        if bad is not None:
            raise JSONSyntaxError(f"not JSON: control byte 0x{bad.group()[0]:02x} at byte"
                                  f" {taken - len(chunk) + bad.start()}", source=source)  # fmt: skip
        try:
            parts.append(utf8.decode(chunk))
        except UnicodeDecodeError as exc:
            raise JSONSyntaxError(f"not UTF-8: {exc.reason}", source=source) from None
    try:
        parts.append(utf8.decode(b"", final=True))
    except UnicodeDecodeError as exc:
        raise JSONSyntaxError(f"not UTF-8: {exc.reason}", source=source) from None
    return "".join(parts)


def parse_audit(text: str, *, source: str | None = None) -> dict[str, Any]:
    """Decode one audit record (strict JSON: no duplicate keys, floats or NaN) and check it."""
    return check_record(decode_json(text, source=source), source=source)


def check_record(obj: Any, *, source: str | None = None) -> dict[str, Any]:
    """Check an audit record's shape and types; return it (a record written before
    resolutions named their format gets ``format`` 1, unchanged otherwise).

    Checks what replay and diff rely on (every field present, known codes,
    no fact listed twice); sorting and the digest are left to replay, which
    reports them as differences rather than refusing the record.
    """

    def fail(cls: type[InputError], message: str, field: str | None) -> InputError:
        return cls(message, source=source, field=field)

    if isinstance(obj, dict) and "format" not in obj:  # written before the field: format 1
        obj = {**obj, "format": 1}
    _exact_keys(obj, frozenset(RECORD_FIELDS), "", fail)
    if type(obj["format"]) is not int or obj["format"] != FORMAT:
        message = (f"a record of format {obj['format']!r}: this gamma ({_engine()}) reads"
                   f" format {FORMAT}")
        raise fail(ValueTypeError, message, "format")
    engine, events = obj["engine"], obj["events"]
    if not isinstance(engine, str) or not engine:
        raise fail(ValueTypeError, "expected a non-empty string (the gamma version)", "engine")
    if not isinstance(events, int) or isinstance(events, bool) or events < 0:
        message = f"expected a count of events (an integer >= 0), got {events!r}"
        raise fail(ValueTypeError, message, "events")
    for name in ("digest", "log", "policy"):
        if not isinstance(obj[name], str) or not HEX_DIGEST.fullmatch(obj[name]):
            raise fail(ValueTypeError, f"expected 64 lowercase hex digits, got {obj[name]!r}", name)
    _exact_keys(obj["tree"], frozenset({"size", "root"}), "tree", fail)
    size, root = obj["tree"]["size"], obj["tree"]["root"]
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise fail(ValueTypeError, f"expected an integer >= 0, got {size!r}", "tree.size")
    if not isinstance(root, str) or not HEX_DIGEST.fullmatch(root):
        raise fail(ValueTypeError, f"expected 64 lowercase hex digits, got {root!r}", "tree.root")
    _exact_keys(obj["actor"], _names(Actor), "actor", fail)
    for section, (fields, nested) in _SHAPES.items():
        items = obj[section]
        if not isinstance(items, list):
            raise fail(ValueTypeError, "expected a list", section)
        for index, item in enumerate(items):
            where = f"{section}[{index}]"
            _exact_keys(item, _recomputed_fields(item) if section == "admitted" else fields,
                        where, fail)
            if nested is not None:
                name, inner = nested
                if not isinstance(item[name], list):
                    raise fail(ValueTypeError, "expected a list", f"{where}.{name}")
                for j, sub in enumerate(item[name]):
                    _exact_keys(sub, inner, f"{where}.{name}[{j}]", fail)
                    if sub["code"] not in REASON_CODES:
                        message = f"unknown reason code {sub['code']!r}"
                        raise fail(ValueTypeError, message, f"{where}.{name}[{j}].code")
    try:
        Resolution.from_dict({k: v for k, v in obj.items() if k not in _NOT_DIGESTED})
    except cattrs.BaseValidationError as exc:
        field, message = first_failure(exc)
        raise fail(ValueTypeError, message, field) from None
    _no_twice(obj, fail)
    return dict(obj)


def _recomputed_fields(item: Any) -> frozenset[str]:
    """An admitted item's fields: a recomputed one (SPEC §19) adds ``inputs``, and ``stale``
    when its stated value differs; every other one has exactly the Admitted fields."""
    fields = _names(Admitted)
    if isinstance(item, dict) and "inputs" in item:
        fields |= {"inputs", "stale"} if "stale" in item else {"inputs"}
    return fields


def _exact_keys(value: Any, names: frozenset[str], where: str, fail: Any) -> None:
    if not isinstance(value, dict):
        raise fail(ValueTypeError, "expected a JSON object", where or None)
    prefix = f"{where}." if where else ""
    for name in sorted(value):
        if name not in names:
            raise fail(UnknownFieldError, "unknown field", prefix + name)
    for name in sorted(names):
        if name not in value:
            raise fail(MissingFieldError, "missing required field", prefix + name)


def _no_twice(obj: dict[str, Any], fail: Any) -> None:
    """A fact is admitted or excluded once; an experience has one verdict."""
    for sections, name in ((("admitted", "excluded"), "fact"), (("experiences",), "experience")):
        seen: set[str] = set()
        for section in sections:
            for index, item in enumerate(obj[section]):
                if item[name] in seen:
                    message = f"{name} {item[name]!r} is listed twice"
                    raise fail(ValueTypeError, message, f"{section}[{index}].{name}")
                seen.add(item[name])


def record_digest(record: dict[str, Any]) -> str:
    """The digest a record's own contents hash to (equal to its ``digest`` unless edited)."""
    return digest_of({k: v for k, v in record.items() if k not in _NOT_DIGESTED})


# -- replay ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ReplayResult:
    """The outcome of replaying a log against an audit record.

    ``head`` is the chain head of the first ``events`` events of the log (of
    all of them when the log has fewer: ``available``); ``diff`` compares the
    record (A) with the record the replay would write (B).
    """

    events: int
    available: int
    head: str
    record_head: str
    tree: TreeHead
    record_tree: TreeHead
    record_digest_ok: bool
    diff: AuditDiff
    record_policy: str
    resolution: Resolution = attrs.field(eq=False, repr=False)
    #: the facts and experiences whose difference an erasure explains (SPEC §21), and the
    #: erase events of the log that erased their values
    erased: tuple[str, ...] = ()
    erase_events: tuple[str, ...] = ()

    @property
    def head_ok(self) -> bool:
        return self.available >= self.events and self.head == self.record_head and self.tree_ok

    @property
    def tree_ok(self) -> bool:
        """The Merkle tree head of the replayed prefix is the record's ``tree``."""
        return self.available >= self.events and self.tree == self.record_tree

    @property
    def ok(self) -> bool:
        """Identical: same head and the same resolution (``engine`` aside)."""
        return self.head_ok and self.diff.same

    @property
    def erased_only(self) -> bool:
        """Not identical only because values were erased since the record was made: the same
        log, and every difference is a fact excluded as ``erased``, a dependent of one, or an
        experience that used one (SPEC §21). An erasure is not a changed decision."""
        return (
            self.head_ok
            and not self.diff.same
            and _explained(self.diff, frozenset(self.erased))
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "events": self.events,
            "available": self.available,
            "head": {"record": self.record_head, "replay": self.head, "ok": self.head_ok},
            "policy": {
                "record": self.record_policy,
                "replay": self.resolution.policy,
                "ok": self.record_policy == self.resolution.policy,
            },
            "tree": {
                "record": self.record_tree.to_dict(),
                "replay": self.tree.to_dict(),
                "ok": self.tree_ok,
            },
            "record_digest_ok": self.record_digest_ok,
            "diff": self.diff.to_dict(),
            # only when a value was erased, so a replay of an unerased log keeps its bytes
            **({"erased": {"events": list(self.erase_events), "facts": list(self.erased),
                           "only": self.erased_only}} if self.erased else {}),
        }

    def to_json(self) -> str:
        return canonical_json(self.to_dict())

    def render(self) -> str:
        """What an auditor reads: identical, or which check failed and every differing field."""
        if self.ok:
            digest = self.resolution.digest
            lines = [f"identical: replayed {self.events} events, head {self.head}, digest {digest}"]
            lines += self.diff.notes(a="record", b="replay")
        elif self.erased_only:
            lines = [
                f"identical but for erased values: replayed {self.events} events, head"
                f" {self.head}; the values of {', '.join(map(inert, self.erased))} were erased"
                f" since the record was made (by {', '.join(map(inert, self.erase_events))}):"
                " an erasure, not a changed decision"
            ]
            lines += self.diff.render(a="record", b="replay").splitlines()
        else:
            lines = ["different: the replay does not reproduce the record"]
            if self.resolution.policy != self.record_policy:
                lines.append(
                    f"policy: the record was made under {self.record_policy}, the replay ran"
                    f" under {self.resolution.policy}: every other difference may come from that"
                )
            if self.available < self.events:
                lines.append(
                    f"log: the log has {self.available} events, the record covers {self.events}:"
                    " it was truncated, or is not the log the record was made from"
                )
            elif self.head != self.record_head:
                lines.append(
                    f"log: head mismatch: the first {self.events} events hash to {self.head},"
                    f" the record's log is {self.record_head}: an event among them was edited,"
                    " removed, inserted or reordered"
                )
            elif not self.tree_ok:
                lines.append(
                    f"log: tree mismatch: the first {self.events} events have tree head"
                    f" {self.tree.size}/{self.tree.root}, the record's tree is"
                    f" {self.record_tree.size}/{self.record_tree.root}"
                )
            lines += self.diff.render(a="record", b="replay").splitlines()
        if not self.record_digest_ok:
            lines.append(
                "note: the record's digest does not match its own contents:"
                " the record was edited after it was written"
            )
        return "\n".join(lines) + "\n"


def record_policy(
    record: dict[str, Any],
    candidates: Sequence[tuple[str, Policy]] = (),
    *,
    source: str | None = None,
) -> Policy:
    """The policy an audit record was made under: the first candidate whose digest is the
    record's ``policy``, looked for among ``candidates`` (label, policy) and then the named
    policies that ship with gamma (default, strict, recheck, multivalue).

    PolicyError naming every policy tried when none matches: the record was made under a
    policy file the caller must bring.
    """
    tried = [*candidates, *((f"the named policy {name!r}", p) for name, p in named_policies())]
    for _, policy in tried:
        if policy.digest == record["policy"]:
            return policy
    known = "; ".join(f"{label} is {policy.digest}" for label, policy in tried)
    raise PolicyError(
        f"the record was made under policy {record['policy']}, which is none of the policies"
        f" tried ({known}): give the policy file it was made with",
        source=source,
        field="policy",
    )


def replay(
    events: Sequence[Event],
    record: dict[str, Any],
    *,
    policy: Policy | None = None,
    candidates: Sequence[tuple[str, Policy]] = (),
    source: str | None = None,
) -> ReplayResult:
    """Recompute the record's resolution over exactly its first ``events`` log events.

    With ``policy``, the replay runs under that policy, whatever the record says: when it is
    not the record's, the result is different, and its diff names the ``policy`` field (a
    replay never reports identical under a policy the record was not made with). Without
    it, the record's own policy is chosen by :func:`record_policy` among ``candidates``
    (e.g. a store's policy) and the named policies, else PolicyError. ``source`` names the
    record in errors.
    """
    if policy is None:
        policy = record_policy(record, candidates, source=source)
    actor = parse_actor(record["actor"], policy=policy, source=source or "<audit record>")
    try:
        at = parse_ts(record["at"])
    except ValueError as exc:
        raise ValueTypeError(str(exc), source=source, field="at") from None
    count = record["events"]
    prefix = events[:count] if isinstance(events, tuple) else tuple(events[:count])
    erasures = erasures_of(events[count:], actor.tenant)
    if erasures:  # no cut of the log brings an erased value back (SPEC §21)
        prefix = tuple(
            erased_copy(event) if isinstance(event, Assert) and event.fact in erasures else event
            for event in prefix
        )
    canonical = [canonical_event(event) for event in prefix]
    head = head_of(canonical)
    tree = CompactRange()
    for line in canonical:
        tree.append(leaf_hash(line.encode("utf-8")))
    whole = covered(prefix, at) == len(prefix)
    resolution = resolve(prefix, actor, at, policy, head=head if whole else None,
                         tree=tree.head() if whole else None)
    replayed = audit_record(resolution, prefix)
    erased = _erased_outcomes(replayed)
    named = sorted({erasures[fact] for fact in erased if fact in erasures})
    return ReplayResult(
        events=count,
        available=len(events),
        head=head,
        record_head=record["log"],
        tree=tree.head(),
        record_tree=TreeHead(size=record["tree"]["size"], root=record["tree"]["root"]),
        record_digest_ok=record_digest(record) == record["digest"],
        diff=diff_records(record, replayed),
        record_policy=record["policy"],
        resolution=resolution,
        erased=erased,
        erase_events=tuple(named) or _own_erasures(resolution, erased),
    )


_DEPENDENCY_CODES = frozenset({"dependency_invalidated", "dependency_restricted"})


def _erased_outcomes(replayed: dict[str, Any]) -> tuple[str, ...]:
    """The facts the replay excludes as ``erased``, the facts whose dependency reasons name
    one of them (their origin), and the experiences whose used facts are among them."""
    erased = {
        item["fact"]
        for item in replayed["excluded"]
        if any(reason["code"] == "erased" for reason in item["reasons"])
    }
    if not erased:
        return ()
    dependents = {
        item["fact"]
        for item in replayed["excluded"]
        if any(
            reason["code"] in _DEPENDENCY_CODES and erased & set(reason["facts"])
            for reason in item["reasons"]
        )
    }
    facts = erased | dependents
    experiences = {
        item["experience"]
        for item in replayed["experiences"]
        if any(reason["fact"] in facts for reason in item["reasons"])
    }
    return tuple(sorted(facts | experiences))


def _own_erasures(resolution: Resolution, erased: tuple[str, ...]) -> tuple[str, ...]:
    """The events of the ``erased`` reasons of the replay itself (the erase events inside the
    record's prefix, or an erased assert's own event when its erase is not in the log)."""
    names = set(erased)
    return tuple(sorted({
        event
        for item in resolution.excluded
        if item.fact in names
        for reason in item.reasons
        if reason.code == "erased"
        for event in reason.events
    }))  # fmt: skip


def _explained(diff: AuditDiff, erased: frozenset[str]) -> bool:
    """Whether every difference of ``diff`` is one of the ``erased`` facts or experiences
    (besides the digest, which any difference changes)."""
    return (
        all(change.field in ("digest", "engine") for change in diff.fields)
        and not diff.ignored
        and all(change.fact in erased for change in diff.facts)
        and all(change.experience in erased for change in diff.experiences)
    )
