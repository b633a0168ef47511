"""Options shared by several commands, as decorators, and their parsing into gamma values.

``-`` stands for standard input wherever a LOG, an ``--actor`` or a ``--response``
is read; standard input is read once, so only one of them may be ``-``. ``--at now``
is resolved here, once, at the edge (``GAMMA_NOW`` pins it for tests), and the
commands print the time they used.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from gamma.core.reading.events import decode_lines, parse_actor
from gamma.core.reading.reader import STDIN, STDIN_SOURCE, read, read_bounded, read_lines
from gamma.core.reading.strictjson import decode_json
from gamma.core.terms.canonical import parse_ts
from gamma.core.terms.errors import ActorError, InputError, PolicyError
from gamma.core.terms.model import Actor, Assert, Event, Grant, Revoke
from gamma.core.terms.policy import DEFAULT_POLICY, Policy, load_policy
from gamma.data import POLICY_NAMES, policy_by_name
from gamma.storage import SQLITE_HEADER  # the package only: a JSONL log never loads sqlite

__all__ = [
    "Command",
    "NOW_ENV",
    "STDIN",
    "STDIN_SOURCE",
    "log_argument",
    "one_stdin",
    "actor_option",
    "at_option",
    "policy_option",
    "read_actor",
    "read_at",
    "read_log",
    "read_policy",
    "read_stdin",
    "read_bytes",
    "read_text",
    "output_path",
    "unknown_names",
    "NO_TENANT",
    "write_lines",
]

#: A click command's function, which an option decorator hands back with the option added
Command = TypeVar("Command", bound=Callable[..., Any])

NOW_ENV = "GAMMA_NOW"


def log_argument(func: Command) -> Command:
    return click.argument(
        "log", metavar="LOG", type=click.Path(dir_okay=False, allow_dash=True)
    )(func)


def actor_option(func: Command) -> Command:
    return click.option(
        "--actor",
        "actor",
        required=True,
        metavar="ACTOR",
        help='Who asks: a JSON file, - for stdin, or inline JSON starting with "{".',
    )(func)


def at_option(func: Command) -> Command:
    return click.option(
        "--at",
        "at",
        required=True,
        metavar="TS",
        help=f"RFC 3339 time with offset (2026-03-02T10:00:00Z), or now (${NOW_ENV} pins it).",
    )(func)


def policy_option(func: Command) -> Command:
    return click.option(
        "--policy",
        "policy_path",
        default=None,
        metavar="NAME|FILE",
        help=f"A named policy ({', '.join(POLICY_NAMES)}) or a policy TOML file"
        " (default: the store's policy, else the built-in default).",
    )(func)


def read_policy(path: str | None, fallback: Policy | None = None) -> Policy:
    """``--policy``: a named policy, else a TOML file (a file wins only when it is a path)."""
    if path is None:
        return fallback or DEFAULT_POLICY
    if path in POLICY_NAMES and not Path(path).is_file():
        return policy_by_name(path)
    if not Path(path).is_file():
        raise PolicyError(
            f"no such policy file, and not a named policy ({', '.join(POLICY_NAMES)})",
            source=path,
        )
    return load_policy(path)


def one_stdin(*given: tuple[str, str | None]) -> None:
    """Refuse, before reading anything, a command line where two inputs are ``-``."""
    dashes = [what for what, value in given if value == STDIN]
    if len(dashes) > 1:
        raise click.UsageError(f"{' and '.join(dashes)} {'both' if len(dashes) == 2 else 'all'} read -:"
            " only one may be standard input")


def read_stdin(what: str) -> bytes:
    """Standard input, read once: a second ``-`` in the same command is a usage error."""
    ctx = click.get_current_context()
    claimed = ctx.meta.setdefault("gamma.stdin", [])
    if claimed:
        raise click.UsageError(f"{claimed[0]} and {what} both read -: only one may be standard input")
    claimed.append(what)
    with click.open_file("-", "rb") as stream:
        return read_bounded(stream, source=STDIN_SOURCE)  # no line held past the limit


def read_bytes(value: str, what: str) -> bytes:
    """The bytes of a file or, for ``-``, of standard input, unchanged (no newline translation:
    a signed note's CR reaches its rules), no line read past the limit (``/dev/zero``)."""
    if value == STDIN:
        return read_stdin(what)
    try:
        with Path(value).open("rb") as stream:
            return read_bounded(stream, source=value)
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", source=value) from None


def read_text(value: str, what: str) -> tuple[str, str]:
    """(text, source) of a file or, for ``-``, of standard input, decoded as UTF-8."""
    source = STDIN_SOURCE if value == STDIN else value
    raw = read_bytes(value, what)
    try:
        return raw.decode("utf-8"), source
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8: {exc.reason} at byte {exc.start}", source=source) from None


def read_log(
    log: str, policy: Policy | None, *, resolve_at: datetime | None = None
) -> tuple[Sequence[Event], Policy]:
    """A LOG (a JSONL file, a store, or - for JSONL on stdin) and the policy to resolve it under.
    A command that reads a file only to resolve it at one time says so (``resolve_at``)."""
    if log != STDIN:
        if _is_jsonl_file(log):  # the core reads it: no storage layer, no sqlite-utils loaded
            chosen = policy or DEFAULT_POLICY
            return read(Path(log), policy=chosen, at=resolve_at), chosen
        from gamma.storage.sources import events_and_policy  # a store (or no such file)

        return events_and_policy(log, policy)
    raw = read_stdin("LOG")
    if raw.startswith(SQLITE_HEADER):
        raise InputError("a store cannot be read from standard input: name its file", source=STDIN_SOURCE)
    chosen = policy or DEFAULT_POLICY
    lines = decode_lines(raw, source=STDIN_SOURCE)
    return read_lines(lines, policy=chosen, name=STDIN_SOURCE), chosen


def _is_jsonl_file(path: str) -> bool:
    """A readable, non-empty regular file that does not start with the SQLite header."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(16)
    except OSError:
        return False
    return bool(head) and head != SQLITE_HEADER and Path(path).is_file()


def read_actor(text: str, policy: Policy) -> Actor:
    """An actor from inline JSON (starting with ``{``), from a JSON file, or from stdin (``-``)."""
    if text.lstrip().startswith("{"):
        source = "--actor"
        body = text
    else:
        try:
            body, source = read_text(text, "--actor")
        except InputError as exc:
            raise ActorError(f"cannot read actor: {exc.message}", source=exc.source) from None
    try:
        obj = decode_json(body, source=source)
    except InputError as exc:
        raise ActorError(exc.message, source=source, field=exc.field) from None
    return parse_actor(obj, policy=policy, source=source)


def read_at(text: str, *, flag: str = "--at") -> datetime:
    """``--at`` (or the time option ``flag``): an RFC 3339 time, or ``now`` (``GAMMA_NOW`` when
    set, else the clock, in UTC)."""
    source = flag
    if text == "now":
        pinned = os.environ.get(NOW_ENV)
        if pinned is None:
            return datetime.now(UTC)
        text, source = pinned, NOW_ENV
    try:
        return parse_ts(text)
    except ValueError as exc:
        raise InputError(str(exc), source=source) from None


def write_lines(path: str, lines: Iterable[str], *, flag: str) -> int:
    """Write ``lines`` joined by newlines as they come (never the whole text in memory), under a
    temporary name then renamed, so a failure leaves no half file; the bytes written."""
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial")
    written = 0
    try:
        with partial.open("wb") as out:
            for number, line in enumerate(lines):
                data = (line if number == 0 else "\n" + line).encode("utf-8")
                out.write(data)
                written += len(data)
        partial.replace(target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {exc.strerror or exc}", source=flag) from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return written


def output_path(path: str, *, flag: str) -> None:
    """Refuse, before any work, an output file that has nowhere to go: its folder is missing
    (or is a file), or the path is a folder."""
    target = Path(path)
    if not target.parent.is_dir():
        raise InputError(f"no such folder {str(target.parent)!r}", source=flag)
    if target.is_dir():
        raise InputError(f"{path} is a folder: name a file", source=flag)


#: The warning for a tenant named on the command line that no event of the log has.
NO_TENANT = "tenant {tenant!r} occurs nowhere in the log: nothing is admitted to its actors"


def unknown_names(
    events: Sequence[Event], *, tenant: str | None = None, actors: Sequence[str] = (),
    keys: Sequence[str] = (), facts: Sequence[str] = (),
) -> list[str]:
    """What a command line named that occurs nowhere in the log, one sentence each (in the
    order named): an empty result for such a name is honest, but rarely what was meant. A
    known tenant is found at its first event; actors, keys and facts are read only when named.
    An actor occurs where it writes an event, or an event names it (``visibility.actors``,
    a grant's or revoke's ``to_actor``)."""
    found = []
    if tenant is not None and not any(event.tenant == tenant for event in events):
        found.append(NO_TENANT.format(tenant=tenant))
    if actors:
        known = _known_actors(events, set(actors))
        found += [f"actor {a!r} occurs nowhere in the log: no event is written by it or names it"
                  for a in dict.fromkeys(actors) if a not in known]  # fmt: skip
    if keys:
        known = {event.key for event in events if isinstance(event, Assert)}
        found += [f"key {k!r} occurs nowhere in the log" for k in dict.fromkeys(keys) if k not in known]
    if facts:
        known = {event.fact for event in events if isinstance(event, Assert)}
        found += [f"fact {f!r} occurs nowhere in the log" for f in dict.fromkeys(facts) if f not in known]
    return found


def _known_actors(events: Sequence[Event], named: set[str]) -> set[str]:
    """Those of ``named`` the log holds: as a writer, else named by an event (an assert's
    ``visibility.actors``, a grant's or revoke's ``to_actor``). Set comprehensions, the second
    pair only when a name is still missing (a few ms at 100k events)."""
    known = named & {event.actor for event in events}
    if known == named:
        return known
    listed = {a for e in events if type(e) is Assert and e.visibility is not None
              for a in e.visibility.actors or ()}  # fmt: skip
    given = {e.to_actor for e in events if type(e) is Grant or type(e) is Revoke}
    return named & (known | listed | given)
