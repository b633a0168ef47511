"""The HTTP face of ``gamma serve``: a Starlette app on uvicorn.

Why Starlette on uvicorn: both are small, typed, widely deployed ASGI pieces with no
framework magic between a request and the code that answers it (every route here is a
plain async function), uvicorn brings TLS, worker processes and graceful shutdown
(SIGTERM: stop accepting, finish what is in flight, run the shutdown). The serve extra
adds uvicorn's compiled HTTP parser (httptools) and event loop (uvloop), which uvicorn
picks when they are installed and does without when not: they answer an empty request in
~0.6 ms rather than ~0.8 ms at one client and about twice as many per CPU second as pure
Python's h11 and asyncio. Under mTLS the connection is h11's (``gamma.serve.tls``: the
client certificate reaches the scope there).

Every route but ``/healthz``, ``/readyz`` and the AuthZEN discovery document needs a
caller (``gamma.serve.identity``): none or a bad one is 401 with ``WWW-Authenticate:
Bearer``; ``/metrics`` needs an auditor (403 otherwise: it counts every tenant's
decisions). Bodies are held to ``max_body`` bytes (413), requests to ``timeout`` seconds
(504), and every error is ``{"error": {"code", "message"}}`` without a traceback (an
unexpected one is a 500 whose message says nothing; the traceback goes to the server's
log). Every response to an authenticated caller carries ``Gamma-Token``, the log this
worker held when it answered (for a decision: the log it decided over); no other response
does (the position tells how much every tenant wrote). Every response carries a request's
``X-Request-ID`` back (AuthZEN 1.0 §2.5.1). A POST's body is JSON and says so: a
``Content-Type`` other than ``application/json`` (parameters allowed) is 400 (AuthZEN 1.0
§2.4.3).

Graceful shutdown and the change feed: uvicorn, on SIGTERM, stops accepting, waits for
open connections to finish (up to its graceful timeout) and only then runs the app's
lifespan shutdown, so an app hears of the shutdown through ASGI only after every
watcher's endless stream was waited for. The app therefore chains a handler onto the
SIGTERM and SIGINT handlers uvicorn installed (at lifespan startup, on the main thread)
that ends the open feeds (``watch.stop``) and then calls uvicorn's: a stream closes at
once and the worker exits without waiting its timeout out.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import re
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import FrameType
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gamma.core.reading.strictjson import decode_json
from gamma.core.terms.canonical import MAX_SAFE_INT, canonical_bytes, compact_json
from gamma.core.terms.errors import InputError, StoreBusyError
from gamma.core.terms.limits import MAX_DEPTH
from gamma.serve import authzen, watch
from gamma.serve.config import CONFIG_ENV, ServeConfig
from gamma.serve.errors import DecisionLogError, Forbidden, ServeError
from gamma.serve.freshness import FreshnessToken
from gamma.serve.identity import Verifier, authenticate
from gamma.serve.metrics import CONTENT_TYPE
from gamma.serve.service import Answer, Service, error_body
from gamma.serve.tls import client_certificate, ssl_options
from gamma.serve.types import Caller
from gamma.storage.decisions import DecisionLogFailure

try:  # the serve extra's compiled HTTP parser; without it uvicorn speaks h11
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    HTTPTOOLS = True
except ImportError:  # pragma: no cover - the extra installs it
    HTTPTOOLS = False

__all__ = [
    "create_app", "factory", "run_server", "strict_or_none", "TooLarge", "ROUTES", "TOKEN", "FRESH", "EXACT",
    "WORKER_HEALTHCHECK", "HTTP_PROTOCOL", "OneSendTransport",
]

log = logging.getLogger("gamma.serve")

TOKEN = "Gamma-Token"
FRESH = "Gamma-At-Least-As-Fresh"
EXACT = "Gamma-At-Exact"
JSON = "application/json"
REQUEST_ID = b"x-request-id"
#: set in a request's scope once its caller is authenticated: only then is the token sent
AUTHENTICATED = "gamma.authenticated"



class TooLarge(ServeError):
    """A request body over the configured limit (413)."""

    status = 413


class Timeout(ServeError):
    """A request that ran past the configured time limit (504)."""

    status = 504


def failure(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of an error: its own message for gamma's refusals, and a
    message that says nothing for anything else (the traceback goes to the log, never out)."""
    if isinstance(exc, DecisionLogFailure):
        exc = DecisionLogError(f"the decision log could not be written: {exc}")
    if isinstance(exc, ServeError):
        code = "decision_log_unavailable" if isinstance(exc, DecisionLogError) else _snake(
            type(exc).__name__)
        return exc.status, error_body(code, str(exc))
    if isinstance(exc, StoreBusyError):
        return 503, error_body("store_busy", str(exc))
    if isinstance(exc, InputError):
        return 400, error_body("invalid_request", str(exc))
    log.error("unexpected error", exc_info=exc)
    return 500, error_body("internal", "internal error")


