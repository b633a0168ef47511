"""Every name is unique in the package (issue 27): a reader never has to ask which ``Token``,
``Outcome`` or 64-hex pattern a module means. ``tests/test_rooms.py`` holds the core to it;
this holds the floors above too."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import gamma

PACKAGE = Path(gamma.__file__).resolve().parent

#: The public functions of ``gamma.api`` (``gamma.explain``, ``gamma.score``,
#: ``gamma.validate``) still share their names with the library functions they call.
SHARED = {
    "explain": ["gamma.api", "gamma.audit.explain"],
    "score": ["gamma.api", "gamma.scoring.metrics"],
    "validate": ["gamma.api", "gamma.scoring.findings"],
}


def _top_level_names(tree: ast.Module) -> Iterator[str]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Assign):
            yield from (t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id


def test_every_name_in_gamma_is_defined_once() -> None:
    """``FACE``, like ``__all__``, is each room's declaration, not a name the rooms share."""
    where: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(("gamma", *path.relative_to(PACKAGE).with_suffix("").parts))
        for name in _top_level_names(ast.parse(path.read_text(encoding="utf-8"))):
            if name != "FACE" and not (name.startswith("__") and name.endswith("__")):
                where.setdefault(name, []).append(module.removesuffix(".__init__"))
    assert {name: at for name, at in where.items() if len(at) > 1} == SHARED
