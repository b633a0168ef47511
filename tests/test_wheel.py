"""The built wheel, installed outside the checkout, runs the bundled corpus and named policies.

Builds the wheel (pip, from PyPI's setuptools), installs it with its dependencies into a
fresh virtual environment without the system's site-packages, and runs the console script
from a directory that is not the checkout. About 20-40 s, most of it pip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.wheel


def _run(*args: str | Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["GAMMA_LOG_LEVEL"] = "off"
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def test_wheel_outside_the_checkout(tmp_path: Path) -> None:
    dist, elsewhere, source = tmp_path / "dist", tmp_path / "elsewhere", tmp_path / "source"
    elsewhere.mkdir()
    # a clean copy: setuptools builds in the tree, and a stale build/ would leak old files
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".venv", ".hypothesis"))
    built = _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
                 dist, source, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("gamma-*.whl")
    venv.create(tmp_path / "venv", with_pip=True, system_site_packages=False)
    bin_dir = tmp_path / "venv" / ("Scripts" if os.name == "nt" else "bin")
    installed = _run(bin_dir / "python", "-m", "pip", "install", "--quiet",
                     "--disable-pip-version-check", wheel, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    gamma = bin_dir / "gamma"

    run = _run(gamma, "conformance", cwd=elsewhere)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr
    assert run.stdout.startswith("gamma conformance: the reference resolver, ")
    assert run.stdout.rstrip().endswith("OK")
    lines = run.stdout.splitlines()
    assert sum(line.startswith("PASS ") for line in lines) >= 200

    examples = ROOT / "fixtures" / "examples"
    run = _run(gamma, "resolve", examples / "acme.jsonl", "--actor", examples / "alice.json",
               "--at", "2026-03-09T10:00:00Z", "--policy", "strict", cwd=elsewhere)
    assert run.returncode == 0, run.stderr
    strict = _run(gamma, "policies", cwd=elsewhere)
    digest = next(line.split()[1] for line in strict.stdout.splitlines() if line.startswith("strict"))
    assert f"policy   {digest}" in run.stdout
    assert run.stderr == ""  # GAMMA_LOG_LEVEL=off

    probe = ("from gamma.data import schema_file, corpus_dir; import json; "
             "print(json.load(open(schema_file('case')))['title'], corpus_dir())")
    run = _run(bin_dir / "python", "-c", probe, cwd=elsewhere)
    assert run.returncode == 0 and run.stdout.startswith("gamma conformance case "), run.stderr
    assert str(ROOT) not in run.stdout  # the installed copy, not the checkout
