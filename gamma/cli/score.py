"""``gamma validate`` (one response) and ``gamma score`` (a file of responses)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from gamma.cli import exit_with
from gamma.cli.logs import command
from gamma.cli.options import (
    actor_option,
    at_option,
    log_argument,
    one_stdin,
    policy_option,
    read_actor,
    read_at,
    read_log,
    read_policy,
    read_text,
)
from gamma.core.reading.strictjson import decode_json
from gamma.core.resolving.resolver import resolve
from gamma.core.terms.canonical import compact_json, format_ts
from gamma.core.terms.errors import InputError
from gamma.core.terms.policy import Policy
from gamma.scoring.findings import LogFacts, check_response, parse_stated
from gamma.scoring.metrics import Rate, ResponseLine, parse_responses, score


@click.command("validate")
@log_argument
@actor_option
@at_option
@policy_option
@click.option("--question", required=True, help="The question the response answers.")
@click.option("--response", "response", required=True,
              help="The response text, @FILE to read it, or - for stdin.")
@click.option("--context", default=None, help="The context the system was shown (text, or @FILE).")
@click.option("--verdict", type=click.Choice(["KEEP", "ADAPT", "REJECT"], case_sensitive=False),
              default=None, help="The stated verdict (wins over a VERDICT: line in the response).")
@click.option("--bindings", default=None,
              help='JSON object {"used fact": "fact id or value"} (wins over a BINDINGS: line).')
@click.option("--experience", default=None, help="The experience the verdict is about.")
def validate_command(
    log: str, actor: str, at: str, policy_path: str | None, question: str, response: str,
    context: str | None, verdict: str | None, bindings: str | None, experience: str | None,
) -> None:
    """Check one response against Γ before acting on it.

    Exit 0 when the response is ok, 1 when it has violations (printed as JSON),
    2 on bad input (a malformed log, actor, time, policy or bindings).
    """
    with command("validate", log=log) as record:
        one_stdin(("LOG", log), ("--actor", actor), ("--response", response))
        events, policy = read_log(log, read_policy(policy_path) if policy_path else None)
        who = read_actor(actor, policy)
        at_ts = read_at(at)
        resolution = resolve(events, who, at_ts, policy)
        stated = parse_stated(
            _text(response, "--response"), verdict=verdict, bindings=_bindings(bindings)
        )
        found = check_response(
            resolution, LogFacts(events), question=question, stated=stated,
            context=_text(context, "--context") if context is not None else None,
            experience=experience,
        )
        click.echo(compact_json({"ok": not found, "violations": [v.to_dict() for v in found]}))
        record.update(violations=len(found), digest=resolution.digest, at=format_ts(at_ts))
    if found:
        exit_with(1)


def _text(value: str, option: str) -> str:
    """The option's text: itself, ``-`` for stdin, or ``@FILE`` read with no line held past
    the limit (``@/dev/zero`` is refused after it, naming the file)."""
    if value == "-":
        return read_text(value, option)[0]
    if value.startswith("@"):
        return read_text(value[1:], option)[0]
    return value


def _bindings(text: str | None) -> dict[str, str] | None:
    if text is None:
        return None
    obj = decode_json(text, source="--bindings")
    if not isinstance(obj, dict) or not all(isinstance(v, str) for v in obj.values()):
        raise InputError("expected a JSON object of strings", source="--bindings")
    return obj


@click.command("score")
@click.argument("responses", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--log", "log", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="The log the responses answer about (- for stdin).")
@policy_option
@click.option("--json", "as_json", is_flag=True, help="Print the score as JSON.")
def score_command(responses: str, log: str, policy_path: str | None, as_json: bool) -> None:
    """Score RESPONSES.jsonl with judge-free metrics: GBR, URR, pairs, factorial, pool."""
    with command("score", responses=responses, log=log) as record:
        one_stdin(("--log", log), ("RESPONSES", responses))
        events, policy = read_log(log, read_policy(policy_path) if policy_path else None)
        result = score(_responses(responses, policy), events, policy=policy)
        data = result.to_dict()
        click.echo(compact_json(data) if as_json else render_score(data), nl=True)
        record.update(responses=data["responses"], findings=len(data["findings"]))


def _responses(path: str, policy: Policy) -> Sequence[ResponseLine] | list[dict[str, Any]]:
    """RESPONSES: a JSONL file's lines, read with no line held past the limit (``/dev/zero``
    is refused after it) and checked as ``load_responses`` checks them, or the objects read
    from stdin (-)."""
    if path != "-":
        if Path(path).is_file() and Path(path).stat().st_size == 0:  # a score of nothing: 0/0
            raise InputError("no responses: the file is empty", source=path)
        text, source = read_text(path, "RESPONSES")
        return parse_responses(text.split("\n"), source=source, policy=policy)
    text, source = read_text(path, "RESPONSES")
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            obj = decode_json(line, source=source, line=number)
            if not isinstance(obj, dict):
                raise InputError("expected a JSON object", source=source, line=number)
            found.append(obj)
    if not found:
        raise InputError("no responses: standard input is empty", source=source)
    return found


def _rate(obj: dict[str, Any]) -> str:
    return str(Rate(obj["k"], obj["n"]))


def render_score(data: dict[str, Any]) -> str:
    """The score as a table for people; every rate with its numerator and denominator."""
    gbr, urr = data["gbr"], data["urr"]
    out = [
        f"responses            {data['responses']}",
        f"GBR                  {_rate(gbr)}",
        f"GBR (conditional)    {_rate(gbr['conditional'])}",
    ]
    for code, k in gbr["by_reason"].items():
        out.append(f"  leaked via {code:<22} {k}")
    out.append(f"URR                  {_rate(urr)}")
    if data["pairs"]:
        out += ["", "PAIRS  axis                     decidable  pairs  incomplete  pair accuracy        positive             counterfactual       delta"]
        for group in ("engine", "model", None):
            for axis, p in data["pairs"].items():
                if p["decidable_by"] != group:
                    continue
                delta = "n/a" if p["delta"] is None else f"{p['delta']:+.1%}"
                out.append(
                    f"       {axis:<24} {p['decidable_by'] or '-'!s:<10} {p['pairs']:<6} {p['incomplete']:<11} "
                    f"{_rate(p['pair_accuracy']):<20} {_rate(p['positive']):<20} {_rate(p['counterfactual']):<20} {delta}"
                )
    f = data["factorial"]
    if f["n"]:
        out += [
            "",
            f"FACTORIAL n={f['n']}",
            f"  accuracy               {_rate(f['accuracy'])}",
            f"  correct rejection      {_rate(f['correct_rejection'])}",
            f"  false refusal          {_rate(f['false_refusal'])}",
            f"  detail carryover       {_rate(f['detail_carryover'])}",
            f"  always-refuse baseline {_rate(f['always_refuse_accuracy'])}",
        ]
    pool = data["pool"]
    if pool["n"]:
        out += ["", "POOL " + "  ".join(f"{k} {pool[k]}" for k in ("n", "gold", "drift", "other", "off_pool", "ambiguous"))]
    if data["findings"]:
        out += ["", f"FINDINGS ({len(data['findings'])})"]
        for item in data["findings"]:
            target = item["fact"] or item["experience"] or "-"
            tokens = ", ".join(json.dumps(t, ensure_ascii=False) for t in item["tokens"])
            codes = ",".join(item["codes"])
            out.append(f"  {item['response']}  {item['kind']:<16} {target:<8} {codes:<24} {tokens}")
    return "\n".join(out)
