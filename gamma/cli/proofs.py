"""``gamma prove``, ``verify-proof``, ``checkpoint``, ``verify-checkpoint`` and ``keygen``.

Proofs print as canonical JSON; ``verify-proof`` and ``verify-checkpoint``
exit 0 when valid, 1 when not, 2 on bad input.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from gamma.audit.checkpoint import (
    check_log,
    generate_key,
    parse_signer,
    parse_verifier,
    sign_checkpoint,
    verify_checkpoint,
)
from gamma.cli import exit_with
from gamma.cli.chainkey import chain_key_option, read_key
from gamma.cli.logs import command
from gamma.cli.options import read_bytes, read_text
from gamma.core.reading.strictjson import decode_json
from gamma.core.terms.canonical import canonical_json
from gamma.core.terms.errors import InputError
from gamma.storage.proofs import (
    parse_consistency,
    parse_inclusion,
    prove_consistency,
    prove_inclusion,
    tree_head,
    verify_inclusion,
)

__all__ = [
    "check_checkpoint",
    "checkpoint_command",
    "keygen_command",
    "prove_group",
    "verify_checkpoint_command",
    "verify_proof_command",
]

_LOG = click.Path(dir_okay=False)


@click.group("prove")
def prove_group() -> None:
    """Print a Merkle proof (inclusion of an event, or consistency of two sizes) as JSON."""


@prove_group.command("inclusion")
@click.argument("log", metavar="STORE|LOG", type=_LOG)
@click.option("--event", "event", required=True, metavar="ID", help="The event's id.")
@click.option("--size", type=click.IntRange(min=0), default=None,
              help="Tree size (default: the whole log).")
@chain_key_option
def inclusion_command(log: str, event: str, size: int | None, chain_key_file: str | None) -> None:
    """Prove that event ID is in the tree of the first N events.

    A keyed store is served only with its chain key, and only if it verifies with it.
    """
    with command("prove inclusion", log=log, event_id=event) as record:
        proof = prove_inclusion(log, event, size=size, key=read_key(chain_key_file))
        record.update(tree_size=proof.tree_size, hashes=len(proof.path))
        click.echo(canonical_json(proof.to_dict()))


@prove_group.command("consistency")
@click.argument("log", metavar="STORE|LOG", type=_LOG)
@click.option("--from", "first", type=click.IntRange(min=0), required=True, help="Earlier size.")
@click.option("--to", "second", type=click.IntRange(min=0), default=None,
              help="Later size (default: the whole log).")
@chain_key_option
def consistency_command(log: str, first: int, second: int | None, chain_key_file: str | None) -> None:
    """Prove that the tree of the first --to events extends that of the first --from.

    A keyed store is served only with its chain key, and only if it verifies with it.
    """
    with command("prove consistency", log=log, first=first) as record:
        proof = prove_consistency(log, first, second=second, key=read_key(chain_key_file))
        record.update(second=proof.second, hashes=len(proof.path))
        click.echo(canonical_json(proof.to_dict()))


@click.command("verify-proof")
@click.argument("proof_file", metavar="PROOF.json", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--event-line", "event_line", default=None, metavar="FILE",
              type=click.Path(dir_okay=False, allow_dash=True),
              help="The event's canonical line, as gamma export writes it (- for stdin).")
def verify_proof_command(proof_file: str, event_line: str | None) -> None:
    """Check a proof offline, with no log: exit 0 valid, 1 invalid, 2 bad input.

    An inclusion proof needs the event's line (--event-line); a consistency
    proof needs nothing more.
    """
    with command("verify-proof", proof=proof_file) as record:
        obj = decode_json(read_text(proof_file, "proof")[0], source=proof_file)
        if isinstance(obj, dict) and "leaf_index" in obj:
            if event_line is None:
                raise InputError("an inclusion proof is checked against the event's line:"
                                 " give --event-line", source=proof_file)
            proof = parse_inclusion(obj, source=proof_file)
            line = read_text(event_line, "event line")[0].removesuffix("\n").removesuffix("\r")
            ok, kind = verify_inclusion(proof, line), "inclusion"
        else:
            ok, kind = parse_consistency(obj, source=proof_file).verify(), "consistency"
        record.update(kind=kind, ok=ok)
        click.echo(f"{kind} proof {'valid' if ok else 'INVALID'}")
    if not ok:
        exit_with(1)


@click.command("checkpoint")
@click.argument("log", metavar="STORE|LOG", type=_LOG)
@click.option("--key-file", "key_file", required=True, type=click.Path(dir_okay=False),
              help="Signer key (PRIVATE+KEY+..., as gamma keygen writes).")
@click.option("--origin", default=None, help="Checkpoint origin line (default: the key's name).")
@click.option("--size", type=click.IntRange(min=0), default=None,
              help="Tree size (default: the whole log).")
@chain_key_option
def checkpoint_command(
    log: str, key_file: str, origin: str | None, size: int | None, chain_key_file: str | None
) -> None:
    """Print a signed checkpoint (C2SP signed note) of the log's tree head.

    The log must verify first; a keyed store is signed only with its chain key
    (--chain-key-file, else $GAMMA_CHAIN_KEY), and only if it verifies with it.
    """
    with command("checkpoint", log=log) as record:
        key = parse_signer(read_text(key_file, "signer key")[0], source=key_file)
        head = tree_head(log, size=size, key=read_key(chain_key_file))
        record.update(size=head.size, root=head.root)
        click.echo(sign_checkpoint(head, key, origin=origin).encode("utf-8"), nl=False)


@click.command("verify-checkpoint")
@click.argument("checkpoint", metavar="CHECKPOINT", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--pub-key", "pub_key", required=True, type=click.Path(dir_okay=False),
              help="Verifier key (<name>+<id>+<base64>, as gamma keygen writes).")
def verify_checkpoint_command(checkpoint: str, pub_key: str) -> None:
    """Verify a checkpoint's signature with the public key alone; print its tree head as JSON."""
    with command("verify-checkpoint", checkpoint=checkpoint) as record:
        key = parse_verifier(read_text(pub_key, "verifier key")[0], source=pub_key)
        verified = verify_checkpoint(read_bytes(checkpoint, "checkpoint"), key, source=checkpoint)
        record.update(ok=verified is not None)
        if verified is not None:
            click.echo(canonical_json({"origin": verified.origin, **verified.head.to_dict()}))
        else:
            click.echo(f"checkpoint not signed by {key.name}: INVALID", err=True)
    if verified is None:
        exit_with(1)


