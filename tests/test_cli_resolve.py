"""``gamma resolve`` end to end, in real subprocesses (DESIGN §3 errors, §6 outputs, §7 exit statuses).

Each run is a fresh interpreter, so hash-seed independence, stdout/stderr
separation and exit statuses are observed exactly as a user sees them.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import A, R, X, jsonl

from gamma import DEFAULT_POLICY, Resolution, load_events, load_policy, parse_actor, resolve

ROOT = Path(__file__).resolve().parent.parent
ACME = ROOT / "fixtures" / "examples" / "acme.jsonl"
ALICE = ROOT / "fixtures" / "examples" / "alice.json"
AT = "2026-03-02T10:00:00Z"
STRICT = ROOT / "policies" / "strict.toml"


def gamma(
    *args: str | Path, seed: str = "0", cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run the CLI entry point in a fresh interpreter with a fixed PYTHONHASHSEED; capture bytes."""
    env = {**os.environ, "PYTHONHASHSEED": seed}
    return subprocess.run(
        [sys.executable, "-c", "from gamma.cli import main; main()", *map(str, args)],
        capture_output=True,
        env=env,
        cwd=cwd or ROOT,
        timeout=60,
        check=False,
    )


@functools.cache
def cached(*args: str, seed: str = "0") -> subprocess.CompletedProcess[bytes]:
    """``gamma`` over the repository's example files, run once per distinct argv and seed."""
    return gamma(*args, seed=seed)


def log_lines(stderr: bytes) -> list[dict[str, Any]]:
    """The structlog JSON lines on stderr (lines that parse as JSON objects)."""
    found = []
    for line in stderr.decode("utf-8", "replace").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            found.append(obj)
    return found


def expected_resolution(policy_path: Path | None = None) -> Resolution:
    """The resolution of the example log for alice at AT, computed in this process."""
    policy = load_policy(policy_path) if policy_path else DEFAULT_POLICY
    events = load_events(ACME, policy=policy)
    who = parse_actor(json.loads(ALICE.read_text(encoding="utf-8")), policy=policy)
    return resolve(events, who, AT, policy)


