"""The external-system protocol client: misbehaving systems are reported per case, never fatal.

Each system is a tiny script in ``tmp_path``. A well-behaved answer is the agent-level
``{"id", "response": "no current value"}`` (a pass or a fail, never an error), so the
cases around a misbehaving one show that the runner recovered.
"""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gamma.conformance.cases import Case, load_cases
from gamma.conformance.external import REQUEST_FIELDS, ExternalSystem, parse_reply, request_for
from gamma.conformance.runner import run
from gamma.core.terms.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
NAMES = [
    "factorial/fx-draft-adaptable-sales.json",
    "counterfactual/cf-supersession-sales-positive.json",
    "counterfactual/cf-supersession-sales-counterfactual.json",
    "trap/trap-anti-trap-finance-hypothetical.json",
    "factorial/fx-draft-adaptable-finance.json",
]
CASES: tuple[Case, ...] = tuple(c for n in NAMES for c in load_cases(FIXTURES / n))
IDS = [c.id for c in CASES]

# The prologue of every script: a counter of requests seen by *all* its processes (a file,
# so a restarted process knows it was restarted) and a well-behaved reply.
PROLOGUE = """
import json, os, pathlib, signal, sys, time
COUNT = pathlib.Path({count!r})
def seen():
    n = int(COUNT.read_text()) + 1 if COUNT.exists() else 1
    COUNT.write_text(str(n))
    return n
def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\\n"); sys.stdout.flush()
def good(case):
    reply({{"id": case["id"], "response": "no current value"}})
"""


def script(tmp_path: Path, body: str, name: str = "system.py") -> str:
    """A system command: Python running ``body`` after the prologue."""
    path = tmp_path / name
    path.write_text(PROLOGUE.format(count=str(tmp_path / f"{name}.count")) + textwrap.dedent(body))
    return f"{sys.executable} {path}"


def loop(body: str) -> str:
    """A request loop: ``n`` counts requests across restarts, ``case`` is the request."""
    return "for line in sys.stdin:\n    case = json.loads(line); n = seen()\n" + textwrap.indent(
        textwrap.dedent(body), "    ")


def statuses(report_results: object) -> list[str]:
    return [r.status for r in report_results]  # type: ignore[attr-defined]


def problems(result: object) -> str:
    return " ".join(result.problems)  # type: ignore[attr-defined]


class TestWellBehaved:
    def test_request_carries_exactly_the_protocol_fields(self) -> None:
        """The request is what a system may know: no expect, pool, probe or labels."""
        request = request_for(CASES[0])
        assert tuple(sorted(request)) == tuple(sorted(REQUEST_FIELDS))
        assert request["policy"]["authority"]["default"] == "peer"
        assert request["at"] == "2026-03-09T10:00:00Z" and request["events"][0]["id"] == "e01"

    def test_one_process_serves_every_case(self, tmp_path: Path) -> None:
        """A system that answers each line is started once and every case gets its reply."""
        command = script(tmp_path, loop("good(case)"))
        with ExternalSystem(command, timeout=5) as system:
            exchanges = [system.ask(c) for c in CASES]
        assert all(e.reply is not None and e.error is None for e in exchanges)
        assert system.starts == 1

    def test_request_is_one_ascii_line(self, tmp_path: Path) -> None:
        """Non-ASCII in a case is escaped, so the request is one ASCII line in any locale."""
        out = tmp_path / "seen.txt"
        command = script(tmp_path, loop(f"pathlib.Path({str(out)!r}).write_text(line); good(case)"))
        case = load_cases(FIXTURES / "adversarial/adv-lookalike-key.json")[0]
        with ExternalSystem(command, timeout=5) as system:
            assert system.ask(case).reply is not None
        raw = out.read_bytes()
        assert raw.count(b"\n") == 1 and raw.isascii()
        assert json.loads(raw)["id"] == case.id

    def test_noisy_stderr_does_not_block(self, tmp_path: Path) -> None:
        """A system writing megabytes to stderr is drained, not deadlocked."""
        command = script(tmp_path, loop('sys.stderr.write("x" * 1_000_000); sys.stderr.flush(); good(case)'))
        report = run(CASES[:2], system=command, timeout=10)
        assert "error" not in statuses(report.results)


