"""The edges a user outside the repository meets: stdin, --at now, log levels, named policies,
verify's words and exit statuses, gamma log over a file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import structlog
from click.testing import CliRunner

import gamma as gamma_api
import gamma.cli.resolve as resolve_module
from gamma.cli import main
from gamma.cli.options import unknown_names

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "fixtures" / "examples"
LOG = EXAMPLES / "acme.jsonl"
ALICE = EXAMPLES / "alice.json"
AT = "2026-03-09T10:00:00Z"
KEY = "a key of thirty-two bytes, ok!!!"


def gamma(*args: object, input: bytes | str | None = None,
          env: dict[str, str | None] | None = None) -> tuple[int, str, str]:
    runner = CliRunner()
    code = 0
    with runner.isolation(input=input, env={"GAMMA_CHAIN_KEY": None, **(env or {})}) as (
        out, err, _,
    ):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    structlog.reset_defaults()
    return code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8")


def log_lines(err: str) -> list[dict[str, object]]:
    return [json.loads(x) for x in err.splitlines() if x.startswith("{")]


class TestStdin:
    def test_log_actor_and_response_from_stdin(self) -> None:
        """`-` reads stdin for LOG, --actor and --response; the output equals the file's."""
        want = gamma("resolve", LOG, "--actor", ALICE, "--at", AT)[1]
        assert gamma("resolve", "-", "--actor", ALICE, "--at", AT, input=LOG.read_bytes())[1] == want
        assert gamma("resolve", LOG, "--actor", "-", "--at", AT, input=ALICE.read_bytes())[1] == want
        code, out, _ = gamma("validate", LOG, "--actor", ALICE, "--at", AT, "--question",
                             "What is the discount?", "--response", "-", input="It is 15%.")
        assert code == 0 and json.loads(out)["ok"] is True

    def test_two_dashes_is_a_usage_error(self) -> None:
        code, _, err = gamma("resolve", "-", "--actor", "-", "--at", AT, input="")
        assert code == 2 and "LOG and --actor both read -" in err

    def test_verify_and_log_from_stdin(self, tmp_path: Path) -> None:
        head = gamma("verify", LOG)[1]
        assert gamma("verify", "-", input=LOG.read_bytes())[1] == head
        code, out, _ = gamma("log", "-", "--until", "2026-03-01T09:20:00Z", input=LOG.read_bytes())
        assert code == 0 and out
        assert gamma("log", LOG, "--until", "2026-03-01T09:20:00Z")[1] == out

    def test_log_reads_a_file_like_a_store(self, tmp_path: Path) -> None:
        """gamma log over the JSONL file prints what it prints over a store of the same events."""
        store = tmp_path / "s.db"
        assert gamma("init", store)[0] == 0
        assert gamma("append", store, LOG)[0] == 0
        for args in ([], ["--tenant", "acme"], ["--since", "2026-03-01T09:20:00Z"]):
            from_store = gamma("log", store, *args)
            from_file = gamma("log", LOG, *args)
            assert from_store[0] == from_file[0] == 0
            assert from_store[1] == from_file[1] and from_file[1]


class TestAtNow:
    def test_gamma_now_pins_now_and_is_printed(self) -> None:
        code, out, err = gamma("-v", "resolve", LOG, "--actor", ALICE, "--at", "now",
                               env={"GAMMA_NOW": AT})
        assert code == 0 and f"at {AT}" in out.splitlines()[0]
        assert log_lines(err)[0]["at"] == AT
        assert out == gamma("resolve", LOG, "--actor", ALICE, "--at", AT)[1]

    def test_now_from_the_clock(self) -> None:
        code, out, _ = gamma("resolve", LOG, "--actor", ALICE, "--at", "now", "--format", "json",
                             env={"GAMMA_NOW": None})
        assert code == 0 and json.loads(out)["at"].startswith("20")

    def test_bad_gamma_now(self) -> None:
        code, _, err = gamma("resolve", LOG, "--actor", ALICE, "--at", "now",
                             env={"GAMMA_NOW": "yesterday"})
        assert code == 2 and "GAMMA_NOW" in err


