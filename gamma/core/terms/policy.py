"""Governance policies: authority and clearance ladders and the resolver's switches.

A policy is TOML (``policies/default.toml``); every key is optional and
defaults to the built-in default. Its digest is the sha256 of the canonical
JSON of the normalised policy, so an equivalent file has the same digest. Every field has a
stated range (SPEC §18), checked here, so that nothing later (an append's clock arithmetic,
a writer's lookup) meets a value it cannot handle.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import attrs

from gamma.core.terms.canonical import digest_of, unsafe_character
from gamma.core.terms.errors import PolicyError
from gamma.core.terms.limits import MAX_POLICY_BYTES

__all__ = [
    "Policy",
    "DEFAULT_POLICY",
    "load_policy",
    "parse_policy",
    "MAX_CLOCK_SKEW",
    "MAX_KEY_PARTS",
    "MAX_LEVELS",
    "MAX_NAME_BYTES",
    "MAX_WRITERS",
]

_POLICY_SCHEMA: dict[str, dict[str, type | tuple[type, ...]]] = {
    "authority": {"ladder": list, "default": str, "writer_default": str, "over_claim": str},
    "clearance": {"ladder": list, "default": str},
    "supersession": {"same_key": bool},
    "dependencies": {"mode": str},
    "disclosure": {"restricted_keys": bool},
    "store": {"clock_skew_seconds": int},
    "erasure": {"authority": str},
}

DEFAULT_CLOCK_SKEW = 300
"""Seconds an appended event's ``ts`` may be ahead of the store's clock."""
MAX_CLOCK_SKEW = 86_400
"""A day: more is no clock's skew but a writer dating facts ahead (and the clock plus it stays
far from ``datetime.max``, so no append can overflow)."""
MAX_LEVELS = 64
"""Levels of one ladder."""
MAX_NAME_BYTES = 1024
"""UTF-8 bytes of a level name or a writer pattern."""
MAX_WRITERS = 10_000
"""Entries of ``[writers]`` (each writer's rank is a scan of them, once per writer)."""


def _skew_problem(value: object) -> str | None:
    """What is wrong with a clock skew, or None: past the range an append's clock arithmetic
    would overflow."""
    if type(value) is not int or not 0 <= value <= MAX_CLOCK_SKEW:
        return f"expected a number of seconds from 0 to {MAX_CLOCK_SKEW}, got {_brief(value)}"
    return None


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
    dependency_mode: Literal["exclude", "flag", "recompute"] = "exclude"
    restricted_keys: bool = False
    # the highest authority each writer (an envelope ``actor``) holds: exact ids, or prefixes
    # ending in ``*``; writers matching no entry hold ``writer_default`` (None: the top level)
    writers: tuple[tuple[str, str], ...] = ()
    writer_default: str | None = None
    over_claim: Literal["cap", "refuse"] = "cap"
    # how far (seconds) an appended ts may be ahead of the store's clock; the store reads the
    # clock, never the resolver
    clock_skew_seconds: int = attrs.field(default=DEFAULT_CLOCK_SKEW)
    # the least authority a writer must hold to erase a value (issue 30; None: the top level)
    erasure_authority: str | None = None
    _authority_rank: dict[str, int] = attrs.field(init=False, eq=False, repr=False)
    _clearance_rank: dict[str, int] = attrs.field(init=False, eq=False, repr=False)
    _writer_cache: dict[str, int] = attrs.field(init=False, eq=False, repr=False)
    digest: str = attrs.field(init=False, eq=False, repr=False)

    @clock_skew_seconds.validator
    def _skew_in_range(self, _: object, value: int) -> None:
        """Also for a Policy built in Python: past the range, an append's clock arithmetic
        would overflow."""
        problem = _skew_problem(value)
        if problem is not None:
            raise PolicyError(problem, field="store.clock_skew_seconds")

    def __attrs_post_init__(self) -> None:
        object.__setattr__(
            self, "_authority_rank", {n: i for i, n in enumerate(self.authority_ladder)}
        )
        object.__setattr__(
            self, "_clearance_rank", {n: i for i, n in enumerate(self.clearance_ladder)}
        )
        object.__setattr__(self, "_writer_cache", {})
        if self.erasure_authority is not None and self.erasure_authority not in self._authority_rank:
            raise PolicyError(f"unknown authority level {_brief(self.erasure_authority)}",
                              field="erasure.authority")
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
        if self.erasure_authority is not None:
            body["erasure"] = {"authority": self.erasure_authority}
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

    def erasure_rank(self) -> int:
        """The least rank a writer holds to erase (``[erasure] authority``; unset: the top)."""
        if self.erasure_authority is None:
            return len(self.authority_ladder) - 1
        return self.authority_rank(self.erasure_authority)

    def may_erase(self, writer: str) -> bool:
        """Whether ``writer`` holds the erasure authority (SPEC §2, issue 30)."""
        return self.writer_rank(writer) >= self.erasure_rank()

    def knows_authority(self, name: str) -> bool:
        return name in self._authority_rank

    def knows_clearance(self, name: str) -> bool:
        return name in self._clearance_rank


DEFAULT_POLICY = Policy()


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy TOML file; raise PolicyError naming line and field."""
    path = Path(path)
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_POLICY_BYTES + 1)  # never more, whatever the file is
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"cannot read policy: {exc}", source=str(path)) from None
    return parse_policy(text, source=str(path))


def parse_policy(text: str, *, source: str = "<policy>") -> Policy:
    """Validate policy TOML text into a Policy."""
    if len(text) > MAX_POLICY_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_POLICY_BYTES:
        raise PolicyError(f"a policy is at most {MAX_POLICY_BYTES} bytes", source=source)
    _check_dotted_keys(text, source=source)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = _toml_error_line(str(exc))
        raise PolicyError(f"invalid TOML: {exc}", source=source, line=line) from None
    except RecursionError:  # arrays or inline tables nested hundreds deep: no policy has them
        raise PolicyError("invalid TOML: nested too deeply", source=source) from None
    except ValueError as exc:  # an integer of more digits than int() converts
        raise PolicyError(f"invalid TOML: {exc}", source=source) from None
    return _from_data(data, source=source, text=text)


def _from_data(data: dict[str, Any], *, source: str, text: str) -> Policy:
    """Validate a policy's tables (from TOML, or from ``Policy.to_dict()``)."""

    def fail(message: str, table: str, key: str | None = None) -> PolicyError:
        field = f"{table}.{key}" if key else table
        return PolicyError(message, source=source, line=_line_of(text, table, key), field=field)

    values: dict[str, Any] = {}
    writers: dict[str, str] = {}
    for table, entries in data.items():
        if table == "writers" and isinstance(entries, dict) and len(entries) > MAX_WRITERS:
            raise fail(f"at most {MAX_WRITERS} writers, got {len(entries)}", table)
        if not isinstance(entries, dict):
            line = _line_of(text, None, table)
            raise PolicyError("unknown top-level key; keys belong in tables", source=source, line=line, field=table)
        if table == "writers":
            for key, value in entries.items():
                if not isinstance(value, str):
                    raise fail(f"expected an authority level, got {_brief(value)}", table, key)
                if not key or "*" in key[:-1] or _bad_name(key):
                    raise fail(
                        f"invalid writer {_brief(key)}: an actor id, or a prefix ending in '*'"
                        f" ({_NAME_RULE})",
                        table, key,
                    )
                writers[key] = value
            continue
        if table not in _POLICY_SCHEMA:
            raise fail(f"unknown table [{table}]", table)
        for key, value in entries.items():
            expected = _POLICY_SCHEMA[table].get(key)
            if expected is None:
                raise fail(f"unknown key {_brief(key)}", table, key)
            if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
                raise fail(f"expected {_type_name(expected)}, got {_brief(value)}", table, key)
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
                f"unknown {table} level {_brief(default)}"
                if written
                else f"the ladder lacks the built-in default {_brief(default)}: set {table}.default"
            )
            raise fail(message, table, "default" if written else "ladder")
    for key, level in writers.items():
        if level not in authority_ladder:
            raise fail(f"unknown authority level {_brief(level)}", "writers", key)
    writer_default = values.get("authority.writer_default")
    if writer_default is not None and writer_default not in authority_ladder:
        raise fail(f"unknown authority level {_brief(writer_default)}", "authority", "writer_default")
    over_claim = values.get("authority.over_claim", "cap")
    if over_claim not in ("cap", "refuse"):
        raise fail(f"expected 'cap' or 'refuse', got {_brief(over_claim)}", "authority", "over_claim")
    skew = values.get("store.clock_skew_seconds", DEFAULT_CLOCK_SKEW)
    problem = _skew_problem(skew)
    if problem is not None:  # said here too, so that the error names the policy's file
        raise fail(problem, "store", "clock_skew_seconds")
    erasure = values.get("erasure.authority")
    if erasure is not None and erasure not in authority_ladder:
        raise fail(f"unknown authority level {_brief(erasure)}", "erasure", "authority")
    mode = values.get("dependencies.mode", base.dependency_mode)
    if mode not in ("exclude", "flag", "recompute"):
        raise fail(
            f"expected 'exclude', 'flag' or 'recompute', got {_brief(mode)}", "dependencies", "mode"
        )
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
        erasure_authority=erasure,
    )


