"""Every shell and Python example of the docs runs as printed and prints what it shows.

The convention, for README.md, examples/README.md and docs/*.md:

- a fenced ```` ```console ```` block holds ``$ command`` lines (a trailing backslash
  continues one), each followed by the stdout it prints; the output must match line for
  line, except that a ``...`` line stands for any number of lines (stderr is not compared:
  it carries warnings); each command must exit 0, or the status its line names in a
  trailing comment (``$ gamma validate ...   # exit 1: a violation``);
- a fenced ```` ```sh ```` block is a script: it must exit 0 under ``sh -e``;
- a fenced ```` ```python ```` block is a program: it must exit 0;
- every other fence (``json``, ``toml``, ``yaml``, ``text``) is data or a synopsis with
  placeholders, never run; no indented line starts with a command (``$``, ``gamma``,
  ``python``, ``pip``): a command is fenced, so that this test sees it;
- a runnable block directly after ``<!-- runs in tests/test_x.py -->`` (or ``.ci/run``)
  is run there instead (the install lines, which need a fresh virtual environment).

The blocks of one document run in order in one working directory, as a reader pasting
them one by one would: a fresh copy of the clone's ``fixtures/``, ``policies/`` and
``examples/``, with this venv's ``gamma`` and ``python`` first on PATH and no log lines.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "examples/README.md",
        *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
RUNNABLE = ("console", "sh", "python")
COPIED = ("fixtures", "policies", "examples", "tests")
_STATUS = re.compile(r"#\s*exit (\d+)\b")  # a console command's shown exit status
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)
_ELSEWHERE = re.compile(r"<!-- runs in (tests/test_\w+\.py|\.ci/run) -->\n\Z")
_COMMAND = re.compile(r"^ {4}(\$ |gamma |python |pip )")


@attrs.frozen
class Block:
    """One fenced block of a document: where it starts, its language and its text."""

    doc: str
    line: int
    lang: str
    text: str
    elsewhere: str | None  # the test that runs it instead, if any


def blocks(doc: str) -> list[Block]:
    """Every fenced block of ``doc``, in order."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        before = _ELSEWHERE.search(text, 0, match.start())
        found.append(Block(doc, text.count("\n", 0, match.start()) + 1, match.group(1),
                           match.group(2), before.group(1) if before else None))
    return found


def indented_commands(doc: str) -> list[str]:
    """Lines of indented code blocks (outside fences) that look like commands."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    outside = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return [f"{doc}:{number}: {line.strip()}"
            for number, line in enumerate(outside.splitlines(), 1) if _COMMAND.match(line)]


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """(command, expected stdout lines) for every ``$`` line of a console block."""
    lines = block.text.splitlines()
    found, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise AssertionError(f"{block.doc}:{block.line}: output before a command: "
                                 f"{lines[i]!r}")
        command = lines[i][2:]
        while command.endswith("\\"):
            i += 1
            command = command + "\n" + lines[i]
        i += 1
        output = []
        while i < len(lines) and not lines[i].startswith("$ "):
            output.append(lines[i])
            i += 1
        while output and not output[-1]:
            output.pop()  # a blank line between two commands
        found.append((command, output))
    return found


def matches(expected: list[str], actual: list[str]) -> bool:
    """``actual`` equals ``expected`` where each ``...`` line matches any run of lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and actual[0] == expected[0] and matches(expected[1:], actual[1:])


BLOCKS = [b for doc in DOCS for b in blocks(doc) if b.lang in RUNNABLE and not b.elsewhere]


def _env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
            "GAMMA_LOG_LEVEL": "off"}


