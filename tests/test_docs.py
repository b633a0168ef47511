"""Every console block of README.md and examples/README.md runs and prints what it shows.

A block holds ``$ command`` lines (a trailing backslash continues one) each followed by
its output. The output must match line for line, except that a ``...`` line stands for
any number of lines. Commands run from the checkout's root through ``sh``, with this
venv's ``gamma`` and ``python`` first on PATH and no log lines (``GAMMA_LOG_LEVEL=off``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "examples/README.md")
_BLOCK = re.compile(r"^```console\n(.*?)^```", re.MULTILINE | re.DOTALL)


def examples() -> list[tuple[str, str, list[str]]]:
    """(where, command, expected output lines) for every command of every console block."""
    found = []
    for doc in DOCS:
        text = (ROOT / doc).read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            line_no = text.count("\n", 0, match.start()) + 1
            lines = match.group(1).splitlines()
            i = 0
            while i < len(lines):
                if not lines[i].startswith("$ "):
                    raise AssertionError(f"{doc}:{line_no}: output before a command: {lines[i]!r}")
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
                found.append((f"{doc}:{line_no}", command, output))
    return found


def matches(expected: list[str], actual: list[str]) -> bool:
    """``actual`` equals ``expected`` where each ``...`` line matches any run of lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and actual[0] == expected[0] and matches(expected[1:], actual[1:])


EXAMPLES = examples()


def test_the_docs_have_console_blocks() -> None:
    assert {where.split(":")[0] for where, _, _ in EXAMPLES} == set(DOCS)
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize(("where", "command", "expected"), EXAMPLES,
                         ids=[f"{w}:{c.split()[1]}" for w, c, _ in EXAMPLES])
def test_console_block(where: str, command: str, expected: list[str]) -> None:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
           "GAMMA_LOG_LEVEL": "off"}
    run = subprocess.run(["sh", "-c", command], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    actual = (run.stdout + run.stderr).rstrip("\n").splitlines()
    assert matches(expected, actual), (
        f"{where}: $ {command}\n--- the docs show:\n" + "\n".join(expected)
        + "\n--- the command printed:\n" + "\n".join(actual)
    )