def _ladder(value: Any, default: tuple[str, ...], fail: Any, table: str) -> tuple[str, ...]:
    if value is None:
        return default
    if not value:
        raise fail("a ladder needs at least one level", table, "ladder")
    if len(value) > MAX_LEVELS:
        raise fail(f"a ladder has at most {MAX_LEVELS} levels, got {len(value)}", table, "ladder")
    for item in value:
        if not isinstance(item, str) or not item or _bad_name(item):
            raise fail(f"ladder levels must be {_NAME_RULE}, got {_brief(item)}", table, "ladder")
    if len(set(value)) != len(value):
        raise fail("a ladder lists a level twice", table, "ladder")
    return tuple(value)


_NAME_RULE = f"non-empty strings of at most {MAX_NAME_BYTES} bytes, no control character"


def _bad_name(name: str) -> bool:
    """A level or writer pattern too long, or holding a control or invisible character."""
    return len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES or (
        unsafe_character(name) is not None
    )


def _brief(value: Any) -> str:
    """A value for an error message, at most 80 characters: a nested table or list is named,
    never walked (a TOML file can nest dotted keys thousands deep)."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _type_name(expected: type | tuple[type, ...]) -> str:
    names: dict[object, str] = {
        list: "a list", str: "a string", bool: "true or false", int: "an integer"
    }
    return names.get(expected, str(expected))


MAX_KEY_PARTS = 32
"""Dots on one line outside strings and comments: a policy's keys have two parts, and
tomllib's work on a dotted key grows with the square of its parts."""
# what may hold a dot that is not a key's: strings (multi-line ones first) and comments
_NOT_KEYS = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*')


def _check_dotted_keys(text: str, *, source: str) -> None:
    """Refuse, before tomllib sees it, a line whose key has more than MAX_KEY_PARTS parts."""
    if text.count(".") <= MAX_KEY_PARTS:
        return
    bare = _NOT_KEYS.sub(lambda m: "\n" * m.group().count("\n"), text)
    for number, line in enumerate(bare.split("\n"), start=1):
        if line.count(".") > MAX_KEY_PARTS:
            raise PolicyError(
                f"invalid TOML: a key of more than {MAX_KEY_PARTS} dotted parts",
                source=source, line=number,
            )


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