@click.command("keygen")
@click.option("--name", default="gamma", show_default=True, help="Key name (no spaces or '+').")
@click.option("--out", "out", required=True, metavar="PREFIX",
              help="Writes PREFIX.key (secret, mode 0600) and PREFIX.pub.")
def keygen_command(name: str, out: str) -> None:
    """Write a new Ed25519 key pair for signing checkpoints."""
    with command("keygen", key_name=name) as record:
        key = generate_key(name)
        secret, public = Path(f"{out}.key"), Path(f"{out}.pub")
        for path in (secret, public):
            if path.exists():
                raise InputError("refusing to overwrite an existing key file", source=str(path))
        try:
            secret.touch(mode=0o600, exist_ok=False)
            secret.write_text(key.encode() + "\n", encoding="utf-8")
            public.write_text(key.verifier().encode() + "\n", encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write key: {exc.strerror}", source=str(out)) from None
        record.update(key_id=key.verifier().key_id.hex())
        click.echo(json.dumps({"private": str(secret), "public": key.verifier().encode()}))


def check_checkpoint(log: str, checkpoint_file: str, pub_key: str | None, *, as_json: bool) -> bool:
    """``gamma verify --expect-checkpoint``: the signature, then the log against its tree head."""
    if pub_key is None:
        raise InputError("a checkpoint is trusted only with its signer's key: give --pub-key",
                         source="--expect-checkpoint")
    key = parse_verifier(read_text(pub_key, "verifier key")[0], source=pub_key)
    verified = verify_checkpoint(read_bytes(checkpoint_file, "checkpoint"), key,
                                 source=checkpoint_file)
    if verified is None:
        click.echo(f"tampered: the checkpoint is not signed by {key.name}", err=True)
        return False
    result = check_log(log, verified)
    if as_json:
        click.echo(canonical_json(result.to_dict()))
    elif result.ok:
        click.echo(f"checkpoint: {result.detail}")
    else:
        click.echo(f"tampered: checkpoint: {result.detail}", err=True)
    return result.ok