class TestLogLevels:
    @pytest.mark.parametrize("args", [["--help"], ["--version"], ["resolve", "--help"]])
    def test_help_and_version_log_nothing(self, args: list[str]) -> None:
        code, out, err = gamma(*args)
        assert code == 0 and out and err == ""

    def test_quiet(self) -> None:
        code, out, err = gamma("--quiet", "resolve", LOG, "--actor", ALICE, "--at", AT)
        assert code == 0 and out and err == ""

    def test_no_log_line_unless_asked(self) -> None:
        """A success or a refusal writes no structured line unless -v or GAMMA_LOG_LEVEL asks."""
        assert gamma("resolve", LOG, "--actor", ALICE, "--at", AT)[2] == ""
        code, _, err = gamma("verify", ROOT / "missing.jsonl")
        assert code == 2 and err.startswith("Error: ") and len(err.splitlines()) == 1
        for flag in ("-v", "--verbose"):
            (line,) = log_lines(gamma(flag, "resolve", LOG, "--actor", ALICE, "--at", AT)[2])
            assert line["command"] == "resolve" and line["outcome"] == "ok"
        code, _, err = gamma("-q", "-v", "resolve", LOG, "--actor", ALICE, "--at", AT)
        assert code == 2 and "--quiet or --verbose" in err

    def test_level_from_env(self) -> None:
        """GAMMA_LOG_LEVEL asks for the line, at least at that level."""
        assert log_lines(gamma("verify", LOG, env={"GAMMA_LOG_LEVEL": "info"})[2])
        assert gamma("verify", LOG, env={"GAMMA_LOG_LEVEL": "warning"})[2] == ""
        assert gamma("verify", LOG, env={"GAMMA_LOG_LEVEL": "off"})[2] == ""
        code, _, err = gamma("verify", ROOT / "missing.jsonl", env={"GAMMA_LOG_LEVEL": "warning"})
        assert code == 2 and log_lines(err)[0]["outcome"] == "input_error"
        code, _, err = gamma("verify", LOG, env={"GAMMA_LOG_LEVEL": "loud"})
        assert code == 2 and "GAMMA_LOG_LEVEL" in err


