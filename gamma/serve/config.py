"""What one ``gamma serve`` is told at start: read once per worker, the same in every worker.

uvicorn starts each worker from an import string, so the configuration cannot be
handed over as an object: the CLI puts it, as JSON, in ``GAMMA_SERVE_CONFIG``,
which the workers inherit, and each worker's ``factory`` reads it there (an
environment variable, not a file: nothing is left behind however the server
stops). No secret is in it: the chain key is named by its file (or read from
``GAMMA_CHAIN_KEY``, which the workers inherit too), the signer key likewise.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlsplit

import attrs

from gamma.core.terms.errors import InputError

__all__ = ["CONFIG_ENV", "ServeConfig", "DEFAULT_MAX_BODY", "DEFAULT_TIMEOUT", "DEFAULT_FRESH_WAIT",
           "DEFAULT_MAX_CONNECTIONS", "DEFAULT_KEEP_ALIVE"]

#: The environment variable holding the configuration (JSON) a worker reads.
CONFIG_ENV = "GAMMA_SERVE_CONFIG"

DEFAULT_MAX_BODY = 1 << 20  # bytes of one request body
DEFAULT_TIMEOUT = 10.0  # seconds one request may take
DEFAULT_FRESH_WAIT = 2.0  # seconds a read waits for an at-least-as-fresh token
DEFAULT_MAX_CONNECTIONS = 1024  # open connections (or requests in flight) of one worker; then 503
DEFAULT_KEEP_ALIVE = 5  # seconds an idle keep-alive connection is held after its last answer


def _positive(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise InputError(f"must be positive, not {value!r}", field=attribute.name)


def _public_url(_instance: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    """An absolute http(s) URL with a host and neither query nor fragment (a base to append to)."""
    if value is None:
        return
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in {"http", "https"} or not parts.netloc \
            or parts.query or parts.fragment:  # fmt: skip
        raise InputError(f"must be an http(s) URL without query or fragment, not {value!r}",
                         field=attribute.name)


@attrs.frozen(kw_only=True)
class ServeConfig:
    """The store served, the callers file, and the limits every request is held to.

    ``fresh_wait`` bounds how long a read waits for another worker's write to
    reach it (``Gamma-At-Least-As-Fresh``); ``timeout`` bounds the whole request.
    ``max_connections`` and ``keep_alive`` bound what idle or slow clients hold (uvicorn's
    ``limit_concurrency``: past it a request is 503; ``timeout_keep_alive``).
    ``public_url`` is the base the AuthZEN discovery document names (behind a proxy);
    without it, the request's own scheme and ``Host``.
    """

    store: str
    callers: str
    max_body: int = attrs.field(default=DEFAULT_MAX_BODY, validator=_positive)
    timeout: float = attrs.field(default=DEFAULT_TIMEOUT, validator=_positive)
    fresh_wait: float = attrs.field(default=DEFAULT_FRESH_WAIT, validator=_positive)
    signer_key: str | None = None
    chain_key_file: str | None = None
    public_url: str | None = attrs.field(default=None, validator=_public_url)
    max_connections: int = attrs.field(default=DEFAULT_MAX_CONNECTIONS, validator=_positive)
    keep_alive: int = attrs.field(default=DEFAULT_KEEP_ALIVE, validator=_positive)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, obj: Any, *, source: str = "<config>") -> ServeConfig:
        if not isinstance(obj, dict):
            raise InputError("the serve configuration must be a JSON object", source=source)
        names = {a.name for a in attrs.fields(cls)}
        for name in sorted(set(obj) - names):
            raise InputError("unknown configuration field", source=source, field=name)
        for name in ("store", "callers"):
            if not isinstance(obj.get(name), str):
                raise InputError("must be a path (a string)", source=source, field=name)
        return cls(**obj)

    @classmethod
    def from_env(cls) -> ServeConfig:
        """The configuration the CLI left for this worker in ``$GAMMA_SERVE_CONFIG``."""
        text = os.environ.get(CONFIG_ENV)
        if not text:
            raise InputError("no serve configuration in the environment", source=CONFIG_ENV)
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise InputError(f"not JSON: {exc}", source=CONFIG_ENV) from None
        return cls.from_dict(obj, source=CONFIG_ENV)