def _snake(name: str) -> str:
    """``NotFresh`` -> ``not_fresh``: a refusal's code from its class."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


def _json(status: int, body: Mapping[str, Any], token: FreshnessToken | None = None, *,
          floatless: bool = False) -> Response:
    """A JSON answer (canonical layout), with its token, and the Bearer challenge on a 401.
    ``floatless``: the body holds no float (an AuthZEN decision), so it is encoded in C, the
    same bytes as ``compact_json`` gives (``canonical_bytes``)."""
    out: dict[str, str] = {}
    if token is not None:
        out[TOKEN] = token.encode()
    if status == 401:
        out["WWW-Authenticate"] = 'Bearer realm="gamma"'
    data = canonical_bytes(body) if floatless else compact_json(body).encode("utf-8")
    return Response(data, status_code=status, media_type=JSON, headers=out)


#: route path -> (methods, whether it needs a caller); the metrics' route label is the path
ROUTES: dict[str, tuple[tuple[str, ...], bool]] = {
    "/healthz": (("GET",), False),
    "/readyz": (("GET",), False),
    "/metrics": (("GET",), True),
    "/.well-known/authzen-configuration": (("GET",), False),
    **{path: (("POST",), True) for path in authzen.ENDPOINTS.values()},
    "/v1/resolve": (("POST",), True),
    "/v1/check": (("POST",), True),
    "/v1/explain": (("POST",), True),
    "/v1/append": (("POST",), True),
    "/v1/prove/inclusion": (("GET",), True),
    "/v1/checkpoint": (("GET",), True),
    "/v1/watch": (("GET",), True),
}


#: a JSON string (escapes skipped) and, when it is an object's key, the colon after it: a scan
#: from a string's opening quote that consumes whole strings never starts inside one
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"(\s*:)?')
#: an escape of a surrogate (backslash, u, D800-DFFF): the strict reader checks for lone ones
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def strict_or_none(text: str) -> Any:
    """``text`` decoded by orjson when that is surely what ``decode_json`` returns for it, else
    None (then ``decode_json`` reads it: it refuses, naming the field, or returns the same).

    orjson refuses what is no JSON, NaN and Infinity, and integers past 64 bits; what it
    accepts that the strict reader refuses is found here: a float, an integer past
    ±(2^53-1), containers nested past ``MAX_DEPTH``, a repeated key (orjson keeps the last:
    the objects then hold fewer members than the text names keys) and a surrogate escape
    (left to the strict reader whole). For a batch of 100 evaluations the strict reader
    takes ~0.8-0.9 ms of CPU (its depth scan walks every token in Python), this ~0.25-0.45
    ms; for one evaluation both take ~10-20 µs.
    """
    if _ESCAPED_SURROGATE.search(text) is not None:
        return None
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    members, depth, level = 0, 0, [obj]
    while level:  # one nesting level at a time: its containers' members are the next level
        depth += 1
        below: list[Any] = []
        for node in level:
            kind = type(node)
            if kind is dict:
                members += len(node)
                below.extend(node.values())
            elif kind is list:
                below.extend(node)
            elif kind is float or (kind is int and not -MAX_SAFE_INT <= node <= MAX_SAFE_INT):
                return None
            else:
                continue
            if depth > MAX_DEPTH:
                return None
        level = below
    keys = sum(1 for colon in _STRING.findall(text) if colon)
    return obj if keys == members else None


class _Guard:
    """The outermost layer: metrics by route and status, ``Gamma-Token`` on every response
    to an authenticated caller, and a JSON 500 for anything that escaped (never Starlette's
    text page)."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = next((v for k, v in scope.get("headers", ()) if k.lower() == REQUEST_ID), None)
        path = scope.get("path", "")
        route = path if path in ROUTES else "other"
        status = 500
        sent = False

        async def guarded(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status, sent = message["status"], True
                headers = list(message.get("headers", []))
                token = self.service.token if scope.get(AUTHENTICATED) else None
                if token is not None and not any(k.lower() == b"gamma-token" for k, _ in headers):
                    headers.append((b"gamma-token", token.encode().encode("ascii")))
                if request_id is not None:  # echoed as sent (AuthZEN 1.0 §2.5.1)
                    headers.append((REQUEST_ID, request_id))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, guarded)
        except Exception as exc:  # noqa: BLE001 - the last resort: a JSON 500, never a traceback
            if sent:
                raise
            status, body = failure(exc)
            await _json(status, body)(scope, receive, guarded)  # the guard adds the token
        finally:
            self.service.metrics.observe(route, status, time.perf_counter() - started)


