"""Every command and every public function, tried as a new user would (issue 26 part 7).

The commands are listed from the click group, so a new command without a line in ``BASE``
fails here. Each command's value slots (arguments, files, times, numbers, choices) get, one
at a time, a missing, empty, binary, truncated, directory or wrong-typed value: the run must
exit 2 (or 1 for a check that legitimately fails), print exactly one line on stderr starting
``Error:`` (``Warning:`` lines may precede it), never a traceback nor the backstop's internal
error (exit 4), and store nothing (every file of the work folder keeps its bytes).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import io
import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import click
import pytest
import structlog
from click.testing import CliRunner
from serve_process import write_callers

import gamma
from gamma.cli import INTERNAL, cli, main
from gamma.core.terms.limits import MAX_LINE_BYTES
from gamma.integrations.binding import Binding

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "fixtures" / "examples"
AT, T0 = "2026-03-09T10:00:00Z", "2026-03-01T09:20:00Z"
ENV = {"GAMMA_CHAIN_KEY": None, "GAMMA_LOG_LEVEL": None, "GAMMA_NOW": AT}

#: Commands whose exit 1 means a check failed (a tampered log, a different replay, a failed
#: case or a response with violations); every other command refuses bad input with exit 2.
CHECKS = {"verify", "replay", "audit diff", "validate", "conformance", "verify-proof",
          "verify-checkpoint", "review"}  # fmt: skip

# One valid command line per command; {name} is a file of the world below. Each {name} and
# each option value in VALUES is a slot the fuzz fills with hostile values, one at a time.
BASE: dict[str, list[str]] = {
    "append": ["append", "{store}", "{log}"],
    "audit diff": ["audit", "diff", "{record}", "{record}"],
    "checkpoint": ["checkpoint", "{store}", "--key-file", "{signer}", "--size", "3"],
    "conformance": ["conformance", "{cases}", "--suite", "trap", "--junit", "{out_file}",
                    "--timeout", "5"],
    "erase": ["erase", "{store}", "--tenant", "acme", "--basis", "GDPR Art. 17(1)(a)",
              "--actor", "dpo", "--fact", "F1"],
    "explain": ["explain", "{log}", "F1", "--actor", "{actor}", "--at", AT],
    "export": ["export", "{store}"],
    "import statebench": ["import", "statebench", "{timelines}", "--out", "{out_dir}"],
    "init": ["init", "{new_store}", "--policy", "strict"],
    "keygen": ["keygen", "--out", "{out_prefix}"],
    "log": ["log", "{log}", "--tenant", "acme", "--since", T0, "--until", AT],
    "migrate": ["migrate", "{store}"],
    "mcp": ["mcp", "{log}", "--actor", "{actor}"],
    "policies": ["policies", "--json"],
    "prove consistency": ["prove", "consistency", "{store}", "--from", "1", "--to", "2"],
    "prove inclusion": ["prove", "inclusion", "{store}", "--event", "e01", "--size", "3"],
    "replay": ["replay", "{log}", "--expect", "{record}"],
    "report": ["report", "{log}", "--actor", "{actor}", "--at", AT, "--compare", T0,
               "--out", "{out_file}"],
    "resolve": ["resolve", "{log}", "--actor", "{actor}", "--at", AT, "--audit", "{out_file}"],
    "review": ["review", "{log}", "--actors", "{actors}", "--at", AT, "--since", T0,
               "--out", "{out_dir}", "--workers", "1"],
    "score": ["score", "{responses}", "--log", "{log}"],
    "serve": ["serve", "{store}", "--callers", "{callers}"],
    "validate": ["validate", "{log}", "--actor", "{actor}", "--at", AT, "--question", "q",
                 "--response", "r", "--bindings", "{}", "--verdict", "KEEP"],
    "verify": ["verify", "{store}", "--expect-checkpoint", "{checkpoint}", "--pub-key", "{pub}"],
    "verify-checkpoint": ["verify-checkpoint", "{checkpoint}", "--pub-key", "{pub}"],
    "verify-proof": ["verify-proof", "{proof}", "--event-line", "{event_line}"],
}

#: What a command writes: a file (whose folder must exist), a folder (made when missing), a
#: new store, a key's prefix. Each gets places it cannot be written to, not hostile content.
OUTPUTS = {"out_file", "out_dir", "new_store", "out_prefix"}

BAD_TIME = ["", "yesterday", "2026-13-45T99:00:00Z", "2026-03-09T10:00:00", "99999-01-01T00:00:00Z"]
BAD_NUMBER = ["", "abc", "-1", "1.5", "9" * 30]
VALUES: dict[str, list[str]] = {
    "--at": BAD_TIME, "--since": BAD_TIME, "--until": BAD_TIME, "--compare": BAD_TIME,
    "--size": BAD_NUMBER, "--from": BAD_NUMBER, "--to": BAD_NUMBER, "--workers": BAD_NUMBER,
    "--timeout": ["", "abc", "0", "-1", "nan"],
    "--suite": ["", "nope"], "--verdict": ["", "MAYBE"], "--policy": ["", "lenient", "{"],
    "--bindings": ["", "{", "[]", '{"a": 1}', '{"a": "b", "a": "c"}'],
    "--tenant": [""],
}  # fmt: skip
#: Inline actors: the --actor slot also gets every hostile file.
BAD_ACTORS = ['{', '{"id": 3, "tenant": "acme"}', '{"id": "x"}', '{"id": "x", "tenant": "acme", "roles": "sales"}',
              '{"id": "x", "tenant": "acme", "clearance": "cosmic"}']  # fmt: skip

#: Hostile variants that legitimately succeed (exit 0), with why: (command, slot, value's name).
LEGIT: dict[tuple[str, str, str], str] = {
    ("log", "--tenant", ""): "a tenant named '' is a name: its (empty) listing is the answer",
    ("append", "log", "empty"): "appending no events appends none, and says so (appended 0)",
    ("init", "new_store", "empty"): "an empty file holds nothing to lose: it becomes the store",
}
#: Refusals that fail today in files this test's owner does not own, each with its owner: they
#: are reported, not hidden; remove a line when its fix lands (the test then holds it).
KNOWN: dict[tuple[str, str, str], str] = {
    ("review", "log", "binary"): "gamma/review/run.py: makes --out/tenants before the log is read",
    ("review", "log", "truncated"): "gamma/review/run.py: makes --out/tenants before the log is read",
    ("review", "log", "endless"): "gamma/review/run.py: makes --out/tenants before the log is read",
}  # fmt: skip


@attrs.frozen
class World:
    root: Path
    files: dict[str, Path]

    def reset(self) -> None:
        """Make the hostile files anew (a legitimate success may have written one)."""
        h = self.root / "hostile"
        shutil.rmtree(h, ignore_errors=True)
        h.mkdir()
        (h / "empty").write_bytes(b"")
        (h / "binary").write_bytes(bytes(range(256)) * 4)
        (h / "truncated").write_bytes(self.files["log"].read_bytes()[:150])
        (h / "sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00\x10" * 100)
        (h / "endless").write_bytes(b"\x00" * (MAX_LINE_BYTES + 1))  # /dev/zero, cut one past the limit
        (h / "adir").mkdir()
        for made in (self.root / "made").iterdir():
            shutil.rmtree(made) if made.is_dir() else made.unlink()

    def argv(self, template: list[str], slot: int | None = None, value: str | None = None) -> list[str]:
        out = []
        for i, word in enumerate(template):
            if i == slot:
                assert value is not None
                out.append(value)
            elif word.startswith("{") and word.endswith("}") and word[1:-1] in self.files:
                out.append(str(self.files[word[1:-1]]))
            else:
                out.append(word)
        return out

    def snapshot(self) -> dict[str, str]:
        """Every file and folder under the world, with each file's digest: what a refused run
        must leave alone (SQLite's shared-memory index and an empty WAL store nothing)."""
        return {
            str(p.relative_to(self.root)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "folder"
            for p in sorted(self.root.rglob("*"))
            if not p.name.endswith("-shm") and not (p.name.endswith("-wal") and not p.stat().st_size)
        }  # fmt: skip


@attrs.frozen
class Run:
    code: int
    out: str
    err: str


def gamma_cli(*args: str, input: bytes = b"") -> Run:
    """``gamma ARGS`` in-process through main, as the console runs it (stdin empty)."""
    runner = CliRunner()
    code = 0
    with runner.isolation(input=input, env=ENV) as (out, err, _):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    structlog.reset_defaults()
    return Run(code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace"))


def one_error_line(run: Run) -> str | None:
    """None when stderr is what a refusal must be, else what is wrong with it. A check that
    failed (exit 1) says so on stdout, and may add one line on stderr."""
    lines = [x for x in run.err.splitlines() if x.strip()]
    if "Traceback" in run.err + run.out:
        return "a traceback"
    if run.code == INTERNAL or "internal error" in run.err:
        return "the backstop caught an unexpected exception"
    problems = [x for x in lines if not x.startswith("Warning: ")]
    if run.code == 1 and len(problems) <= 1:
        return None
    if len(problems) != 1 or not problems[0].startswith("Error: "):
        return f"expected one line starting 'Error: ', got {lines!r}"
    return None


def commands() -> list[str]:
    """Every leaf command of the click group, by its words (``audit diff``)."""
    ctx = click.Context(cli)
    found: list[str] = []

    def walk(group: click.Group, prefix: list[str]) -> None:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if isinstance(command, click.Group):
                walk(command, [*prefix, name])
            elif command is not None:
                found.append(" ".join([*prefix, name]))

    walk(cli, [])
    return found


def command_of(words: list[str]) -> click.Command:
    ctx = click.Context(cli)
    command: click.Command | None = cli
    for word in words:
        assert isinstance(command, click.Group)
        command = command.get_command(ctx, word)
    assert command is not None
    return command


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("fuzz")
    log = root / "acme.jsonl"
    shutil.copy(EXAMPLES / "acme.jsonl", log)
    files: dict[str, Path] = {
        "log": log, "actor": EXAMPLES / "alice.json", "store": root / "s.db",
        "responses": EXAMPLES / "responses.jsonl", "record": root / "record.json",
        "signer": root / "k.key", "pub": root / "k.pub", "checkpoint": root / "checkpoint.txt",
        "proof": root / "proof.json", "event_line": root / "e01.line", "actors": root / "actors.jsonl",
        "cases": root / "cases", "timelines": root / "timelines.jsonl", "callers": root / "callers.toml",
        "out_file": root / "made" / "out.txt", "out_dir": root / "made" / "dir",
        "new_store": root / "made" / "new.db",
    }  # fmt: skip
    for setup in (["init", files["store"]], ["append", files["store"], log],
                  ["resolve", log, "--actor", files["actor"], "--at", AT, "--audit", files["record"]],
                  ["keygen", "--out", root / "k", "--name", "fuzz"]):  # fmt: skip
        assert gamma_cli(*map(str, setup)).code == 0, setup
    (root / "made").mkdir()
    write_callers(files["callers"], [{"name": "alice-agent", "actor": {"id": "alice", "tenant": "acme"}}])
    for name, args in (("checkpoint", ["checkpoint", files["store"], "--key-file", files["signer"]]),
                       ("proof", ["prove", "inclusion", files["store"], "--event", "e01"])):
        run = gamma_cli(*map(str, args))
        assert run.code == 0, run.err
        files[name].write_text(run.out, encoding="utf-8")
    exported = gamma_cli("export", str(files["store"])).out
    files["event_line"].write_text(exported.splitlines()[0] + "\n", encoding="utf-8")
    files["actors"].write_text((EXAMPLES / "alice.json").read_text(encoding="utf-8").replace("\n", " ")
                               + "\n", encoding="utf-8")  # fmt: skip
    files["cases"].mkdir()
    trap = sorted((ROOT / "gamma" / "data" / "fixtures" / "trap").glob("*.json"))[0]
    shutil.copy(trap, files["cases"] / trap.name)
    files["timelines"].write_text("", encoding="utf-8")  # replaced below when a sample exists
    sample = ROOT.parent / "shared" / "statebench" / "v1-dev.jsonl"
    if sample.is_file():
        files["timelines"].write_text(sample.read_text(encoding="utf-8").split("\n")[0] + "\n",
                                      encoding="utf-8")  # fmt: skip
    made = World(root, files)
    made.reset()
    return made


HOSTILE_FILES = ["missing", "empty", "binary", "truncated", "sqlite", "endless", "adir"]


def hostile_files(world: World) -> list[str]:
    return [str(world.root / "hostile" / name) for name in HOSTILE_FILES]


def label(world: World, value: str) -> str:
    """A hostile value by its name (``binary/x``), as LEGIT and KNOWN list it."""
    prefix = str(world.root / "hostile") + os.sep
    return value[len(prefix):] if value.startswith(prefix) else value


def variants(world: World, name: str) -> Iterator[tuple[int, str, str]]:
    """(slot, what the slot is, hostile value) for every value slot of a command line."""
    template = BASE[name]
    for i, word in enumerate(template):
        before = template[i - 1] if i else ""
        key = word[1:-1] if word.startswith("{") and word.endswith("}") else None
        if key in OUTPUTS:
            h = world.root / "hostile"
            places = {"out_file": ["missing/x", "adir", "binary/x"], "out_dir": ["binary", "binary/x"],
                      "new_store": ["missing/x", "adir", "binary/x", "empty", "binary", "truncated",
                                    "sqlite"],
                      "out_prefix": ["missing/x", "binary/x"]}[key]  # fmt: skip
            yield from ((i, key, str(h / place)) for place in places)
        elif key is not None:
            yield from ((i, key, v) for v in hostile_files(world))
        elif before == "--actor":
            yield from ((i, before, v) for v in [*hostile_files(world), *BAD_ACTORS])
        elif before in VALUES:
            yield from ((i, before, v) for v in VALUES[before])


def test_every_command_has_a_base_line() -> None:
    """A command added to the group without a line here would escape the fuzz."""
    assert sorted(commands()) == sorted(BASE)


# mcp serves stdin until it closes, serve until a signal: both are tried below as
# subprocesses, with a timeout
IN_PROCESS = sorted(set(BASE) - {"mcp", "serve"})


@pytest.mark.parametrize("name", IN_PROCESS)
def test_hostile_values_are_refused_in_one_line(world: World, name: str) -> None:
    """Each slot of each command with each hostile value: a one-line refusal, nothing stored."""
    failures = []
    allowed = {1, 2} if name in CHECKS else {2}
    for slot, what, value in variants(world, name):
        world.reset()
        before = world.snapshot()
        run = gamma_cli(*world.argv(BASE[name], slot, value))
        which = (name, what, label(world, value))
        if run.code == 0 and which in LEGIT:
            continue
        problem = one_error_line(run) if run.code in allowed else f"exit {run.code}"
        if problem is None and world.snapshot() != before:
            problem = "a refused run changed the work folder"
        if problem is not None and which not in KNOWN:
            failures.append(f"{what}={value!r}: {problem}; stderr {run.err[-300:]!r}")
    assert not failures, f"gamma {name}:\n" + "\n".join(failures)


@pytest.mark.parametrize("name", IN_PROCESS)
def test_usage_errors_are_one_line(world: World, name: str) -> None:
    """No arguments, an unknown flag, a flag without its value: exit 2 and one line."""
    words = name.split()
    tries = [[*words, "--no-such-flag"]]
    if any(p.required for p in command_of(words).params):
        tries.append(words)
    takes_value = {o for p in command_of(words).params if isinstance(p, click.Option)
                   and not p.is_flag for o in p.opts}  # fmt: skip
    flags = [w for w in BASE[name] if w in takes_value]
    if flags:
        tries.append(world.argv(BASE[name])[: BASE[name].index(flags[-1]) + 1])
    for argv in tries:
        run = gamma_cli(*argv)
        assert run.code == 2 and one_error_line(run) is None, (argv, run)


def test_no_command_and_unknown_command() -> None:
    """Bare ``gamma`` shows the help (exit 2, as click does); the rest are one-line errors."""
    bare = gamma_cli()
    assert bare.code == 2 and bare.err.startswith("Usage: gamma") and "\nCommands:\n" in bare.err
    run = gamma_cli("no-such-command")
    assert run.code == 2 and one_error_line(run) is None
    run = gamma_cli("--quiet", "--verbose", "policies")
    assert run.code == 2 and one_error_line(run) is None and "not both" in run.err


# -- a few real processes: what a console shows -----------------------------------------------


def subprocess_gamma(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GAMMA_LOG_LEVEL", "GAMMA_CHAIN_KEY")}
    return subprocess.run([sys.executable, "-m", "gamma", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env=env, timeout=timeout, check=False)  # fmt: skip


def test_real_processes(world: World) -> None:
    """``python -m gamma`` with a missing folder, a missing log and a binary actor: one line."""
    h = world.root / "hostile"
    log, actor = str(world.files["log"]), str(world.files["actor"])
    for args in (["report", log, "--actor", actor, "--at", AT, "--out", str(h / "nope" / "r.html")],
                 ["resolve", str(h / "missing"), "--actor", actor, "--at", AT],
                 ["resolve", log, "--actor", str(h / "binary"), "--at", AT],
                 ["mcp", str(h / "binary"), "--actor", actor],
                 ["mcp", log, "--actor", str(h / "empty")]):  # fmt: skip
        done = subprocess_gamma(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert one_error_line(Run(done.returncode, done.stdout, done.stderr)) is None, (args, done.stderr)


@pytest.mark.skipif(importlib.util.find_spec("uvicorn") is None, reason="needs gamma[serve]")
@pytest.mark.parametrize("slot", ["store", "callers"])
def test_serve_refuses_hostile_files_before_it_serves(world: World, slot: str) -> None:
    """``gamma serve`` checks its store and callers file before any worker starts: each hostile
    file is one ``Error:`` line and exit 2 within the timeout (a server that started instead
    would run until the timeout kills it), and nothing stored changes."""
    before = world.snapshot()
    for value in hostile_files(world):
        args = ["serve", str(world.files["store"]), "--callers", str(world.files["callers"]),
                "--port", "0"]  # fmt: skip
        args[1 if slot == "store" else 3] = value
        done = subprocess_gamma(*args, timeout=30)
        assert done.returncode == 2, (label(world, value), done.stderr)
        assert one_error_line(Run(done.returncode, done.stdout, done.stderr)) is None, done.stderr
    assert world.snapshot() == before


def test_python_m_gamma_is_quiet_on_success(world: World) -> None:
    """``python -m gamma`` runs the CLI; a success writes nothing on stderr unless asked (-v)."""
    args = ["resolve", str(world.files["log"]), "--actor", str(world.files["actor"]), "--at", AT]
    done = subprocess_gamma(*args)
    assert done.returncode == 0 and done.stdout.startswith("Resolution for alice") and done.stderr == ""
    loud = subprocess_gamma("-v", *args)
    assert loud.returncode == 0 and json.loads(loud.stderr)["command"] == "resolve"


# -- the Python API ----------------------------------------------------------------------------

WRONG: list[Any] = [42, 2.5, b"bytes", object(), ["x"], "x.json", None, True]


def api_calls(world: World) -> dict[str, dict[str, Any]]:
    """A valid call of every public function that takes inputs, by keyword."""
    log = str(world.files["log"])
    events = gamma.load_events(log)
    actor = json.loads(world.files["actor"].read_text(encoding="utf-8"))
    resolution = gamma.resolve(events, actor, AT)
    record = gamma.audit_record(resolution, events)
    store = str(world.files["store"])
    return {
        "prove_inclusion": {"log": store, "event": "e01"},
        "prove_consistency": {"log": store, "first": 1},
        "verify_inclusion": {"proof": gamma.prove_inclusion(store, "e01"),
                             "event_line": world.files["event_line"].read_text(encoding="utf-8")},
        "verify_consistency": {"proof": gamma.prove_consistency(store, 1)},
        "tree_head": {"log": store},
        "verify_file": {"path": log},
        "verify_path": {"path": log},
        "audit_record": {"resolution": resolution, "events": events},
        "write_audit": {"path": str(world.root / "made" / "api.json"), "resolution": resolution,
                        "events": events},
        "read_audit": {"path": str(world.files["record"])},
        "replay": {"events": events, "record": record},
        "diff_records": {"a": record, "b": record},
        "resolve": {"events": events, "actor": actor, "at": AT},
        "validate": {"log": log, "actor": actor, "at": AT, "question": "q", "response": "r"},
        "explain": {"log": log, "fact": "F1", "actor": actor, "at": AT},
        "score": {"responses": str(EXAMPLES / "responses.jsonl"), "log": log},
        "load_events": {"path": log},
        "read": {"source": log},
        "parse_events": {"lines": Path(log).read_text(encoding="utf-8").splitlines()},
        "dump_events": {"events": events, "out": io.StringIO()},
        "parse_actor": {"obj": actor},
        "load_policy": {"path": str(ROOT / "gamma" / "data" / "policies" / "default.toml")},
        "parse_policy": {"text": ""},
    }  # fmt: skip


def public_functions() -> list[str]:
    return [n for n in gamma.__all__ if inspect.isfunction(getattr(gamma, n))]


def test_every_public_function_is_tried(world: World) -> None:
    assert sorted(api_calls(world)) == sorted(public_functions())


@pytest.mark.parametrize("name", public_functions())
def test_public_functions_refuse_wrong_types(
    world: World, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each parameter with each wrong type: a GammaError, or a TypeError naming the parameter."""
    monkeypatch.chdir(tmp_path)  # a wrong value may be a writable name ("x.json"): not here
    failures = wrong_type_failures(getattr(gamma, name), api_calls(world)[name])
    assert not failures, f"gamma.{name}:\n" + "\n".join(f[:200] for f in failures)


def wrong_type_failures(function: Callable[..., Any], valid: dict[str, Any]) -> list[str]:
    """Each parameter of ``function`` given each wrong type, the others valid: what is neither
    a GammaError nor a TypeError naming the parameter."""
    function(**valid)  # the valid call works
    failures = []
    for parameter in inspect.signature(function).parameters:
        for wrong in WRONG:
            try:
                function(**{**valid, parameter: wrong})
            except gamma.GammaError:
                continue
            except TypeError as exc:
                if parameter in str(exc):
                    continue
                failures.append(f"{parameter}={wrong!r}: TypeError not naming it: {exc}")
            except Exception as exc:  # noqa: BLE001 - the finding is any other exception
                failures.append(f"{parameter}={wrong!r}: {type(exc).__name__}: {exc}")
    return failures


def test_the_seen_tracebacks(world: World) -> None:
    """The issue's repros: a str or int actor, an actor given as a file name."""
    events = gamma.load_events(world.files["log"])
    for actor in ("alice", 3):
        with pytest.raises(TypeError, match="actor"):
            gamma.resolve(events, actor, AT)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="actor"):
        gamma.validate(world.files["log"], actor="x.json", at=AT, question="q",  # type: ignore[arg-type]
                       response="r")


#: Library refusals that fail today in files this test's owner does not own (reported).
KNOWN_API: dict[tuple[str, str, str], str] = {
    ("write_audit", "path", "binary/x"): "gamma/audit/replay.py: _atomic_write's cleanup unlinks"
    " a temp file under a file, NotADirectoryError",
}


#: Hostile paths a function legitimately accepts: a writer writes a new file or over one; an
#: empty TOML file is the default policy.
LEGIT_API: dict[str, tuple[str, ...]] = {
    "write_audit": ("missing", "empty", "binary", "truncated", "sqlite", "endless"),
    "load_policy": ("empty",),
}


@pytest.mark.parametrize("name", public_functions())
def test_public_functions_refuse_hostile_files(world: World, name: str) -> None:
    """Each path parameter given a missing, empty, binary, truncated or directory path, or a
    path through a file: a GammaError, nothing else."""
    valid = api_calls(world)[name]
    function = getattr(gamma, name)
    paths = [p for p in ("log", "path") if isinstance(valid.get(p), str)]
    failures = []
    for parameter in paths:
        for value in [*hostile_files(world), str(world.root / "hostile" / "binary" / "x")]:
            world.reset()
            try:
                function(**{**valid, parameter: value})
            except gamma.GammaError:
                continue
            except Exception as exc:  # noqa: BLE001 - the finding is any other exception
                if (name, parameter, label(world, value)) not in KNOWN_API:
                    failures.append(f"{parameter}={label(world, value)}: {type(exc).__name__}: {exc}")
            else:
                if label(world, value) not in LEGIT_API.get(name, ()):
                    failures.append(f"{parameter}={label(world, value)}: accepted")
    assert not failures, f"gamma.{name}:\n" + "\n".join(f[:200] for f in failures)


# -- the Python surface beyond gamma.X: the engine and the integrations' constructors -----------


def method_calls(world: World, engine: gamma.Engine) -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
    """A valid call of each public method that takes inputs, by keyword."""
    langgraph = pytest.importorskip("gamma.integrations.langgraph", exc_type=ImportError)
    actor = json.loads(world.files["actor"].read_text(encoding="utf-8"))
    line = json.dumps({"id": "z1", "type": "assert", "tenant": "acme", "actor": "alice",
                       "ts": "2026-03-09T11:00:00Z", "fact": "Z1", "key": "z", "value": 1})  # fmt: skip
    return {
        "Engine": (gamma.Engine, {"policy": None}),
        "Engine.open": (gamma.Engine.open, {"source": str(world.files["log"])}),
        "Engine.append": (engine.append, {"events": [line]}),
        "Engine.resolve": (engine.resolve, {"actor": actor, "at": AT, "keys": ["z"]}),
        "Engine.check": (engine.check, {"actor": actor, "at": AT, "facts": ["F1"]}),
        "Binding": (Binding, {"engine": engine, "actor": actor}),
        "GovernedStore": (langgraph.GovernedStore, {"engine": engine, "actor": actor}),
    }  # fmt: skip


METHODS = ["Engine", "Engine.open", "Engine.append", "Engine.resolve", "Engine.check", "Binding",
           "GovernedStore"]  # fmt: skip


@pytest.mark.parametrize("name", METHODS)
def test_public_methods_refuse_wrong_types(
    world: World, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's methods and the integrations' constructors, as ``gamma.X`` above: a str
    actor, a str list of facts, a dict batch each a TypeError naming the parameter."""
    monkeypatch.chdir(tmp_path)
    with gamma.Engine.open(world.files["log"]) as engine:
        function, valid = method_calls(world, engine)[name]
        failures = wrong_type_failures(function, valid)
    assert not failures, f"{name}:\n" + "\n".join(f[:200] for f in failures)


def test_the_seen_method_tracebacks(world: World) -> None:
    """The repros: a str actor to resolve and to Binding, a str of facts, a dict batch, a file
    name to parse_events."""
    engine = gamma.Engine()
    with pytest.raises(TypeError, match="actor"):
        engine.resolve("a", "2026-03-02T00:00:00Z")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="actor"):
        Binding(engine, "alice")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="facts"):
        engine.check({"id": "a", "tenant": "acme"}, AT, "F1")
    with pytest.raises(TypeError, match="events"):
        engine.append({"a": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="lines"):
        gamma.parse_events(str(world.files["log"]))


# -- endless files: /dev/zero and /dev/urandom in every file slot --------------------------------

#: The address space a run may take: a reader that holds a whole endless file fails (exit 4)
#: long before this, in a second; a bounded one needs a few MiB past the interpreter.
MEMORY = 1 << 30

#: Endless inputs refused today only once a file this test's owner does not own is fixed:
#: gamma/conformance/statebench/importer.py reads its file whole.
KNOWN_ENDLESS: set[str] = set()


def endless_lines(world: World, device: str) -> dict[str, list[str]]:
    """Each command's file slot given ``device``, the rest of the line valid."""
    f = {k: str(v) for k, v in world.files.items()}
    actor, log, store = f["actor"], f["log"], f["store"]
    base = ["validate", log, "--actor", actor, "--at", AT, "--question", "q"]
    return {
        "score": ["score", device, "--log", log],
        "score --log": ["score", f["responses"], "--log", device],
        "validate --response": [*base, "--response", "@" + device],
        "validate --context": [*base, "--response", "r", "--context", "@" + device],
        "validate --actor": [*base[:3], device, *base[4:], "--response", "r"],
        "replay --expect": ["replay", log, "--expect", device],
        "audit diff A": ["audit", "diff", device, f["record"]],
        "audit diff B": ["audit", "diff", f["record"], device],
        "resolve": ["resolve", device, "--actor", actor, "--at", AT],
        "explain": ["explain", device, "F1", "--actor", actor, "--at", AT],
        "review --actors": ["review", log, "--actors", device, "--at", AT,
                            "--out", str(world.root / "made" / "endless")],
        "log": ["log", device],
        "verify": ["verify", device],
        "verify --expect-checkpoint": ["verify", store, "--expect-checkpoint", device,
                                       "--pub-key", f["pub"]],
        "verify-checkpoint": ["verify-checkpoint", device, "--pub-key", f["pub"]],
        "verify-proof": ["verify-proof", device, "--event-line", f["event_line"]],
        "verify-proof --event-line": ["verify-proof", f["proof"], "--event-line", device],
        "checkpoint --key-file": ["checkpoint", store, "--key-file", device],
        "init --key-file": ["init", str(world.root / "made" / "keyed.db"), "--key-file", device],
        "append --key-file": ["append", store, log, "--key-file", device],
        "migrate --key-file": ["migrate", store, "--key-file", device],
        "verify --key-file": ["verify", store, "--key-file", device],
        **({"mcp --key-file": ["mcp", store, "--actor", actor, "--key-file", device]}
           if importlib.util.find_spec("mcp") else {}),  # without the extra: the hint, first
        "import statebench": ["import", "statebench", device, "--out", str(world.root / "made" / "sb")],
    }  # fmt: skip


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


@pytest.mark.skipif(not Path("/dev/zero").exists() or not Path("/dev/urandom").exists(),
                    reason="needs /dev/zero and /dev/urandom")  # fmt: skip
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_endless_files_are_refused_in_one_line(world: World, device: str) -> None:
    """Every file a command reads, given an endless device, in a real process whose memory is
    capped: exit 2 within seconds, one ``Error:`` line naming the file, nothing stored."""
    env = {k: v for k, v in os.environ.items() if k not in ("GAMMA_LOG_LEVEL", "GAMMA_CHAIN_KEY")}
    failures = []
    for what, args in endless_lines(world, device).items():
        if what in KNOWN_ENDLESS:
            continue
        world.reset()
        before = world.snapshot()
        done = subprocess.run([sys.executable, "-m", "gamma", *args], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, env=env, timeout=60,
                              preexec_fn=_limit_memory, check=False)  # fmt: skip
        problem = one_error_line(Run(done.returncode, done.stdout, done.stderr))
        if done.returncode != 2:
            problem = f"exit {done.returncode}"
        elif problem is None and device not in done.stderr:
            problem = "the error does not name the file"
        elif problem is None and world.snapshot() != before:
            problem = "a refused run changed the work folder"
        if problem is not None:
            failures.append(f"{what}: {problem}; stderr {done.stderr[-300:]!r}")
    assert not failures, "\n".join(failures)
