"""The result of Γ: what an actor may rely on at t, and why everything else is withheld.

``Resolution.to_json()`` is the canonical JSON object of DESIGN §6 (no free
text, no excluded values), naming its ``format`` and the ``engine`` (gamma's
version) that wrote it; the ``digest`` covers the decision, not those two.
``known_unknowns`` and ``recheck_inputs`` feed the rendered context only; they
are derivable from the log and not serialised.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import attrs

from gamma.core.integrity.merkle import TreeHead
from gamma.core.reading.convert import converter
from gamma.core.resolving.context import ContextBody
from gamma.core.resolving.render import render as render_resolution
from gamma.core.terms.canonical import (
    canonical_bytes,
    canonical_list,
    canonical_records,
    format_ts,
)
from gamma.core.terms.decisions import (
    Admitted,
    Excluded,
    ExperienceVerdict,
    Ignored,
    Reason,
    Recomputed,
)
from gamma.core.terms.model import Actor
from gamma.core.terms.version import __version__

__all__ = ["FORMAT", "UNDIGESTED", "Resolution"]


def _pieces(texts: dict[str, bytes]) -> list[bytes]:
    """The canonical JSON object of already-encoded values (ASCII keys, sorted), as the pieces
    to hash or join in turn: a value of tens of megabytes is never copied into a field first."""
    pieces = [b"{"]
    for name in sorted(texts):
        pieces += (b'"', name.encode("ascii"), b'":', texts[name], b",")
    pieces[-1] = b"}"
    return pieces


# The records a large resolution has by the ten thousand, unstructured as the converter does
# (a test pins them to it), at a fraction of its generic cost; its JSON encodes them as they
# are (``canonical_records``).


def _admitted(a: Admitted) -> dict[str, Any]:
    found = {
        "authority": a.authority, "fact": a.fact, "key": a.key, "kind": a.kind,
        "needs_recheck": a.needs_recheck, "priority": a.priority, "scope": a.scope,
        "value": a.value,
    }  # fmt: skip
    if isinstance(a, Recomputed):  # the optional fields, written only when Γ evaluated
        found["inputs"] = {"events": list(a.inputs.events), "facts": list(a.inputs.facts)}
        if a.stale is not None:
            found["stale"] = {"code": a.stale.code, "value": a.stale.value}
    return found


def _admitted_bytes(admitted: tuple[Admitted, ...]) -> bytes:
    """The admitted list's canonical JSON: msgspec's for plain records, and the records with
    their optional fields (omitted when absent) once a recomputed one is among them."""
    if any(type(a) is Recomputed for a in admitted):
        return canonical_list(admitted, _admitted)
    return canonical_records(admitted)


def _reason(r: Reason) -> dict[str, Any]:
    return {"code": r.code, "events": list(r.events), "facts": list(r.facts)}


def _ignored(i: Ignored) -> dict[str, Any]:
    return {"code": i.code, "event": i.event, "fact": i.fact}


FORMAT = 1
"""The resolution's format version (SPEC §5): raised when a field's meaning changes."""

#: The fields that describe the record rather than decide anything: not under the digest.
UNDIGESTED = frozenset({"digest", "engine", "format"})


@attrs.frozen(kw_only=True)
class Resolution:
    """S = Γ(H, A, t) with its audit record. Lists are sorted by id in code-point order."""

    actor: Actor
    at: datetime
    policy: str
    log: str
    tree: TreeHead
    admitted: tuple[Admitted, ...]
    excluded: tuple[Excluded, ...]
    experiences: tuple[ExperienceVerdict, ...]
    ignored: tuple[Ignored, ...]
    known_unknowns: tuple[str, ...] = attrs.field(default=(), eq=False, repr=False)
    recheck_inputs: tuple[tuple[str, tuple[str, ...]], ...] = attrs.field(
        default=(), eq=False, repr=False
    )
    # for the text report only (not serialised): each fact's log position, retracts' reasons
    positions: tuple[tuple[str, int], ...] = attrs.field(default=(), eq=False, repr=False)
    retract_reasons: tuple[tuple[str, str], ...] = attrs.field(default=(), eq=False, repr=False)
    # an engine's resolution: its context block already rendered (immutable), joined on render
    _context: ContextBody | None = attrs.field(default=None, eq=False, repr=False)

    @functools.cached_property
    def digest(self) -> str:
        """sha256 hex of the canonical JSON of the record without ``digest``, ``engine`` and
        ``format`` (computed when read): the same decision has the same digest whichever
        release wrote it."""
        digest = hashlib.sha256()
        for piece in _pieces(self._texts):
            digest.update(piece)
        return digest.hexdigest()

    @functools.cached_property
    def _texts(self) -> dict[str, bytes]:
        """Each top-level field's canonical JSON in UTF-8, encoded once for the digest and the
        output (``compact_json`` of the body is exactly these joined in key order)."""
        return {
            "actor": canonical_bytes(converter.unstructure(self.actor)),
            "admitted": _admitted_bytes(self.admitted),
            "at": canonical_bytes(format_ts(self.at)),
            "excluded": canonical_records(self.excluded),
            "experiences": canonical_list(self.experiences, converter.unstructure),
            "ignored": canonical_records(self.ignored),
            "log": canonical_bytes(self.log),
            "policy": canonical_bytes(self.policy),
            "tree": canonical_bytes(self.tree.to_dict()),
        }

    def _body(self) -> dict[str, Any]:
        return {
            "actor": converter.unstructure(self.actor),
            "admitted": [_admitted(a) for a in self.admitted],
            "at": format_ts(self.at),
            "excluded": [
                {"fact": e.fact, "key": e.key, "reasons": [_reason(r) for r in e.reasons]}
                for e in self.excluded
            ],
            "experiences": [converter.unstructure(x) for x in self.experiences],
            "ignored": [_ignored(i) for i in self.ignored],
            "log": self.log,
            "policy": self.policy,
            "tree": self.tree.to_dict(),
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of DESIGN §6, ``digest``, ``engine`` and ``format`` included."""
        return {**self._body(), "digest": self.digest, "engine": __version__, "format": FORMAT}

    def to_json(self) -> str:
        """One canonical JSON line (no trailing newline)."""
        return self.to_json_bytes().decode("utf-8")

    def to_json_bytes(self) -> bytes:
        """``to_json`` as UTF-8, as written to a file or a pipe (no second copy as text)."""
        return b"".join(_pieces({**self._texts, "digest": canonical_bytes(self.digest),
                                 "engine": canonical_bytes(__version__),
                                 "format": canonical_bytes(FORMAT)}))

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Resolution:
        """Rebuild a resolution from its JSON object; the digest is recomputed, not trusted,
        and ``engine`` and ``format`` are left to the reader (``check_record`` checks them)."""
        body = {k: v for k, v in obj.items() if k not in UNDIGESTED}
        return converter.structure(body, cls)

    @functools.cached_property
    def _by_fact(self) -> tuple[dict[str, Admitted], dict[str, Excluded]]:
        """Each fact's entries by id, built once, so that code asking about every fact
        (explain, report) is not quadratic. The first entry of an id wins, as a scan would."""
        admitted: dict[str, Admitted] = {}
        excluded: dict[str, Excluded] = {}
        for a in self.admitted:
            admitted.setdefault(a.fact, a)
        for x in self.excluded:
            excluded.setdefault(x.fact, x)
        return admitted, excluded

    def admitted_fact(self, fact: str) -> Admitted | None:
        return self._by_fact[0].get(fact)

    def excluded_fact(self, fact: str) -> Excluded | None:
        return self._by_fact[1].get(fact)

    def render(self, format: str = "text", *, keys: Iterable[str] | None = None) -> str:
        """Render for people (``text``) or for the prompt (``context``); ``json`` is to_json.

        ``keys`` restricts the context block to the facts of those keys.
        """
        return render_resolution(self, format, keys=keys)