class TestMisbehaving:
    def test_crash_mid_stream(self, tmp_path: Path) -> None:
        """A crash fails that case, names the status and stderr; a new process serves the rest."""
        command = script(tmp_path, loop("""
            if n == 3:
                sys.stderr.write("segfault-ish\\n"); sys.stderr.flush(); os._exit(3)
            good(case)
        """))
        report = run(CASES, system=command, timeout=5)
        assert statuses(report.results)[2] == "error"
        assert "error" not in statuses(report.results)[:2] + statuses(report.results)[3:]
        message = problems(report.results[2])
        assert "exited with status 3" in message and "segfault-ish" in message
        assert report.exit_code == 1 and not report.ok

    def test_killed_by_a_signal(self, tmp_path: Path) -> None:
        """A system killed by a signal is reported as such."""
        command = script(tmp_path, loop("""
            if n == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            good(case)
        """))
        report = run(CASES[:2], system=command, timeout=5)
        assert [s == "error" for s in statuses(report.results)] == [True, False]
        assert "killed by signal 9" in problems(report.results[0])

    def test_hang_past_timeout(self, tmp_path: Path) -> None:
        """A hang is killed at the timeout, reported for that case, and the system restarted."""
        command = script(tmp_path, loop("""
            if n == 2:
                time.sleep(60)
            good(case)
        """))
        started = time.monotonic()
        report = run(CASES[:3], system=command, timeout=1)
        assert time.monotonic() - started < 10
        assert [s == "error" for s in statuses(report.results)] == [False, True, False]
        assert "no reply within 1s" in problems(report.results[1])

    def test_hang_in_a_grandchild(self, tmp_path: Path) -> None:
        """A system started through a shell is killed as a whole process group."""
        body = script(tmp_path, loop("time.sleep(60)"))
        started = time.monotonic()
        report = run(CASES[:1], system=f"sh -c '{body}'", timeout=0.5)
        assert statuses(report.results) == ["error"]
        assert time.monotonic() - started < 10

    def test_helpers_left_behind_are_killed(self, tmp_path: Path) -> None:
        """A helper holding the system's pipes after it exits does not keep gamma waiting."""
        pid_file = tmp_path / "helper.pid"
        command = script(tmp_path, textwrap.dedent(f"""
            import subprocess
            helper = subprocess.Popen(["sleep", "60"])
            pathlib.Path({str(pid_file)!r}).write_text(str(helper.pid))
        """) + loop("good(case)"))
        started = time.monotonic()
        report = run(CASES[:2], system=command, timeout=5)
        assert "error" not in statuses(report.results)
        assert time.monotonic() - started < 10
        helper = int(pid_file.read_text())
        assert _gone_within(helper, seconds=3.0)

    def test_system_that_never_reads_stdin(self, tmp_path: Path) -> None:
        """A request larger than a pipe buffer to a system that never reads cannot block gamma."""
        command = script(tmp_path, "time.sleep(60)\n")
        big = load_cases(FIXTURES / "adversarial/adv-chain-dependency-1000.json")
        assert len(json.dumps(request_for(big[0]))) > 200_000
        started = time.monotonic()
        report = run(big, system=command, timeout=0.5)
        assert statuses(report.results) == ["error"]
        assert time.monotonic() - started < 10

    def test_garbage(self, tmp_path: Path) -> None:
        """A line that is not JSON fails its case; the next case gets a fresh process."""
        command = script(tmp_path, loop("""
            if n == 2:
                print("Sure! Here is the answer you asked for:", flush=True)
            else:
                good(case)
        """))
        report = run(CASES[:3], system=command, timeout=5)
        assert [s == "error" for s in statuses(report.results)] == [False, True, False]
        assert "not JSON" in problems(report.results[1])

    @pytest.mark.parametrize(
        ("number", "field"),
        [("9" * 5000, "admitted"), ("9007199254740993", "admitted"), ("1.5", "admitted")],
    )
    def test_a_number_json_cannot_hold_safely(self, tmp_path: Path, number: str, field: str) -> None:
        """An integer of 5,000 digits (int() refuses it) or past 2^53, or a float, is a per-case error
        naming the field, never "not JSON" nor a crash; the next case goes on (SPEC §14)."""
        command = script(tmp_path, loop(f"""
            if n == 2:
                sys.stdout.write('{{"id": ' + json.dumps(case["id"]) + ', "admitted": [{number}]}}\\n')
                sys.stdout.flush()
            else:
                good(case)
        """))
        report = run(CASES[:3], system=command, timeout=5)
        assert [s == "error" for s in statuses(report.results)] == [False, True, False]
        assert f"reply field {field!r}" in problems(report.results[1])
        assert "not JSON" not in problems(report.results[1])

    def test_binary_garbage(self, tmp_path: Path) -> None:
        """Bytes that are not UTF-8 are garbage too, reported escaped."""
        command = script(tmp_path, loop('sys.stdout.buffer.write(b"\\xff\\xfe\\x00\\n"); sys.stdout.flush()'))
        report = run(CASES[:1], system=command, timeout=5)
        assert "not UTF-8" in problems(report.results[0])

    def test_wrong_ids(self, tmp_path: Path) -> None:
        """A reply for another case never counts for this one; each case is an error."""
        command = script(tmp_path, loop('reply({"id": "someone-else", "response": "no current value"})'))
        with ExternalSystem(command, timeout=5) as system:
            exchanges = [system.ask(c) for c in CASES[:3]]
        assert all(e.reply is None and "someone-else" in (e.error or "") for e in exchanges)
        assert system.starts == 3  # restarted after each, to get back in step

    def test_two_lines_for_one_case(self, tmp_path: Path) -> None:
        """An extra line is out of step: the next case sees a reply for the previous id."""
        command = script(tmp_path, loop("""
            good(case)
            if n == 1:
                good(case)
        """))
        report = run(CASES[:3], system=command, timeout=5)
        assert [s == "error" for s in statuses(report.results)] == [False, True, False]
        assert f'reply for id "{IDS[0]}", expected {IDS[1]!r}' in problems(report.results[1])

    def test_prints_nothing_and_exits(self, tmp_path: Path) -> None:
        """A system that exits without a word fails every case, restarted each time."""
        command = script(tmp_path, "sys.stdin.readline()\n")
        report = run(CASES[:2], system=command, timeout=5)
        assert statuses(report.results) == ["error", "error"]
        assert all("exited with status 0 before replying" in problems(r) for r in report.results)

    def test_prints_nothing_and_waits(self, tmp_path: Path) -> None:
        """A silent system that keeps reading times out, case by case."""
        command = script(tmp_path, loop("pass"))
        report = run(CASES[:2], system=command, timeout=0.5)
        assert statuses(report.results) == ["error", "error"]
        assert all("no reply within 0.5s" in problems(r) for r in report.results)

    def test_invalid_reply_keeps_the_process(self, tmp_path: Path) -> None:
        """A well-framed reply with a bad field fails its case without a restart."""
        command = script(tmp_path, loop("""
            if n == 1:
                reply({"id": case["id"], "admitted": [], "excluded": {"D1": ["forbidden"]}})
            else:
                good(case)
        """))
        with ExternalSystem(command, timeout=5) as system:
            first, second = system.ask(CASES[0]), system.ask(CASES[1])
        assert first.reply is None and "reason codes" in (first.error or "")
        assert second.reply is not None and system.starts == 1

    def test_declined_case(self, tmp_path: Path) -> None:
        """A system may decline a case with ``error``: reported, not a crash."""
        command = script(tmp_path, loop('reply({"id": case["id"], "error": "no idea"})'))
        report = run(CASES[:1], system=command, timeout=5)
        assert statuses(report.results) == ["error"]
        assert "declined the case: no idea" in problems(report.results[0])

    def test_command_that_cannot_start(self, tmp_path: Path) -> None:
        """A command that does not exist is an input error, not a per-case failure."""
        with pytest.raises(InputError, match="cannot start"):
            run(CASES[:1], system=str(tmp_path / "no-such-system"))
        with pytest.raises(InputError, match="empty"):
            ExternalSystem("  ")


