"""Options shared by several commands, as decorators, and their parsing into gamma values."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from gamma.core.canonical import parse_ts
from gamma.core.errors import ActorError, InputError, PolicyError
from gamma.core.events import decode_json, parse_actor
from gamma.core.model import Actor
from gamma.core.policy import DEFAULT_POLICY, Policy, load_policy

__all__ = [
    "log_argument",
    "actor_option",
    "at_option",
    "policy_option",
    "read_actor",
    "read_at",
    "read_policy",
]

F = TypeVar("F", bound=Callable[..., Any])


def log_argument(func: F) -> F:
    return click.argument("log", metavar="LOG", type=click.Path(dir_okay=False))(func)


def actor_option(func: F) -> F:
    return click.option(
        "--actor",
        "actor",
        required=True,
        metavar="ACTOR",
        help='Who asks: a JSON file, or inline JSON starting with "{".',
    )(func)


def at_option(func: F) -> F:
    return click.option(
        "--at", "at", required=True, metavar="TS", help="RFC 3339 time with offset, e.g. 2026-03-02T10:00:00Z."
    )(func)


def policy_option(func: F) -> F:
    return click.option(
        "--policy",
        "policy_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Policy TOML (default: the store's policy, else the built-in default).",
    )(func)


def read_policy(path: str | None, fallback: Policy | None = None) -> Policy:
    if path is None:
        return fallback or DEFAULT_POLICY
    if not Path(path).is_file():
        raise PolicyError("no such policy file", source=path)
    return load_policy(path)


def read_actor(text: str, policy: Policy) -> Actor:
    """An actor from inline JSON (starting with ``{``) or from a JSON file."""
    if text.lstrip().startswith("{"):
        source = "--actor"
        body = text
    else:
        source = text
        try:
            body = Path(text).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ActorError(f"cannot read actor file: {exc}", source=source) from None
    try:
        obj = decode_json(body, source=source)
    except InputError as exc:
        raise ActorError(exc.message, source=source, field=exc.field) from None
    return parse_actor(obj, policy=policy, source=source)


def read_at(text: str) -> datetime:
    try:
        return parse_ts(text)
    except ValueError as exc:
        raise InputError(str(exc), source="--at") from None