class TestNamedPolicies:
    def test_policies_lists_the_five(self) -> None:
        code, out, _ = gamma("policies", "--json")
        rows = [json.loads(line) for line in out.splitlines()]
        assert code == 0 and [r["name"] for r in rows] == ["default", "strict", "recheck",
                                                           "multivalue", "recompute"]
        for row in rows:
            _, resolved, _ = gamma("resolve", LOG, "--actor", ALICE, "--at", AT, "--policy",
                                   row["name"], "--format", "json")
            _, by_file, _ = gamma("resolve", LOG, "--actor", ALICE, "--at", AT, "--policy",
                                  row["file"], "--format", "json")
            assert json.loads(resolved)["policy"] == row["digest"] and resolved == by_file

    def test_unknown_name(self) -> None:
        code, _, err = gamma("resolve", LOG, "--actor", ALICE, "--at", AT, "--policy", "lenient")
        assert code == 2 and "strict" in err

    def test_conformance_runs_the_bundled_corpus_anywhere(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        code, out, _ = gamma("conformance", "--suite", "trap")
        assert code == 0 and out.rstrip().endswith("OK")


class TestVerifyWords:
    @pytest.fixture
    def store(self, tmp_path: Path) -> Path:
        target = tmp_path / "s.db"
        gamma("init", target)
        gamma("append", target, LOG)
        return target

    def tamper(self, store: Path, sql: str) -> None:
        conn = sqlite3.connect(store, isolation_level=None)
        for trigger in ("events_no_update", "events_no_delete"):
            conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        conn.execute(sql)
        conn.close()

    def test_grown(self, store: Path, tmp_path: Path) -> None:
        short = tmp_path / "short.jsonl"
        short.write_text("".join(LOG.read_text().splitlines(keepends=True)[:5]))
        head = gamma("verify", short)[1].strip()
        code, _, err = gamma("verify", store, "--expect-head", head)
        assert code == 1 and err.startswith("grown: ")
        assert gamma("verify", store, "--expect-prefix", head)[0] == 0

    @pytest.mark.parametrize(
        ("sql", "words"),
        [
            ("UPDATE events SET body = body || ' ' WHERE position = 3",
             "tampered at position 3 (edited)"),
            ("DELETE FROM events WHERE position = 4", "tampered at position 5 (deleted)"),
        ],
    )
    def test_tampered(self, store: Path, sql: str, words: str) -> None:
        self.tamper(store, sql)
        code, _, err = gamma("verify", store)
        assert code == 1 and err.startswith(words), err
        assert json.loads(gamma("verify", store, "--json")[1])["verdict"] == words

    def test_not_keyed_and_wrong_key(self, store: Path, tmp_path: Path) -> None:
        code, _, err = gamma("verify", store, env={"GAMMA_CHAIN_KEY": KEY})
        assert code == 2 and err.startswith("not keyed: ")
        keyed = tmp_path / "k.db"
        gamma("init", keyed, env={"GAMMA_CHAIN_KEY": KEY})
        gamma("append", keyed, LOG, env={"GAMMA_CHAIN_KEY": KEY})
        assert gamma("verify", keyed, env={"GAMMA_CHAIN_KEY": KEY})[0] == 0
        code, _, err = gamma("verify", keyed, env={"GAMMA_CHAIN_KEY": "another key, 32 bytes long!!"})
        assert code == 1 and err.startswith("wrong key: ")


class TestOutsideTheCheckout:
    def test_case_with_a_named_policy_outside_any_policies_dir(self, tmp_path: Path) -> None:
        """A user's own case naming "strict" finds the bundled policy (no policies/ there)."""
        case = json.loads((ROOT / "fixtures" / "adversarial"
                           / "adv-authority-strict-unattributed.json").read_text())
        assert case["policy"] == "strict"
        (tmp_path / "mine.json").write_text(json.dumps(case))
        code, out, _ = gamma("conformance", tmp_path / "mine.json")
        assert code == 0 and "PASS" in out
        case["policy"] = "lenient"
        (tmp_path / "mine.json").write_text(json.dumps(case))
        code, _, err = gamma("conformance", tmp_path / "mine.json")
        assert code == 2 and "multivalue" in err

    def test_replay_and_score_from_stdin(self, tmp_path: Path) -> None:
        record = tmp_path / "a.json"
        assert gamma("resolve", LOG, "--actor", ALICE, "--at", AT, "--audit", record)[0] == 0
        code, out, _ = gamma("replay", "-", "--expect", record, input=LOG.read_bytes())
        assert code == 0 and out.startswith("identical")
        responses = EXAMPLES / "responses.jsonl"
        want = gamma("score", responses, "--log", LOG, "--json")[1]
        assert gamma("score", "-", "--log", LOG, "--json", input=responses.read_bytes())[1] == want
        assert gamma("score", responses, "--log", "-", "--json", input=LOG.read_bytes())[1] == want


class TestHonest:
    """Names that occur nowhere in the log are said so; each flag's error names that flag."""

    def test_unknown_tenant_and_key_are_warned(self) -> None:
        stranger = '{"id": "bob", "tenant": "nobody"}'
        code, out, err = gamma("resolve", LOG, "--actor", stranger, "--at", AT, "--format",
                               "context", "--key", "discount", "--key", "no_such_key")
        assert code == 0 and out.startswith("# Authorized state for bob")
        assert err.splitlines() == [
            "Warning: tenant 'nobody' occurs nowhere in the log: nothing is admitted to its actors",
            "Warning: actor 'bob' occurs nowhere in the log: no event is written by it or names it",
            "Warning: key 'no_such_key' occurs nowhere in the log",
        ]
        assert gamma("resolve", LOG, "--actor", ALICE, "--at", AT)[2] == ""  # known: silent

    def test_log_of_an_unknown_tenant_is_warned(self, tmp_path: Path) -> None:
        """`gamma log --tenant T` of a file or a store with no event of T says so; a known
        tenant's empty time range is an honest empty answer, said nothing of."""
        store = tmp_path / "s.db"
        assert gamma("init", store)[0] == 0 and gamma("append", store, LOG)[0] == 0
        warning = "Warning: tenant 'nope' occurs nowhere in the log: nothing is admitted to its actors\n"
        for source in (LOG, store):
            assert gamma("log", source, "--tenant", "nope") == (0, "", warning)
            late = gamma("log", source, "--tenant", "acme", "--since", "2030-01-01T00:00:00Z")
            assert late == (0, "", "")

    def test_explain_of_an_unknown_fact_exits_2(self) -> None:
        code, out, err = gamma("explain", LOG, "F99", "--actor", ALICE, "--at", AT)
        assert (code, out, err) == (2, "", "Error: FACT: no fact 'F99' in the log\n")
        assert gamma("explain", LOG, "F1", "--actor", ALICE, "--at", AT)[0] == 0

    def test_report_flags_name_themselves(self, tmp_path: Path) -> None:
        base = ("report", LOG, "--actor", ALICE, "--at", AT)
        code, _, err = gamma(*base, "--compare", "soon", "--out", tmp_path / "r.html")
        assert code == 2 and err.startswith("Error: --compare: not an RFC 3339") and "--at" not in err
        code, _, err = gamma(*base, "--out", tmp_path / "missing" / "r.html")
        assert (code, err) == (2, f"Error: --out: no such folder {str(tmp_path / 'missing')!r}\n")
        assert list(tmp_path.iterdir()) == []

    def test_review_is_quiet_unless_asked(self, tmp_path: Path) -> None:
        actors = tmp_path / "actors.jsonl"
        actors.write_text(ALICE.read_text().replace("\n", " ") + "\n"
                          + '{"id": "z", "tenant": "nobody"}\n')  # fmt: skip
        args = ("review", LOG, "--actors", actors, "--at", AT, "--out", tmp_path / "out")
        code, out, err = gamma(*args)
        assert code == 0 and out.startswith("reviewed 2 actors")
        assert err == "Warning: tenant 'nobody' occurs nowhere in the log: nothing is admitted to its actors\n"
        lines = log_lines(gamma("-v", *args)[2])
        assert [x.get("tenant") for x in lines if x["event"] == "tenant"] == ["acme", "nobody"]
        assert [x["command"] for x in lines if x["event"] == "command"] == ["review"]
        assert log_lines(gamma("-q", *args)[2]) == []
        code, _, err = gamma("review", LOG, "--actors", actors, "--at", AT, "--out", actors / "x")
        assert code == 2 and err.startswith("Error: --out: cannot make the folder")
        code, _, err = gamma(*args, "--since", "later")
        assert code == 2 and err.startswith("Error: --since: ")

    def test_an_unexpected_exception_is_one_line(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The backstop: a bug is one line naming its type and place, exit 4, no traceback."""
        def broken(*args: object, **kwargs: object) -> None:
            raise KeyError("boom")

        monkeypatch.setattr(resolve_module, "resolve", broken)
        code, out, err = gamma("resolve", LOG, "--actor", ALICE, "--at", AT)
        assert (code, out) == (4, "") and "Traceback" not in err
        assert err.startswith("Error: internal error, please report it: KeyError at ")
        assert "in broken: 'boom'" in err and len(err.splitlines()) == 1


class TestUnknownActor:
    """An actor id that occurs nowhere in the log (no event written by it, no visibility or
    grant naming it) is said so on stderr: its empty answer is honest but rarely meant."""

    NOBODY = '{"id": "nobody", "tenant": "acme", "roles": ["sales"]}'

    def test_resolve_explain_report_warn(self, tmp_path: Path) -> None:
        runs = {
            "resolve": gamma("resolve", LOG, "--actor", self.NOBODY, "--at", AT),
            "explain": gamma("explain", LOG, "F1", "--actor", self.NOBODY, "--at", AT),
            "report": gamma("report", LOG, "--actor", self.NOBODY, "--at", AT,
                            "--out", tmp_path / "r.html"),
        }
        for name, (code, _, err) in runs.items():
            assert code == 0, (name, err)
            assert err == "Warning: actor 'nobody' occurs nowhere in the log: no event is written" \
                " by it or names it\n", (name, err)

    def test_a_known_actor_is_not_warned_about(self) -> None:
        code, _, err = gamma("resolve", LOG, "--actor", ALICE, "--at", AT)
        assert code == 0 and err == ""

    def test_an_actor_named_only_by_visibility_is_known(self) -> None:
        events = gamma_api.parse_events([
            '{"id":"e1","type":"assert","ts":"2026-03-01T09:00:00Z","actor":"crm","tenant":"t",'
            '"fact":"F1","key":"k","value":1,"visibility":{"actors":["vera"]}}',
        ])  # fmt: skip
        assert unknown_names(events, actors=["vera", "crm", "zed", "zed"]) == [
            "actor 'zed' occurs nowhere in the log: no event is written by it or names it"]


class TestEndlessOptionFiles:
    """``--response @FILE`` and ``--context @FILE`` are read with no line past the limit."""

    def test_response_and_context_files_past_the_limit(self, tmp_path: Path) -> None:
        big = tmp_path / "big.txt"
        big.write_bytes(b"x" * (1 << 20) + b"x")
        base = ["validate", LOG, "--actor", ALICE, "--at", AT, "--question", "q"]
        for extra in (["--response", f"@{big}"], ["--response", "r", "--context", f"@{big}"]):
            code, _, err = gamma(*base, *extra)
            assert code == 2 and err.startswith(f"Error: {big}, line 1: a line of more than"), err
        small = tmp_path / "small.txt"
        small.write_text("It is 15%.", encoding="utf-8")
        code, out, _ = gamma(*base, "--response", f"@{small}")
        assert code == 0 and json.loads(out)["ok"] is True