class _Api:
    """The routes' bodies, over one worker's service."""

    def __init__(self, config: ServeConfig, service: Service, verifier: Verifier | None) -> None:
        self.config = config
        self.service = service
        self.verifier = verifier

    # -- what every route shares ---------------------------------------------------------

    def route(self, path: str, run: Callable[[Request], Awaitable[Response]], *,
              limited: bool = True) -> Route:
        """``run`` behind authentication (where the route needs it), the time limit
        (``limited``) and the error mapping."""
        methods, private = ROUTES[path]

        async def endpoint(request: Request) -> Response:
            try:
                if private:
                    request.state.caller = self.caller(request)
                    request.scope[AUTHENTICATED] = True
                if not limited:
                    return await run(request)
                try:  # a deadline on this task (no task of its own, as wait_for would make)
                    async with asyncio.timeout(self.config.timeout):
                        return await run(request)
                except TimeoutError:
                    raise Timeout(f"the request took longer than {self.config.timeout:g} s") from None
            except Exception as exc:  # noqa: BLE001 - every error becomes its JSON answer
                status, body = failure(exc)
                known = request.scope.get(AUTHENTICATED)  # a 401 tells nothing of the log
                return _json(status, body, self.service.token if known else None)

        return Route(path, endpoint, methods=list(methods))

    def caller(self, request: Request) -> Caller:
        callers = self.service.callers
        if callers is None:
            raise ServeError("the server is starting")
        return authenticate(callers, request.headers.get("authorization"),
                            client_certificate(request.scope), verifier=self.verifier)

    async def body(self, request: Request) -> dict[str, Any]:
        """The request's JSON object (``Content-Type: application/json``, parameters allowed),
        read no further than the size limit."""
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != JSON:
            raise InputError(f"the body must be JSON, sent as Content-Type: {JSON}",
                             field="Content-Type")  # fmt: skip
        limit = self.config.max_body
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise TooLarge(f"the body is larger than {limit} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"the body is larger than {limit} bytes")
            chunks.append(chunk)
        try:
            text = b"".join(chunks).decode("utf-8") or "{}"
        except UnicodeDecodeError:
            raise InputError("the body is not UTF-8", source="body") from None
        obj = strict_or_none(text)
        if obj is None:  # refused, or not surely what the strict reader returns: it decides
            obj = decode_json(text, source="body")
        if not isinstance(obj, dict):
            raise InputError("the body must be a JSON object", source="body")
        # in the order the decision log keeps it (canonical: keys sorted), so a refusal that
        # names the first offending field names the same one when the log is replayed; no
        # float, unsafe integer or lone surrogate came through decode_json, so orjson's
        # canonical bytes are the canonical JSON, read back with every object's keys sorted
        result: dict[str, Any] = orjson.loads(canonical_bytes(obj))
        return result

    @staticmethod
    def tokens(request: Request) -> tuple[FreshnessToken | None, FreshnessToken | None]:
        fresh, exact = request.headers.get(FRESH), request.headers.get(EXACT)
        if fresh is not None and exact is not None:
            raise InputError(f"ask for {FRESH} or {EXACT}, not both", field=EXACT)
        return (None if fresh is None else FreshnessToken.decode(fresh, field=FRESH),
                None if exact is None else FreshnessToken.decode(exact, field=EXACT))

    @staticmethod
    def answer(answer: Answer, *, own: bool) -> Response:
        """A decision's response; gamma's own API bodies also carry the token."""
        body = answer.body
        if own and answer.status == 200:
            body = {**body, "token": answer.token.encode()}
        return _json(answer.status, body, answer.token, floatless=not own)

    # -- the routes ------------------------------------------------------------------------

    def decision(self, endpoint: str, *, own: bool) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            caller: Caller = request.state.caller
            body = await self.body(request)
            fresh, exact = self.tokens(request)
            answer = await self.service.decide(endpoint, caller, body, fresh=fresh, exact=exact)
            return self.answer(answer, own=own)

        return run

    async def append(self, request: Request) -> Response:
        body = await self.body(request)
        return self.answer(await self.service.append(request.state.caller, body), own=True)

    async def prove(self, request: Request) -> Response:
        event = request.query_params.get("event")
        if not event:
            raise InputError("give the event's id: ?event=ID", field="event")
        return self.answer(await self.service.prove(request.state.caller, event), own=True)

    async def checkpoint(self, request: Request) -> Response:
        return self.answer(await self.service.checkpoint(request.state.caller), own=True)

    async def watch(self, request: Request) -> Response:
        last = request.headers.get("last-event-id")
        since = watch.resume_token(request.query_params.get("since"), last)
        feed = await asyncio.wait_for(
            watch.watch_events(self.service, request.state.caller, since,
                               wait=self.service.fresh_wait,
                               field="Last-Event-ID" if last else "since"),
            self.config.timeout,
        )
        messages = (watch.encode_message(message) async for message in feed)
        # no cache keeps it, and no proxy (nginx: X-Accel-Buffering) holds messages back
        return StreamingResponse(messages, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def healthz(self, request: Request) -> Response:
        return _json(200, {"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        if not self.service.started:
            return _json(503, {"ready": False})
        await self.service.ready()  # the store answers; its position is for callers only
        return _json(200, {"ready": True})

    async def metrics(self, request: Request) -> Response:
        """Every tenant's decision counts and the log position: an auditor's (a scraper's
        credential is an auditor's token)."""
        caller: Caller = request.state.caller
        if not caller.auditor:
            raise Forbidden("the metrics are an auditor's")
        return Response(self.service.metrics.render(), media_type=CONTENT_TYPE)

    async def discovery(self, request: Request) -> Response:
        """The configured public URL, else the request's own scheme and ``Host`` (uvicorn
        runs without proxy headers: ``X-Forwarded-Proto`` is never trusted)."""
        return _json(200, authzen.discovery(self.config.public_url or str(request.base_url)))


async def _not_found(request: Request, exc: Exception) -> Response:
    """Starlette's 404 and 405 in the server's JSON shape."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
    detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
    return _json(status, error_body(code, detail))


def _chain_exit_signals(notify: Callable[[], None]) -> Callable[[], None]:
    """Run ``notify`` on the event loop when SIGTERM or SIGINT arrives, then the handler
    installed before (uvicorn's); returns what puts the handlers back. Only on the main
    thread (signals are delivered there) and only over a handler someone installed."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    previous: dict[int, Callable[[int, FrameType | None], Any]] = {}

    def handler(sig: int, frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(notify)
        previous[sig](sig, frame)

    for sig in (signal.SIGTERM, signal.SIGINT):
        prior = signal.getsignal(sig)
        if callable(prior):
            previous[sig] = prior
            signal.signal(sig, handler)

    def restore() -> None:
        for sig, prior in previous.items():
            if signal.getsignal(sig) is handler:
                signal.signal(sig, prior)

    return restore


def create_app(config: ServeConfig, *, verifier: Verifier | None = None,
               freeze_heap: bool = False) -> Starlette:  # fmt: skip
    """The app of one worker over ``config.store``; the store opens at the app's startup.

    ``verifier`` is the host's check of a bearer token the callers file does not list.
    ``freeze_heap``: the app owns its process (a worker ``factory`` made), so once the store
    is folded everything alive is moved out of the cyclic collector's reach (``gc.freeze``,
    as ``gamma.core.terms.collector`` leaves to the process's owner): at a million events
    that is tens of millions of objects that each collection of the oldest generation would
    walk again while requests wait.
    """
    service = Service.from_files(
        config.store, config.callers, fresh_wait=config.fresh_wait,
        signer_key=config.signer_key, chain_key_file=config.chain_key_file,
    )
    api = _Api(config, service, verifier)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await service.start()
        if freeze_heap:
            gc.collect()
            gc.freeze()
        restore = _chain_exit_signals(functools.partial(watch.stop, service))
        try:
            yield
        finally:
            restore()
            watch.stop(service)
            await service.stop()

    own = {"/v1/resolve": "resolve", "/v1/check": "check", "/v1/explain": "explain"}
    routes = [  # matched in this order: the AuthZEN decisions, the busiest, first
        *(api.route(path, api.decision(name, own=False))
          for name, path in authzen.ENDPOINTS.items()),
        api.route("/healthz", api.healthz, limited=False),
        api.route("/readyz", api.readyz),
        api.route("/metrics", api.metrics),
        api.route("/.well-known/authzen-configuration", api.discovery),
        *(api.route(path, api.decision(name, own=True)) for path, name in own.items()),
        api.route("/v1/append", api.append),
        api.route("/v1/prove/inclusion", api.prove),
        api.route("/v1/checkpoint", api.checkpoint),
        api.route("/v1/watch", api.watch, limited=False),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(_Guard, service=service)],
        exception_handlers={HTTPException: _not_found},
    )
    app.state.service = service
    return app


def factory() -> Starlette:
    """The app of a worker uvicorn started: its configuration is in ``$GAMMA_SERVE_CONFIG``
    (``run_server`` puts it there)."""
    return create_app(ServeConfig.from_env(), freeze_heap=True)


class OneSendTransport:
    """A connection's transport whose writes within one turn of the event loop go out in one
    send: uvicorn writes a response's status line and headers, then its body, each with a
    send of its own, and on loopback each send costs the whole TCP path of both ends
    (~50 µs of this process's CPU on these cores, and a second segment to the client). Every
    other call reaches the transport as it is; a close sends what is held first."""

    __slots__ = ("_transport", "_loop", "_held")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        if self._held is None:
            self._held = [data]
            self._loop.call_soon(self._send)
        else:
            self._held.append(data)

    def _send(self) -> None:
        held, self._held = self._held, None
        if held and not self._transport.is_closing():
            self._transport.write(b"".join(held))

    def close(self) -> None:
        self._send()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


if HTTPTOOLS:

    class OneSendHttpTools(HttpToolsProtocol):
        """uvicorn's httptools protocol answering each response in one send (``OneSendTransport``);
        flow control keeps the transport itself."""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.transport = OneSendTransport(transport, self.loop)  # type: ignore[assignment]

    HTTP_PROTOCOL: Any = OneSendHttpTools
else:  # pragma: no cover - the extra installs httptools
    HTTP_PROTOCOL = "auto"


#: Seconds a worker of ``--workers N`` may leave uvicorn's health check unanswered before
#: uvicorn kills it and starts another (uvicorn's default: 5). A worker answers from a thread
#: of its own, which needs the GIL and the CPU: while the worker folds a large store (a
#: million events: minutes on a busy machine) it may not answer within 5 s, and uvicorn then
#: kills it and starts another that folds from the start again, without end (seen with
#: ``--workers 2`` at 1M events on two busy cores); the setting needs uvicorn 0.37.
WORKER_HEALTHCHECK = 300


def run_server(
    config: ServeConfig, *, host: str = "127.0.0.1", port: int = 8080, workers: int = 1,
    tls_cert: str | None = None, tls_key: str | None = None, tls_client_ca: str | None = None,
) -> None:
    """Serve until SIGTERM or SIGINT (then finish what is in flight, up to the time limit).

    uvicorn starts each worker from the import string ``gamma.serve.app:factory``; the
    configuration reaches it in ``$GAMMA_SERVE_CONFIG``, which the workers inherit.
    The event loop is uvicorn's ``auto`` (uvloop when installed, else asyncio); HTTP is
    httptools answering each response in one send (``OneSendHttpTools``), else h11; under
    mTLS the h11 protocol that hands the client certificate to the app. Proxy headers are off: no ``X-Forwarded-*`` changes the scheme or client address.
    """
    tls = ssl_options(tls_cert, tls_key, tls_client_ca)
    if tls_client_ca is None:  # no client certificate to hand over: any parser will do
        tls.pop("http", None)
    os.environ[CONFIG_ENV] = config.to_json()
    uvicorn.run(
        "gamma.serve.app:factory", factory=True, host=host, port=port, workers=workers,
        lifespan="on", access_log=False, server_header=False, log_level="warning",
        timeout_graceful_shutdown=max(1, round(config.timeout)), proxy_headers=False,
        limit_concurrency=config.max_connections, timeout_keep_alive=config.keep_alive,
        **{"http": HTTP_PROTOCOL, "loop": "auto", **tls},
        timeout_worker_healthcheck=WORKER_HEALTHCHECK,
    )
