"""The core in rooms (issue 27): the layout, each room's face, one name one place, one cache
policy. ``lint-imports`` holds the order of the rooms (pyproject.toml); these hold what a
module-level contract cannot: which *names* cross a room's wall."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gamma.core.terms import caches

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "gamma" / "core"
ROOMS = ("terms", "integrity", "reading", "resolving", "incremental")  # bottom to top


def _face(room: str) -> dict[str, tuple[str, ...]]:
    face: dict[str, tuple[str, ...]] = importlib.import_module(f"gamma.core.{room}").FACE
    return face


def _modules(top: Path) -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(top.rglob("*.py")):
        dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        yield dotted.removesuffix(".__init__"), ast.parse(path.read_text(encoding="utf-8"))


def _room_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["gamma", "core"] and len(parts) > 2 else None


def test_the_core_is_its_rooms_and_nothing_else() -> None:
    """Every module of gamma/core lives in a room (a loose module would escape the layers)."""
    loose = sorted(p.name for p in CORE.iterdir() if p.suffix == ".py" and p.name != "__init__.py")
    rooms = sorted(p.name for p in CORE.iterdir() if (p / "__init__.py").is_file())
    assert loose == []
    assert rooms == sorted(ROOMS)


@pytest.mark.parametrize("room", ROOMS)
def test_a_rooms_face_names_what_its_modules_define(room: str) -> None:
    for module, names in _face(room).items():
        loaded = importlib.import_module(f"gamma.core.{room}.{module}")
        assert [n for n in names if not hasattr(loaded, n)] == [], module
        assert list(names) == sorted(names), module


def test_imports_across_rooms_name_only_the_face() -> None:
    """A module outside a room (another room, or any floor above the core) imports from it
    only what its FACE lists: the rest of a room may change without telling anyone."""
    faces = {room: _face(room) for room in ROOMS}
    crossing: list[str] = []
    for importer, tree in _modules(ROOT / "gamma"):
        mine = _room_of(importer)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            room = _room_of(node.module)
            if room is None or room == mine or room not in faces:
                continue
            parts = node.module.split(".")
            for alias in node.names:
                if len(parts) == 3:  # from gamma.core.<room> import <module>
                    allowed = alias.name in faces[room]
                else:
                    allowed = alias.name in faces[room].get(parts[3], ())
                if not allowed:
                    crossing.append(f"{importer}: {node.module}.{alias.name}")
    assert crossing == []


def test_no_module_imports_another_modules_private_name() -> None:
    """A ``_name`` is its module's own, the StateBench importer's helpers included."""
    found = [
        f"{importer}: {node.module}.{alias.name}"
        for importer, tree in _modules(ROOT / "gamma")
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gamma")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]
    assert found == []


def top_level_definitions(tree: ast.Module) -> Iterator[tuple[str, ast.stmt]]:
    """Each name a module binds at its top level (function, class, assignment), with its node."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name, node
        elif isinstance(node, ast.Assign):
            yield from ((t.id, node) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, node


#: The public functions of ``gamma.api`` (``gamma.explain``, ``gamma.score``,
#: ``gamma.validate``) still share their names with the library functions they call.
SHARED = {
    "explain": ["gamma.api", "gamma.audit.explain"],
    "score": ["gamma.api", "gamma.scoring.metrics"],
    "validate": ["gamma.api", "gamma.scoring.findings"],
}


def test_every_name_in_gamma_is_defined_once() -> None:
    """One name, one place: a reader never has to ask which ``Codes``, ``Token`` or 64-hex
    pattern a module means. (``FACE``, like ``__all__``, is each room's declaration, not a name
    the rooms share.)"""
    where: dict[str, list[str]] = {}
    for module, tree in _modules(ROOT / "gamma"):
        for name, _ in top_level_definitions(tree):
            if name != "FACE" and not (name.startswith("__") and name.endswith("__")):
                where.setdefault(name, []).append(module)
    assert {name: at for name, at in where.items() if len(at) > 1} == SHARED


def test_one_cache_policy() -> None:
    """No module keeps a cache its own way (``functools.cache``/``lru_cache``, a dict cleared
    at a size of its own): module-level caches fill through ``terms.caches.remember``."""
    found = []
    for module, tree in _modules(ROOT / "gamma"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in {"cache", "lru_cache"}:
                if isinstance(node.value, ast.Name) and node.value.id == "functools":
                    found.append(f"{module}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and node.module == "functools":
                found.extend(
                    f"{module}:{node.lineno}"
                    for alias in node.names
                    if alias.name in {"cache", "lru_cache"}
                )
    assert found == []


def test_a_full_cache_is_emptied_whole_before_it_takes_more() -> None:
    cache: dict[int, int] = {}
    for key in range(caches.CACHE_SIZE):
        assert caches.remember(cache, key, key * 2) == key * 2
    assert len(cache) == caches.CACHE_SIZE
    assert caches.remember(cache, -1, 7) == 7
    assert cache == {-1: 7}
