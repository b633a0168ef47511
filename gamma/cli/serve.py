"""``gamma serve``: Γ as a decision point over HTTP for many agents (extra ``gamma-governance[serve]``)."""

from __future__ import annotations

import click

from gamma.audit.checkpoint import parse_signer
from gamma.cli.chainkey import KEY_ENV, read_key
from gamma.cli.logs import command
from gamma.cli.options import read_text
from gamma.core.terms.errors import InputError
from gamma.integrations import install_hint
from gamma.serve.config import (
    DEFAULT_FRESH_WAIT,
    DEFAULT_KEEP_ALIVE,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_TIMEOUT,
    ServeConfig,
)
from gamma.storage.store import Store, is_store

__all__ = ["serve_command"]


@click.command("serve")
@click.argument("store", metavar="STORE", type=click.Path(dir_okay=False))
@click.option("--callers", "callers", required=True, type=click.Path(dir_okay=False),
              help="The callers file (TOML): each caller's token or certificate digest and actor.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1),
              help="Worker processes, each with its own engine over the store.")
@click.option("--tls-cert", "tls_cert", default=None, type=click.Path(dir_okay=False),
              help="Serve HTTPS with this certificate (PEM; it may hold the key too).")
@click.option("--tls-key", "tls_key", default=None, type=click.Path(dir_okay=False),
              help="The certificate's private key (PEM).")
@click.option("--tls-client-ca", "tls_client_ca", default=None, type=click.Path(dir_okay=False),
              help="Require client certificates signed by this CA (mTLS).")
@click.option("--max-body", "max_body", default=DEFAULT_MAX_BODY, show_default=True,
              type=click.IntRange(min=1), metavar="BYTES", help="Largest request body (else 413).")
@click.option("--timeout", default=DEFAULT_TIMEOUT, show_default=True, type=click.FloatRange(min=0.001),
              metavar="S", help="Longest a request may take (else 504).")
@click.option("--fresh-wait", "fresh_wait", default=DEFAULT_FRESH_WAIT, show_default=True,
              type=click.FloatRange(min=0.001), metavar="S",
              help="Longest a read waits to reach a Gamma-At-Least-As-Fresh token (else 503).")
@click.option("--max-connections", "max_connections", default=DEFAULT_MAX_CONNECTIONS,
              show_default=True, type=click.IntRange(min=1), metavar="N",
              help="Open connections (or requests in flight) per worker; past it a request is 503.")
@click.option("--keep-alive", "keep_alive", default=DEFAULT_KEEP_ALIVE, show_default=True,
              type=click.IntRange(min=1), metavar="S",
              help="Close a keep-alive connection idle this long after its last answer.")
@click.option("--public-url", "public_url", default=None, metavar="URL",
              help="The server's URL as callers reach it (behind a proxy), named by the AuthZEN"
                   " discovery document; else the request's own scheme and Host.")
@click.option("--signer-key", "signer_key", default=None, type=click.Path(dir_okay=False),
              help="Sign /v1/checkpoint with this key (as gamma keygen writes).")
@click.option("--chain-key-file", "chain_key_file", default=None, type=click.Path(dir_okay=False),
              help=f"A keyed store's chain key; else ${KEY_ENV}.")
def serve_command(
    store: str, callers: str, host: str, port: int, workers: int, tls_cert: str | None,
    tls_key: str | None, tls_client_ca: str | None, max_body: int, timeout: float,
    fresh_wait: float, max_connections: int, keep_alive: int, public_url: str | None,
    signer_key: str | None, chain_key_file: str | None,
) -> None:
    """Serve STORE over HTTP: AuthZEN 1.0 and gamma's own API, for the callers of --callers.

    Every request is authenticated (a bearer token, or a client certificate with
    --tls-client-ca); the actor is the caller's. Every decision and write is recorded
    in STORE.decisions before it is answered. Stops on SIGTERM or Ctrl-C after the
    requests in flight.
    """
    with command("serve", store=store, workers=workers) as record:
        if not is_store(store):
            raise InputError("gamma serve serves a store (gamma init, gamma append)", source=store)
        try:
            # lazy: Starlette, uvicorn and prometheus_client are the optional extra
            from gamma.serve.app import run_server
            from gamma.serve.identity import Callers
        except ImportError as exc:
            raise click.UsageError(f"gamma serve needs the extra 'serve' ({exc.name} is not"
                                   f" installed): {install_hint('serve')}") from None
        key = read_key(chain_key_file)  # a bad key or callers file is an input error now,
        with Store.open(store, key=key) as opened:  # not a traceback in every worker
            if key is None and opened.claims_keyed:
                raise InputError(f"the store is keyed: give its chain key (--chain-key-file or"
                                 f" ${KEY_ENV})", source=store)
            policy = opened.policy
        if not len(Callers.load(callers, policy=policy)):  # only a host's verifier could serve
            raise InputError("the callers file lists no [[caller]]: no request could be"
                             " authenticated", source=callers, field="caller")
        if signer_key is not None:
            parse_signer(read_text(signer_key, "signer key")[0], source=signer_key)
        config = ServeConfig(store=store, callers=callers, max_body=max_body, timeout=timeout,
                             fresh_wait=fresh_wait, signer_key=signer_key,
                             chain_key_file=chain_key_file, public_url=public_url,
                             max_connections=max_connections, keep_alive=keep_alive)
        record.update(host=host, port=port)
        run_server(config, host=host, port=port, workers=workers, tls_cert=tls_cert, tls_key=tls_key,
            tls_client_ca=tls_client_ca)
