"""``gamma policies``: the named policies that ship with gamma, for ``--policy NAME``."""

from __future__ import annotations

from pathlib import Path

import click

from gamma.cli.logs import command
from gamma.core.terms.canonical import compact_json
from gamma.data import named_policies, policy_file

__all__ = ["policies_command"]

def _about(path: Path) -> str:
    """The first sentence of the policy file's leading comment: what the policy is for."""
    words: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        words.append(line.lstrip("#").strip())
    text = " ".join(words)
    return text.split(". ")[0].rstrip(".")


@click.command("policies")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per policy.")
def policies_command(as_json: bool) -> None:
    """List the named policies (give one as --policy NAME): name, digest and file."""
    with command("policies") as record:
        rows = named_policies()
        for name, policy in rows:
            path = policy_file(name)
            if as_json:
                click.echo(compact_json({"about": _about(path), "digest": policy.digest,
                                         "file": str(path), "name": name}))
            else:
                click.echo(f"{name:<11} {policy.digest}  {_about(path)}")
        record.update(policies=len(rows))
