"""The chain key of a keyed store as the CLI reads it: ``--key-file`` (or, where that names
another key, ``--chain-key-file``), else ``$GAMMA_CHAIN_KEY``; shared by the commands that
write a store and those that serve one (``verify``, ``append``, ``checkpoint``, ``prove``)."""

from __future__ import annotations

import os

import click

from gamma.cli.options import Command
from gamma.core.terms.errors import InputError
from gamma.storage.store import KEY_ENV, check_key, read_key_file

__all__ = ["KEY_ENV", "chain_key_option", "key_option", "read_key"]




def key_option(func: Command) -> Command:
    return click.option(
        "--key-file",
        "key_file",
        type=click.Path(dir_okay=False),
        default=None,
        help=f"File whose bytes (whitespace stripped, >= 16) key the HMAC chain; else ${KEY_ENV}.",
    )(func)


def chain_key_option(func: Command) -> Command:
    """``--chain-key-file``: a keyed store's chain key, for commands whose ``--key-file`` is
    another key (``checkpoint``'s signer) or that serve a store (``prove``)."""
    return click.option(
        "--chain-key-file",
        "chain_key_file",
        type=click.Path(dir_okay=False),
        default=None,
        help=f"A keyed store's chain key (as verify's --key-file), checked before the store is"
        f" served; else ${KEY_ENV}.",
    )(func)


def read_key(path: str | None) -> bytes | None:
    """The chain key from a key file (read bounded: ``/dev/zero`` is no key), else from
    ``GAMMA_CHAIN_KEY``, else None."""
    if path is not None:
        return read_key_file(path)
    text = os.environ.get(KEY_ENV, "")
    if not text.strip():
        return None
    try:
        return check_key(text.encode("utf-8"))
    except InputError as exc:
        raise InputError(exc.message, source=KEY_ENV) from None
