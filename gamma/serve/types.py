"""The shapes every module of the server shares: who calls, and what a handler reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol

import attrs

from gamma.core.incremental.engine import Decision
from gamma.core.resolving.resolution import Resolution
from gamma.core.terms.model import Actor
from gamma.core.terms.policy import Policy

__all__ = ["Caller", "View", "Handler"]


@attrs.frozen
class Caller:
    """An authenticated caller: the actor it acts as, and whether it may ask on behalf of others.

    ``name`` is the credential's label (logged in the decision log, never the secret).
    """

    name: str
    actor: Actor
    auditor: bool = False


class View(Protocol):
    """The log at one position, as a handler reads it: ``gamma.Engine`` and ``EngineState`` both are."""

    @property
    def policy(self) -> Policy: ...

    @property
    def head(self) -> str: ...

    def __len__(self) -> int: ...

    def resolve(
        self, actor: Actor | Mapping[str, object], at: datetime | str, *, keys: Iterable[str] | None = None
    ) -> Resolution: ...

    def check(
        self, actor: Actor | Mapping[str, object], at: datetime | str, facts: Iterable[str]
    ) -> dict[str, Decision]: ...


class Handler(Protocol):
    """One endpoint's decision: a pure function of the view, the caller, the time and the body.

    Returns the response body (JSON-ready). Raises ``gamma.InputError`` for a bad body
    (400), ``Forbidden`` (gamma.serve.errors) for what the caller may not ask (403).
    """

    def __call__(self, view: View, caller: Caller, at: datetime, body: Mapping[str, Any]) -> dict[str, Any]: ...