class TestOutputs:
    def test_json(self) -> None:
        """--format json prints exactly one canonical line, the library's to_json, and exits 0."""
        done = cached("resolve", str(ACME), "--actor", str(ALICE), "--at", AT, "--format", "json")
        assert done.returncode == 0, done.stderr
        assert done.stdout == (expected_resolution().to_json() + "\n").encode("utf-8")

    def test_text_is_the_default(self) -> None:
        """Without --format the text report is printed."""
        done = cached("resolve", str(ACME), "--actor", str(ALICE), "--at", AT)
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode("utf-8") == expected_resolution().render("text")

    def test_context(self) -> None:
        """--format context prints the prompt block and nothing else."""
        done = cached(
            "resolve", str(ACME), "--actor", str(ALICE), "--at", AT, "--format", "context"
        )
        assert done.returncode == 0, done.stderr
        text = done.stdout.decode("utf-8")
        assert text == expected_resolution().render("context")
        assert text.startswith(
            "# Authorized state for alice (tenant acme, scope helios/launch) at 2026-03-02T10:00:00Z\n"
        )

    def test_quiet_on_success(self) -> None:
        """A success writes nothing on stderr unless the log is asked for (issue 32)."""
        done = cached("resolve", str(ACME), "--actor", str(ALICE), "--at", AT, "--format", "json")
        assert done.returncode == 0 and done.stderr == b""

    def test_one_structured_log_line_on_stderr(self) -> None:
        """With -v, stderr holds exactly one structlog JSON line for the command, with its
        outcome and digest."""
        done = cached("-v", "resolve", str(ACME), "--actor", str(ALICE), "--at", AT, "--format", "json")
        lines = done.stderr.decode("utf-8").splitlines()
        assert len(lines) == 1, lines
        record = json.loads(lines[0])
        assert record["command"] == "resolve" and record["outcome"] == "ok"
        assert record["digest"] == json.loads(done.stdout)["digest"]
        assert record["head"] == json.loads(done.stdout)["log"]

    @pytest.mark.parametrize("fmt", ["json", "context"])
    def test_byte_identical_across_hash_seeds(self, fmt: str) -> None:
        """The output bytes do not depend on PYTHONHASHSEED (0 versus 12345)."""
        args = ("resolve", str(ACME), "--actor", str(ALICE), "--at", AT, "--format", fmt)
        first, second = cached(*args, seed="0"), cached(*args, seed="12345")
        assert first.returncode == second.returncode == 0
        assert first.stdout == second.stdout

    def test_inline_actor_equals_actor_file(self) -> None:
        """--actor given as inline JSON gives the same bytes as the same actor in a file."""
        inline = ALICE.read_text(encoding="utf-8").strip()
        assert inline.startswith("{")
        by_file = cached(
            "resolve", str(ACME), "--actor", str(ALICE), "--at", AT, "--format", "json"
        )
        by_text = gamma("resolve", ACME, "--actor", inline, "--at", AT, "--format", "json")
        assert by_text.returncode == 0, by_text.stderr
        assert by_text.stdout == by_file.stdout

    def test_policy_option(self) -> None:
        """--policy resolves under that policy and the output names its digest."""
        done = gamma(
            "resolve", ACME, "--actor", ALICE, "--at", AT, "--format", "json", "--policy", STRICT
        )
        assert done.returncode == 0, done.stderr
        body = json.loads(done.stdout)
        assert body["policy"] == load_policy(STRICT).digest
        assert done.stdout == (expected_resolution(STRICT).to_json() + "\n").encode("utf-8")

    def test_default_policy_file_is_the_builtin(self) -> None:
        """--policy policies/default.toml gives the same bytes as no --policy."""
        plain = cached("resolve", str(ACME), "--actor", str(ALICE), "--at", AT, "--format", "json")
        explicit = gamma(
            "resolve",
            ACME,
            "--actor",
            ALICE,
            "--at",
            AT,
            "--format",
            "json",
            "--policy",
            ROOT / "policies" / "default.toml",
        )
        assert explicit.stdout == plain.stdout

    def test_at_with_offset(self) -> None:
        """--at with an offset is the same instant as its UTC form."""
        utc = cached("resolve", str(ACME), "--actor", str(ALICE), "--at", AT, "--format", "json")
        shifted = gamma(
            "resolve",
            ACME,
            "--actor",
            ALICE,
            "--at",
            "2026-03-02T11:00:00+01:00",
            "--format",
            "json",
        )
        assert shifted.stdout == utc.stdout


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory holding a small valid log (log.jsonl) and actor (actor.json)."""
    (tmp_path / "log.jsonl").write_text(
        jsonl(A("F1", "k", 1), A("F2", "k", 2), R("F2"), X("X1", ["F1"])), encoding="utf-8"
    )
    (tmp_path / "actor.json").write_text('{"id": "alice", "tenant": "acme"}\n', encoding="utf-8")
    return tmp_path


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


GOOD = '{"id": "e1", "type": "assert", "ts": "2026-03-01T09:01:00Z", "actor": "w", "tenant": "acme", "fact": "F1", "key": "k", "value": 1}'
GOOD2 = GOOD.replace('"e1"', '"e2"').replace('"F1"', '"F2"').replace("09:01", "09:02")

# name -> (files to write into workdir, extra argv replacing the defaults, substrings stderr must hold)
LOG_ERRORS: dict[str, tuple[str | bytes, list[str]]] = {
    "invalid-json": (GOOD + "\n\n{oops\n", ["log.jsonl", "line 3"]),
    "unknown-field": (
        GOOD + "\n" + GOOD2.replace('"value": 1', '"value": 1, "colour": "red"') + "\n",
        ["line 2", "colour"],
    ),
    "nested-unknown-field": (
        GOOD2.replace('"value": 1', '"value": 1, "visibility": {"colour": "red"}') + "\n",
        ["line 1", "visibility.colour"],
    ),
    "float": (GOOD.replace('"value": 1', '"value": 1.5') + "\n", ["line 1", "value"]),
    "duplicate-id": (GOOD + "\n" + GOOD2.replace('"e2"', '"e1"') + "\n", ["line 2", "'id'"]),
    "unknown-reference": (
        GOOD + "\n" + GOOD2.replace('"value": 1', '"value": 1, "depends_on": ["F9"]') + "\n",
        ["line 2", "depends_on"],
    ),
    "ts-backwards": (GOOD2 + "\n" + GOOD.replace("09:01", "09:00") + "\n", ["line 2", "'ts'"]),
    "no-offset": (GOOD.replace("09:01:00Z", "09:01:00") + "\n", ["line 1", "'ts'"]),
    "error-after-at": (
        GOOD
        + "\n"
        + GOOD2.replace("2026-03-01T09:02", "2030-01-01T00:00").replace(
            '"value": 1', '"value": 1, "colour": 1'
        )
        + "\n",
        ["line 2", "colour"],
    ),
    "invalid-utf8": (
        GOOD.encode()
        + b"\n"
        + GOOD2.replace('"value": 1', '"value": "X"').encode().replace(b"X", b"\xff\xfe")
        + b"\n",
        ["log.jsonl", "line 2"],
    ),
}


class TestInputErrors:
    def check(self, done: subprocess.CompletedProcess[bytes], *needles: str) -> str:
        """Exit 2, nothing on stdout, and stderr naming every needle (the place of the error)."""
        err = done.stderr.decode("utf-8", "replace")
        assert done.returncode == 2, err
        assert done.stdout == b""
        for needle in needles:
            assert needle in err, (needle, err)
        return err

    @pytest.mark.parametrize("name", sorted(LOG_ERRORS))
    def test_log_error(self, workdir: Path, name: str) -> None:
        """A log input error exits 2 with the file, line and field on stderr and nothing on stdout."""
        text, needles = LOG_ERRORS[name]
        write(workdir / "log.jsonl", text)
        done = gamma(
            "resolve",
            "log.jsonl",
            "--actor",
            "actor.json",
            "--at",
            "2026-03-01T09:01:30Z",
            cwd=workdir,
        )
        self.check(done, *needles)

    def test_error_names_the_file(self, workdir: Path) -> None:
        """The error message starts with 'Error:' and names the log file and its field."""
        write(workdir / "log.jsonl", GOOD.replace('"key": "k"', '"key": 3') + "\n")
        err = self.check(
            gamma(
                "resolve",
                "log.jsonl",
                "--actor",
                "actor.json",
                "--at",
                "2026-03-02T00:00:00Z",
                cwd=workdir,
            ),
            "line 1",
            "'key'",
        )
        assert any(line.startswith("Error: log.jsonl") for line in err.splitlines()), err

    def test_error_logs_one_structured_line(self, workdir: Path) -> None:
        """With -v, an input error still logs exactly one structured line, with the error type
        as outcome (without it, only the one Error: line)."""
        write(workdir / "log.jsonl", "{oops\n")
        done = gamma(
            "-v",
            "resolve",
            "log.jsonl",
            "--actor",
            "actor.json",
            "--at",
            "2026-03-02T00:00:00Z",
            cwd=workdir,
        )
        records = log_lines(done.stderr)
        assert len(records) == 1
        assert records[0]["command"] == "resolve" and records[0]["outcome"] == "input_error"
        assert records[0]["status"] == 2 and records[0]["error"] == "JSONSyntaxError"

    @pytest.mark.parametrize(
        ("actor_text", "needles"),
        [
            ('{"id": "alice", "tenant": "acme", "colour": "red"}', ["colour"]),
            ('{"id": "alice"}', ["tenant"]),
            ('{"id": "alice", "tenant": "acme", "roles": true}', ["roles"]),
            ('{"id": "alice", "tenant": "acme", "clearance": "ultra"}', ["clearance"]),
            ('{"id": "alice", "tenant": "acme", "scope": "a//b"}', ["scope"]),
            ('{"id": "alice", "tenant": "acme", "id": "bob"}', ["id"]),
            ('{"id": "alice", "tenant": ', ["--actor"]),
        ],
        ids=[
            "unknown-field",
            "missing-tenant",
            "bool-roles",
            "unknown-clearance",
            "bad-scope",
            "duplicate-key",
            "invalid-json",
        ],
    )
    def test_inline_actor_error(self, workdir: Path, actor_text: str, needles: list[str]) -> None:
        """A malformed inline actor exits 2 naming the field."""
        done = gamma(
            "resolve",
            "log.jsonl",
            "--actor",
            actor_text,
            "--at",
            "2026-03-02T00:00:00Z",
            cwd=workdir,
        )
        self.check(done, *needles)

    def test_actor_file_error(self, workdir: Path) -> None:
        """A malformed actor file exits 2 naming the file and the field."""
        write(workdir / "actor.json", '{"id": "alice", "tenant": "acme", "colour": 1}\n')
        self.check(
            gamma(
                "resolve",
                "log.jsonl",
                "--actor",
                "actor.json",
                "--at",
                "2026-03-02T00:00:00Z",
                cwd=workdir,
            ),
            "actor.json",
            "colour",
        )

    def test_missing_actor_file(self, workdir: Path) -> None:
        """An actor path that does not exist exits 2."""
        self.check(
            gamma(
                "resolve",
                "log.jsonl",
                "--actor",
                "nobody.json",
                "--at",
                "2026-03-02T00:00:00Z",
                cwd=workdir,
            ),
            "nobody.json",
        )

    def test_policy_error(self, workdir: Path) -> None:
        """A policy with an unknown key exits 2 naming its line and dotted field."""
        write(workdir / "p.toml", '[authority]\ndefault = "peer"\nlevels = 3\n')
        done = gamma(
            "resolve",
            "log.jsonl",
            "--actor",
            "actor.json",
            "--at",
            "2026-03-02T00:00:00Z",
            "--policy",
            "p.toml",
            cwd=workdir,
        )
        self.check(done, "p.toml", "line 3", "authority.levels")

    def test_missing_policy_file(self, workdir: Path) -> None:
        """A --policy path that does not exist exits 2."""
        done = gamma(
            "resolve",
            "log.jsonl",
            "--actor",
            "actor.json",
            "--at",
            "2026-03-02T00:00:00Z",
            "--policy",
            "none.toml",
            cwd=workdir,
        )
        self.check(done, "none.toml")

    def test_log_validated_against_policy_ladder(self, workdir: Path) -> None:
        """An authority valid by default but not on --policy's ladder exits 2 naming the field."""
        write(workdir / "p.toml", '[authority]\nladder = ["low", "high"]\ndefault = "low"\n')
        write(
            workdir / "log.jsonl",
            GOOD.replace('"value": 1', '"value": 1, "authority": "peer"') + "\n",
        )
        done = gamma(
            "resolve",
            "log.jsonl",
            "--actor",
            "actor.json",
            "--at",
            "2026-03-02T00:00:00Z",
            "--policy",
            "p.toml",
            cwd=workdir,
        )
        self.check(done, "line 1", "authority")

    @pytest.mark.parametrize(
        "at",
        [
            "2026-03-02T10:00:00",
            "tomorrow",
            "2026-03-02",
            "\uff12\uff10\uff12\uff16-03-02T10:00:00Z",
        ],
        ids=["no-offset", "word", "date-only", "fullwidth-digits"],
    )
    def test_bad_at(self, workdir: Path, at: str) -> None:
        """An --at without offset or not RFC 3339 exits 2 naming --at."""
        self.check(
            gamma("resolve", "log.jsonl", "--actor", "actor.json", "--at", at, cwd=workdir), "--at"
        )

    def test_missing_log(self, workdir: Path) -> None:
        """A log path that does not exist exits 2 naming it."""
        self.check(
            gamma(
                "resolve",
                "absent.jsonl",
                "--actor",
                "actor.json",
                "--at",
                "2026-03-02T00:00:00Z",
                cwd=workdir,
            ),
            "absent.jsonl",
        )

    @pytest.mark.parametrize(
        "argv",
        [
            ["resolve", "log.jsonl", "--at", "2026-03-02T00:00:00Z"],
            ["resolve", "log.jsonl", "--actor", "actor.json"],
            [
                "resolve",
                "log.jsonl",
                "--actor",
                "actor.json",
                "--at",
                "2026-03-02T00:00:00Z",
                "--format",
                "yaml",
            ],
        ],
        ids=["no-actor", "no-at", "bad-format"],
    )
    def test_usage_errors(self, workdir: Path, argv: list[str]) -> None:
        """Missing options and an unknown format are usage errors: exit 2, nothing on stdout."""
        self.check(gamma(*argv, cwd=workdir))
