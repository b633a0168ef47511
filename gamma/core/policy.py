"""Governance policies: authority and clearance ladders and the resolver's switches.

A policy is TOML (``policies/default.toml``); every key is optional and
defaults to the built-in default. Its digest is the sha256 of the canonical
JSON of the normalised policy, so an equivalent file has the same digest.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import attrs

from gamma.core.canonical import digest_of
from gamma.core.errors import PolicyError

__all__ = ["Policy", "DEFAULT_POLICY", "load_policy", "parse_policy"]

_SCHEMA: dict[str, dict[str, type | tuple[type, ...]]] = {
    "authority": {"ladder": list, "default": str, "writer_default": str, "over_claim": str},
    "clearance": {"ladder": list, "default": str},
    "supersession": {"same_key": bool},
    "dependencies": {"mode": str},
    "disclosure": {"restricted_keys": bool},
    "store": {"clock_skew_seconds": int},
}

DEFAULT_CLOCK_SKEW = 300
"""Seconds an appended event's ``ts`` may be ahead of the store's clock."""


@attrs.frozen(kw_only=True)
class Policy:
    """A normalised, validated policy. Ranks are list positions, low to high."""

    authority_ladder: tuple[str, ...] = (
        "unverified",
        "system",
        "subordinate",
        "peer",
        "manager",
        "executive",
        "policy",
    )
    authority_default: str = "peer"
    clearance_ladder: tuple[str, ...] = ("public", "internal", "confidential", "secret")
    clearance_default: str = "public"
    same_key: bool = True
    dependency_mode: Literal["exclude", "flag"] = "exclude"
    restricted_keys: bool = False
    # the highest authority each writer (an envelope ``actor``) holds: exact ids, or prefixes
    # ending in ``*``; writers matching no entry hold ``writer_default`` (None: the top level)
    writers: tuple[tuple[str, str], ...] = ()
    writer_default: str | None = None
    over_claim: Literal["cap", "refuse"] = "cap"
    # how far (seconds) an appended ts may be ahead of the store's clock; the store reads the
    # clock, never the resolver
    clock_skew_seconds: int = DEFAULT_CLOCK_SKEW
    _authority_rank: dict[str, int] = attrs.field(init=False, eq=False, repr=False)
    _clearance_rank: dict[str, int] = attrs.field(init=False, eq=False, repr=False)
    _writer_cache: dict[str, int] = attrs.field(init=False, eq=False, repr=False)
    digest: str = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(
            self, "_authority_rank", {n: i for i, n in enumerate(self.authority_ladder)}
        )
        object.__setattr__(
            self, "_clearance_rank", {n: i for i, n in enumerate(self.clearance_ladder)}
        )
        object.__setattr__(self, "_writer_cache", {})
        object.__setattr__(self, "digest", digest_of(self.to_dict()))

    def to_dict(self) -> dict[str, Any]:
        """The normalised policy in the TOML file's shape.

        The writer keys appear only when set, so a policy without them keeps its digest.
        """
        authority: dict[str, Any] = {
            "ladder": list(self.authority_ladder),
            "default": self.authority_default,
        }
        if self.writer_default is not None:
            authority["writer_default"] = self.writer_default
        if self.over_claim != "cap":
            authority["over_claim"] = self.over_claim
        body: dict[str, Any] = {
            "authority": authority,
            "clearance": {"ladder": list(self.clearance_ladder), "default": self.clearance_default},
            "supersession": {"same_key": self.same_key},
            "dependencies": {"mode": self.dependency_mode},
            "disclosure": {"restricted_keys": self.restricted_keys},
        }
        if self.writers:
            body["writers"] = dict(self.writers)
        if self.clock_skew_seconds != DEFAULT_CLOCK_SKEW:
            body["store"] = {"clock_skew_seconds": self.clock_skew_seconds}
        return body

    @classmethod
    def from_dict(cls, obj: dict[str, Any], *, source: str = "<policy>") -> Policy:
        """The inverse of ``to_dict()``, validated like a policy file."""
        if not isinstance(obj, dict):
            raise PolicyError("a policy must be an object", source=source)
        return _from_data(obj, source=source, text="")

    def authority_rank(self, name: str | None) -> int:
        """Rank of an authority name (None: the default); validated input names are on the ladder."""
        try:
            return self._authority_rank[self.authority_default if name is None else name]
        except KeyError:
            raise PolicyError(f"authority level {name!r} is not on this policy's ladder",
                              field="authority") from None

    def clearance_rank(self, name: str | None) -> int:
        try:
            return self._clearance_rank[self.clearance_default if name is None else name]
        except KeyError:
            raise PolicyError(f"clearance level {name!r} is not on this policy's ladder",
                              field="clearance") from None

    def writer_rank(self, writer: str) -> int:
        """Rank of the highest authority ``writer`` holds: the best matching entry of
        ``writers`` (an exact id, or a prefix ending in ``*``), else ``writer_default``."""
        cached = self._writer_cache.get(writer)
        if cached is not None:
            return cached
        ranks = [
            self._authority_rank[level]
            for pattern, level in self.writers
            if pattern == writer or (pattern.endswith("*") and writer.startswith(pattern[:-1]))
        ]
        if ranks:
            rank = max(ranks)
        elif self.writer_default is not None:
            rank = self._authority_rank[self.writer_default]
        else:
            rank = len(self.authority_ladder) - 1
        self._writer_cache[writer] = rank
        return rank

    def event_rank(self, authority: str | None, writer: str) -> int:
        """The effective authority of an event: what it claims (None: the default), capped
        at what its writer holds."""
        return min(self.authority_rank(authority), self.writer_rank(writer))

    def over_claims(self, authority: str | None, writer: str) -> bool:
        """True when an event explicitly claims more authority than its writer holds."""
        return authority is not None and self.authority_rank(authority) > self.writer_rank(writer)

    def knows_authority(self, name: str) -> bool:
        return name in self._authority_rank

    def knows_clearance(self, name: str) -> bool:
        return name in self._clearance_rank


DEFAULT_POLICY = Policy()


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy TOML file; raise PolicyError naming line and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"cannot read policy: {exc}", source=str(path)) from None
    return parse_policy(text, source=str(path))


def parse_policy(text: str, *, source: str = "<policy>") -> Policy:
    """Validate policy TOML text into a Policy."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = _toml_error_line(str(exc))
        raise PolicyError(f"invalid TOML: {exc}", source=source, line=line) from None
    return _from_data(data, source=source, text=text)