def _sh(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-e", "-c", script], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300, check=False)


def run_block(block: Block, cwd: Path) -> None:
    """Run one block in ``cwd``; AssertionError saying what differs."""
    where = f"{block.doc}:{block.line}"
    if block.lang == "console":
        for command, expected in commands(block):
            run = _sh(command, cwd)
            status = _STATUS.search(command)
            wanted = int(status.group(1)) if status else 0
            assert run.returncode == wanted, (f"{where}: $ {command}\nexit {run.returncode},"
                                              f" not {wanted}\n--- stderr:\n{run.stderr[-2000:]}")
            actual = run.stdout.rstrip("\n").splitlines()
            assert matches(expected, actual), (
                f"{where}: $ {command}\n--- the docs show:\n" + "\n".join(expected)
                + "\n--- the command printed:\n" + "\n".join(actual)
                + "\n--- stderr:\n" + run.stderr[-2000:])
        return
    if block.lang == "sh":
        run = _sh(block.text, cwd)
    else:
        program = cwd / f"block_{block.line}.py"
        program.write_text(block.text, encoding="utf-8")
        run = subprocess.run([sys.executable, program.name], cwd=cwd, env=_env(),
                             capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, (f"{where}: exit {run.returncode}\n{block.text}\n--- stdout:\n"
                                 f"{run.stdout[-2000:]}\n--- stderr:\n{run.stderr[-4000:]}")


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[Block]]]:
    """Per document: its working directory and the blocks already run in it."""
    return {}


def _workdir(doc: str, cache: dict[str, tuple[Path, list[Block]]],
             factory: pytest.TempPathFactory) -> tuple[Path, list[Block]]:
    if doc not in cache:
        cwd = factory.mktemp(re.sub(r"\W", "_", doc))
        for name in COPIED:  # symlinks=False: the clone's links to gamma/data become files
            shutil.copytree(ROOT / name, cwd / name, ignore=shutil.ignore_patterns(
                "__pycache__", "*.pyc"))
        cache[doc] = (cwd, [])
    return cache[doc]


def test_the_docs_have_runnable_blocks() -> None:
    assert {b.doc for b in BLOCKS} >= {"README.md", "examples/README.md"}
    assert {b.lang for b in BLOCKS} == set(RUNNABLE)
    assert len(BLOCKS) >= 15


def test_no_command_hides_in_an_indented_block() -> None:
    assert [line for doc in DOCS for line in indented_commands(doc)] == []


def test_blocks_run_elsewhere_name_a_test_that_reads_them() -> None:
    elsewhere = [b for doc in DOCS for b in blocks(doc) if b.elsewhere]
    assert elsewhere, "the install lines run in tests/test_wheel.py"
    for block in elsewhere:
        assert "README" in (ROOT / block.elsewhere).read_text(encoding="utf-8"), block


#: A block that imports one of these integrations runs only where its extra is installed.
EXTRAS = {"langgraph": "langgraph", "mcp": "mcp"}


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.doc}:{b.line}:{b.lang}" for b in BLOCKS])
def test_block(block: Block, workdirs: dict[str, tuple[Path, list[Block]]],
               tmp_path_factory: pytest.TempPathFactory) -> None:
    missing = [extra for extra, module in EXTRAS.items()
               if f"gamma.integrations.{extra}" in block.text and importlib.util.find_spec(module) is None]  # fmt: skip
    if missing:  # the README's test command installs only the test extra
        pytest.skip(f"needs the extra {missing[0]!r}")
    cwd, done = _workdir(block.doc, workdirs, tmp_path_factory)
    for earlier in [b for b in BLOCKS if b.doc == block.doc and b.line < block.line]:
        if earlier not in done:  # run alone (-k): what it builds on first (its own test checks it)
            done.append(earlier)
            with contextlib.suppress(AssertionError):
                run_block(earlier, cwd)
    done.append(block)
    run_block(block, cwd)


def test_matches() -> None:
    assert matches(["a", "...", "z"], ["a", "b", "c", "z"])
    assert matches(["a", "...", "z"], ["a", "z"])
    assert not matches(["a", "...", "z"], ["a", "b"])
    assert not matches(["a"], ["a", "b"])
