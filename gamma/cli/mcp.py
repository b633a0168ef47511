"""``gamma mcp``: serve a log to an agent over MCP (stdio), as one actor the host binds.

stdout and stdin carry the protocol, so neither LOG nor --actor may be ``-``, and
everything else (one structured line per tool call, the command's own line at the
end when asked for) goes to stderr; ``--quiet`` writes none of it.
"""

from __future__ import annotations

from typing import Any

import click
import structlog

from gamma.cli import quiet
from gamma.cli.logs import command
from gamma.cli.options import (
    STDIN,
    actor_option,
    log_argument,
    policy_option,
    read_actor,
    read_at,
    read_policy,
)
from gamma.cli.store import key_option, read_key
from gamma.integrations import MissingExtraError
from gamma.storage.engine import Engine
from gamma.storage.store import is_store


@click.command("mcp")
@log_argument
@actor_option
@policy_option
@click.option(
    "--writer-authority",
    "authority",
    default=None,
    metavar="LEVEL",
    help="The authority the actor's writes claim (default: unwritten, the policy default);"
    " never more than the policy's [writers] let the actor hold.",
)
@key_option
def mcp_command(
    log: str, actor: str, policy_path: str | None, authority: str | None, key_file: str | None
) -> None:
    """Serve LOG over MCP on stdio: recall, remember, forget, as ACTOR.

    The actor comes only from --actor; no tool takes an actor, tenant, role or
    clearance. Over a store, every call first reads what other writers appended,
    and remember/forget append to it (a keyed store needs its key); a JSONL log is
    read once and read-only.
    Calls resolve at the clock ($GAMMA_NOW pins it). No tool checks a response:
    that is the host's check after inference (gamma validate), whose findings
    would tell a model which guess of a withheld value is right.
    """
    with command("mcp", log=log) as record:
        if STDIN in (log, actor):
            raise click.UsageError("stdin carries the MCP protocol: LOG and --actor cannot be -")
        try:
            # lazy: the SDK is the optional extra
            from gamma.integrations.mcp import serve_stdio
        except MissingExtraError as exc:
            raise click.UsageError(str(exc)) from None
        from gamma.integrations.binding import Binding  # lazy: loaded with the command

        read_at("now")  # a bad $GAMMA_NOW is an input error now, not on the first call
        policy = read_policy(policy_path) if policy_path else None
        engine = Engine.open(log, policy=policy, key=read_key(key_file) if is_store(log) else None)
        with engine:
            who = read_actor(actor, engine.policy)
            writable = is_store(log)
            binding = Binding(
                engine, who, authority=authority, clock=lambda: read_at("now"),
                writable=writable,
                read_only_reason=f"{log} is a JSONL log, read once: serve a store (gamma init,"
                " gamma append) to remember or forget",
            )
            record.update(actor=who.id, tenant=who.tenant, events=len(engine), writable=writable)
            log_call = structlog.get_logger("gamma").bind(command="mcp")

            def on_call(call: dict[str, Any]) -> None:
                level = {"ok": "info", "tool_error": "warning"}.get(call["outcome"], "error")
                getattr(log_call, level)("tool_call", **call)

            serve_stdio(binding, on_call=None if quiet() else on_call)
            record["events"] = len(engine)