def _from_data(data: dict[str, Any], *, source: str, text: str) -> Policy:
    """Validate a policy's tables (from TOML, or from ``Policy.to_dict()``)."""

    def fail(message: str, table: str, key: str | None = None) -> PolicyError:
        field = f"{table}.{key}" if key else table
        return PolicyError(message, source=source, line=_line_of(text, table, key), field=field)

    values: dict[str, Any] = {}
    writers: dict[str, str] = {}
    for table, entries in data.items():
        if not isinstance(entries, dict):
            line = _line_of(text, None, table)
            raise PolicyError("unknown top-level key; keys belong in tables", source=source, line=line, field=table)
        if table == "writers":
            for key, value in entries.items():
                if not isinstance(value, str):
                    raise fail(f"expected an authority level, got {value!r}", table, key)
                if not key or "*" in key[:-1]:
                    raise fail(
                        f"invalid writer {key!r}: an actor id, or a prefix ending in '*'", table, key
                    )
                writers[key] = value
            continue
        if table not in _SCHEMA:
            raise fail(f"unknown table [{table}]", table)
        for key, value in entries.items():
            expected = _SCHEMA[table].get(key)
            if expected is None:
                raise fail(f"unknown key {key!r}", table, key)
            if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
                raise fail(f"expected {_type_name(expected)}, got {value!r}", table, key)
            values[f"{table}.{key}"] = value

    base = DEFAULT_POLICY
    authority_ladder = _ladder(values.get("authority.ladder"), base.authority_ladder, fail, "authority")
    clearance_ladder = _ladder(values.get("clearance.ladder"), base.clearance_ladder, fail, "clearance")
    authority_default = values.get("authority.default", base.authority_default)
    clearance_default = values.get("clearance.default", base.clearance_default)
    for table, default, ladder in (
        ("authority", authority_default, authority_ladder),
        ("clearance", clearance_default, clearance_ladder),
    ):
        if default not in ladder:
            written = f"{table}.default" in values
            message = (
                f"unknown {table} level {default!r}"
                if written
                else f"the ladder lacks the built-in default {default!r}: set {table}.default"
            )
            raise fail(message, table, "default" if written else "ladder")
    for key, level in writers.items():
        if level not in authority_ladder:
            raise fail(f"unknown authority level {level!r}", "writers", key)
    writer_default = values.get("authority.writer_default")
    if writer_default is not None and writer_default not in authority_ladder:
        raise fail(f"unknown authority level {writer_default!r}", "authority", "writer_default")
    over_claim = values.get("authority.over_claim", "cap")
    if over_claim not in ("cap", "refuse"):
        raise fail(f"expected 'cap' or 'refuse', got {over_claim!r}", "authority", "over_claim")
    skew = values.get("store.clock_skew_seconds", DEFAULT_CLOCK_SKEW)
    if skew < 0:
        raise fail(f"expected a number of seconds >= 0, got {skew!r}", "store", "clock_skew_seconds")
    mode = values.get("dependencies.mode", base.dependency_mode)
    if mode not in ("exclude", "flag"):
        raise fail(f"expected 'exclude' or 'flag', got {mode!r}", "dependencies", "mode")
    return Policy(
        authority_ladder=authority_ladder,
        authority_default=authority_default,
        clearance_ladder=clearance_ladder,
        clearance_default=clearance_default,
        same_key=values.get("supersession.same_key", base.same_key),
        dependency_mode=mode,
        restricted_keys=values.get("disclosure.restricted_keys", base.restricted_keys),
        writers=tuple(sorted(writers.items())),
        writer_default=writer_default,
        over_claim=over_claim,
        clock_skew_seconds=skew,
    )


def _ladder(value: Any, default: tuple[str, ...], fail: Any, table: str) -> tuple[str, ...]:
    if value is None:
        return default
    if not value:
        raise fail("a ladder needs at least one level", table, "ladder")
    for item in value:
        if not isinstance(item, str) or not item:
            raise fail(f"ladder levels must be non-empty strings, got {item!r}", table, "ladder")
    if len(set(value)) != len(value):
        raise fail("a ladder lists a level twice", table, "ladder")
    return tuple(value)


def _type_name(expected: type | tuple[type, ...]) -> str:
    names: dict[object, str] = {
        list: "a list", str: "a string", bool: "true or false", int: "an integer"
    }
    return names.get(expected, str(expected))


def _toml_error_line(message: str) -> int | None:
    match = re.search(r"line (\d+)", message)
    return int(match.group(1)) if match else None


def _line_of(text: str, table: str | None, key: str | None) -> int | None:
    """Best-effort physical line of ``key`` inside ``[table]`` (or of the table header).

    ``table`` None looks for a key above the first table header.
    """
    current = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        header = re.fullmatch(r"\[\s*([^\]]+?)\s*\]", line)
        if header:
            current = header.group(1)
            if key is None and current == table:
                return number
            continue
        if key is not None and current == table and re.match(rf"[\"']?{re.escape(key)}[\"']?\s*=", line):
            return number
    return None
