"""Data shipped inside the package: the conformance corpus, the named policies, the schemas.

Read through :mod:`importlib.resources`, so an installed wheel finds them from
any working directory. In a checkout, ``fixtures/<suite>`` and ``policies/``
are links to these folders.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from gamma.core.terms.errors import PolicyError
from gamma.core.terms.policy import DEFAULT_POLICY, Policy, load_policy

__all__ = [
    "POLICY_NAMES",
    "SCHEMAS",
    "corpus_dir",
    "named_policies",
    "policy_by_name",
    "policy_file",
    "schema_file",
]

#: The named policies, in the order ``gamma policies`` lists them.
POLICY_NAMES: tuple[str, ...] = ("default", "strict", "recheck", "multivalue", "recompute")

#: The JSON Schemas (draft 2020-12): ``case`` of the case files a user writes, the others of
#: gamma's JSON outputs (SPEC §17 names the output each describes).
SCHEMAS: tuple[str, ...] = (
    "append", "audit-diff", "audit-record", "case", "checkpoint", "conformance", "explanation",
    "mcp-results", "proof", "replay", "resolution", "review-line", "review-summary", "score",
    "validation", "verify",
)


def _root() -> Path:
    # gamma.data is a regular package installed as files (wheels unpack), so its
    # resources are real paths; the runner and the case parser take paths.
    return Path(str(files(__name__)))


def corpus_dir() -> Path:
    """The bundled conformance corpus (one folder per suite, plus ``examples/``)."""
    return _root() / "fixtures"


def policy_file(name: str) -> Path:
    """The TOML file of a named policy; PolicyError naming the known names otherwise."""
    if name not in POLICY_NAMES:
        raise PolicyError(
            f"no policy named {name!r}; the named policies are {', '.join(POLICY_NAMES)}",
            field="policy",
        )
    return _root() / "policies" / f"{name}.toml"


def policy_by_name(name: str) -> Policy:
    """A named policy (``default`` is the built-in default, which its file restates)."""
    path = policy_file(name)
    return DEFAULT_POLICY if name == "default" else load_policy(path)


def named_policies() -> tuple[tuple[str, Policy], ...]:
    """Every named policy with its name, in :data:`POLICY_NAMES` order."""
    return tuple((name, policy_by_name(name)) for name in POLICY_NAMES)


def schema_file(name: str) -> Path:
    """The JSON Schema named ``name`` in :data:`SCHEMAS` (``case``: a conformance case)."""
    if name not in SCHEMAS:
        raise ValueError(f"no schema named {name!r}; the schemas are {', '.join(SCHEMAS)}")
    return _root() / "schemas" / f"{name}.schema.json"
