"""The sdist and the wheel, built and installed outside the checkout under the distribution
name, run the README's main command, the bundled corpus and named policies, with each extra.

One fresh virtual environment without the system's site-packages: setuptools (the build
requirement) goes into it, builds the sdist from a clean copy of the checkout and the wheel
from the unpacked sdist (as ``python -m build`` does, so a file missing from the sdist is
missed here), then the wheel is installed once with every runtime extra; pip takes the
dependencies from its cache or its configured indexes. The console script then runs from
a directory that is not the checkout. About a minute, most of it pip.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
import subprocess
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from gamma.integrations import install_hint

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "gamma-governance"  # PyPI's "gamma" is another project
EXTRAS = ("mcp", "langgraph", "dask", "serve")  # the runtime extras (test and lint are for a checkout)

pytestmark = pytest.mark.wheel


def _run(*args: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["GAMMA_LOG_LEVEL"] = "off"
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def readme_main_command() -> list[str]:
    """The ``gamma`` line of the README's first install block (``<!-- runs in ... -->``)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- runs in tests/test_wheel\.py -->\n```sh\n(.*?)^```", text,
                      re.MULTILINE | re.DOTALL)
    assert block, "README.md: the install block marked <!-- runs in tests/test_wheel.py -->"
    lines = block.group(1).splitlines()
    assert any(f"pip install {target}" in lines[0] for target in (".", DISTRIBUTION)), lines
    (command,) = [line for line in lines if line.startswith("gamma ")]
    return command.split()


def test_the_readme_names_the_distribution_wherever_it_says_how_to_install() -> None:
    for doc in ("README.md", "SPEC.md", *(str(p.relative_to(ROOT)) for p in ROOT.glob("docs/*.md"))):
        text = (ROOT / doc).read_text(encoding="utf-8")
        wrong = re.findall(r"(?<![\w./-])gamma\[\w+\]", text)  # an extra of PyPI's gamma
        wrong += re.findall(r"pip install gamma(?!-governance)\b", text)
        assert not wrong, (doc, wrong)
    assert re.search(r'^name = "gamma-governance"$', (ROOT / "pyproject.toml").read_text(),
                     re.MULTILINE)


def test_the_code_spells_the_install_hint_once() -> None:
    """Every "pip install" the code prints comes from gamma.integrations.install_hint."""
    assert install_hint("mcp") == f"pip install '{DISTRIBUTION}[mcp]'"
    spelled = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "gamma").rglob("*.py"))
               for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
               if re.search(r"pip install|gamma\[", line) and path.name != "__init__.py"]
    assert spelled == []


def test_sdist_and_wheel_outside_the_checkout(tmp_path: Path) -> None:
    dist, elsewhere, source = tmp_path / "dist", tmp_path / "elsewhere", tmp_path / "source"
    elsewhere.mkdir()
    # a clean copy: setuptools builds in the tree, and a stale build/ would leak old files
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".venv", ".hypothesis", "*.db*"))
    venv.create(tmp_path / "venv", with_pip=True, system_site_packages=False)
    bin_dir = tmp_path / "venv" / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / "python"
    pip = (python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check")
    setuptools = _run(*pip, "setuptools>=68", cwd=tmp_path)
    assert setuptools.returncode == 0, setuptools.stderr

    hook = "import sys, setuptools.build_meta as b; print(b.build_{}(sys.argv[1]))"
    sdist = _run(python, "-c", hook.format("sdist"), dist, cwd=source)
    assert sdist.returncode == 0, sdist.stderr[-3000:]
    (archive,) = dist.glob("gamma_governance-*.tar.gz")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "unpacked", filter="data")
    top = names[0].split("/")[0]
    assert f"{top}/gamma/data/schemas/resolution.schema.json" in names
    assert f"{top}/README.md" in names
    wheel = _run(python, "-c", hook.format("wheel"), dist, cwd=tmp_path / "unpacked" / top)
    assert wheel.returncode == 0, wheel.stderr[-3000:]
    (built,) = dist.glob("gamma_governance-*.whl")
    with zipfile.ZipFile(built) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(zf.read(meta).decode("utf-8"))
        shipped = {n.rsplit("/", 1)[-1] for n in zf.namelist() if "/schemas/" in n}
    assert metadata["Name"] == DISTRIBUTION
    assert set(metadata.get_all("Provides-Extra") or ()) >= set(EXTRAS)
    assert shipped == {p.name for p in (ROOT / "gamma" / "data" / "schemas").glob("*.json")}

    installed = _run(*pip, f"{built}[{','.join(EXTRAS)}]", cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]
    gamma = bin_dir / "gamma"

    # the README's main command, as printed, from a copy of the example only
    shutil.copytree(ROOT / "fixtures" / "examples", elsewhere / "fixtures" / "examples")
    command = readme_main_command()
    run = _run(gamma, *command[1:], cwd=elsewhere)
    assert run.returncode == 0, run.stderr
    assert "alice" in run.stdout and run.stderr == ""

    run = _run(gamma, "conformance", cwd=elsewhere)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr
    assert run.stdout.startswith("gamma conformance: the reference resolver, ")
    assert run.stdout.rstrip().endswith("OK")
    assert sum(line.startswith("PASS ") for line in run.stdout.splitlines()) >= 200

    examples = elsewhere / "fixtures" / "examples"
    run = _run(gamma, "resolve", examples / "acme.jsonl", "--actor", examples / "alice.json",
               "--at", "2026-03-09T10:00:00Z", "--policy", "strict", cwd=elsewhere)
    assert run.returncode == 0, run.stderr
    strict = _run(gamma, "policies", cwd=elsewhere)
    digest = next(line.split()[1] for line in strict.stdout.splitlines() if line.startswith("strict"))
    assert f"policy   {digest}" in run.stdout

    # each extra: the code behind it imports and works in the installed copy
    probe = (
        "import json, gamma\n"
        "from gamma.data import corpus_dir, schema_file\n"
        "from gamma.integrations.binding import Binding\n"
        "from gamma.integrations.mcp import GammaMCP\n"
        "from gamma.integrations.langgraph import GovernedStore\n"
        "import gamma.review.on_dask  # the extra gamma-governance[dask]\n"
        "from gamma.serve.app import create_app  # the extra gamma-governance[serve]\n"
        "alice = {'id': 'alice', 'tenant': 'acme', 'roles': ['sales'], 'scope': 'users/alice'}\n"
        "store = GovernedStore(gamma.Engine(), alice)\n"
        "store.put(('users', 'alice'), 'tone', {'value': 'concise'})\n"
        "assert [i.value for i in store.search(('users',))] == [{'value': 'concise'}]\n"
        "server = GammaMCP(Binding(gamma.Engine(), alice))\n"
        "assert not server.call('recall', {}).is_error\n"
        "print(json.load(open(schema_file('case')))['title'], corpus_dir())\n"
    )
    served = _run(gamma, "serve", "--help", cwd=elsewhere)
    assert served.returncode == 0 and "--callers" in served.stdout, served.stderr
    run = _run(python, "-c", probe, cwd=elsewhere)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("gamma conformance case ")
    assert str(ROOT) not in run.stdout  # the installed copy, not the checkout