class TestParseReply:
    def test_resolver_and_agent_levels(self) -> None:
        reply = parse_reply({"id": "c", "admitted": ["F1"], "needs_recheck": ["F1"],
                             "excluded": {"F2": ["superseded"]}, "experiences": {"X1": "adapt"},
                             "ignored": {"e3": "insufficient_authority"}, "response": "r",
                             "context": "ctx", "verdict": "KEEP", "bindings": {"F2": "F1"}}, "c")
        assert reply.admitted == ("F1",) and reply.excluded == {"F2": ("superseded",)}
        assert reply.experiences == {"X1": "ADAPT"} and reply.verdict == "KEEP"
        assert reply.bindings == {"F2": "F1"} and reply.needs_recheck == ("F1",)

    @pytest.mark.parametrize(
        ("obj", "message"),
        [
            ([], "JSON object"),
            ({"response": "x"}, "reply for id"),
            ({"id": "c"}, "needs 'admitted', 'response' or 'error'"),
            ({"id": "c", "excluded": {}}, "needs 'admitted'"),
            ({"id": "c", "admitted": "F1"}, "list of strings"),
            ({"id": "c", "admitted": [], "colour": 1}, "unknown reply fields"),
            ({"id": "c", "response": 3}, "'response' must be a string"),
            ({"id": "c", "response": "x", "verdict": "MAYBE"}, "KEEP, ADAPT or REJECT"),
            ({"id": "c", "response": "x", "bindings": {"F1": 2}}, "must be a string"),
        ],
    )
    def test_invalid(self, obj: object, message: str) -> None:
        with pytest.raises(ValueError, match=message):
            parse_reply(obj, "c")


def _gone_within(pid: int, *, seconds: float) -> bool:
    """Whether process ``pid`` is gone or a zombie within ``seconds`` (a kill is not instant)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
