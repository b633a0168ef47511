"""What the erasure tests (issue 30) share: the command line run in-process, the byte forms of
an erased value and its salt, a scanner of files run in another process, and a walk of the
objects an engine keeps.

The scanner runs in a child process on purpose: SQLite's POSIX locks belong to the process,
and closing any descriptor of the store file (or its -shm) in a process that holds a
connection drops them, so this process never opens a store file outside SQLite while a test
keeps a reader or an engine open on it.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import html
import json
import subprocess
import sys
import types
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import structlog
from click.testing import CliRunner

from gamma.cli import main

__all__ = [
    "ENV",
    "Run",
    "core_of",
    "distinctive",
    "forms",
    "every_file",
    "gamma",
    "jsonl_lines",
    "kept_values",
    "needles",
    "reachable_texts",
    "salt_forms",
    "scan",
    "store_files",
    "text_leaks",
]

ENV = {"GAMMA_LOG_LEVEL": "off", "GAMMA_CHAIN_KEY": "", "GAMMA_NOW": ""}

CORE = 16
"""Characters of the random core every scanned value carries: 16 of base32 is 80 bits, so a
match in a store file or an output is the value, never chance."""

CHUNK = 24
"""A long value is also looked for by each of its chunks of this many characters, so a
remnant left in one freed overflow page is found even when the rest was overwritten."""


@attrs.frozen
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def gamma(*args: str | Path, input: bytes = b"") -> Run:
    """``gamma ARGS`` in-process through ``main``, as the console runs it."""
    runner = CliRunner()
    code = 0
    with runner.isolation(input=input, env=ENV) as (out, err, _):
        try:
            main([str(arg) for arg in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    structlog.reset_defaults()
    return Run(code, out.getvalue().decode("utf-8", "replace"),
               err.getvalue().decode("utf-8", "replace"))


def core_of(seed: int, index: int) -> str:
    """A random-looking core, reproducible from the example's seed (hypothesis shrinks drawn
    text towards ``"0000..."``, which would no longer be distinctive)."""
    digest = hashlib.sha256(f"{seed}:{index}".encode()).digest()
    return base64.b32encode(digest).decode("ascii")[:CORE]


def distinctive(core: str, before: str, after: str, filler: int = 0) -> str:
    """A value around ``core``: the decorations drawn by the test, and ``filler`` more random
    characters (a long value spills onto SQLite overflow pages)."""
    long = ""
    block = 0
    while len(long) < filler:
        digest = hashlib.sha256(f"{core}:{block}".encode()).digest()
        long += base64.b32encode(digest).decode("ascii").lower() + "é日"
        block += 1
    return before + core + after + long[:filler]


def _base64_forms(data: bytes) -> list[bytes]:
    """``data`` as it shows inside any base64 text, at each of the three alignments: the
    characters that depend only on ``data`` (the first and last group dropped)."""
    found = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data)
        found.append(encoded[4 if shift else 0 : -4])
    return [form for form in found if len(form) >= 12]


def forms(text: str) -> dict[str, bytes]:
    """Every encoding a leak of ``text`` could take: UTF-8, JSON-escaped (raw and ``\\u``),
    HTML-escaped, UTF-16 LE and BE, hex (lower, upper) and base64 of its UTF-8 bytes."""
    raw = text.encode("utf-8")
    found = {
        "utf-8": raw,
        "json": json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8"),
        "json-ascii": json.dumps(text, ensure_ascii=True)[1:-1].encode("ascii"),
        "html": html.escape(text).encode("utf-8"),
        "utf-16-le": text.encode("utf-16-le"),
        "utf-16-be": text.encode("utf-16-be"),
        "hex": raw.hex().encode("ascii"),
        "HEX": raw.hex().upper().encode("ascii"),
    }
    for shift, form in enumerate(_base64_forms(raw)):
        found[f"base64/{shift}"] = form
    return found


def salt_forms(salt: str) -> dict[str, bytes]:
    """A salt as stored (64 hex digits), upper case, its 32 raw bytes and their base64."""
    raw = bytes.fromhex(salt)
    found = {"hex": salt.encode("ascii"), "HEX": salt.upper().encode("ascii"), "raw": raw}
    for shift, form in enumerate(_base64_forms(raw)):
        found[f"base64/{shift}"] = form
    return found


def needles(fact: str, value: str, salt: str, core: str) -> dict[str, bytes]:
    """What must occur nowhere once ``fact``'s value is erased, each named for the report: the
    value's forms, its core's, each chunk of a long value, and the salt's."""
    found = {f"{fact} value {name}": form for name, form in forms(value).items()}
    found.update({f"{fact} core {name}": form for name, form in forms(core).items()})
    if len(value) > 4 * CHUNK:
        for start in range(0, len(value) - CHUNK + 1, CHUNK):
            found[f"{fact} chunk@{start}"] = value[start : start + CHUNK].encode("utf-8")
    found.update({f"{fact} salt {name}": form for name, form in salt_forms(salt).items()})
    return found


_SCANNER = """
import json, os, sys
asked = json.load(sys.stdin)
wanted = {name: bytes.fromhex(form) for name, form in asked["needles"].items()}
hits = []
for path in asked["files"]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        continue
    hits += [[path, name] for name, form in wanted.items() if form in data]
json.dump(hits, sys.stdout)
"""


def scan(files: Iterable[Path], wanted: Mapping[str, bytes]) -> list[tuple[str, str]]:
    """``(file, needle name)`` for every needle found in a file, read by a child process."""
    request = {"files": [str(f) for f in files], "needles": {n: f.hex() for n, f in wanted.items()}}
    done = subprocess.run([sys.executable, "-I", "-S", "-c", _SCANNER], input=json.dumps(request),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [(str(path), str(name)) for path, name in json.loads(done.stdout)]


def store_files(store: Path) -> list[Path]:
    """The store file and every file SQLite keeps beside it (-wal, -shm, -journal)."""
    return [store, *(store.with_name(store.name + suffix) for suffix in ("-wal", "-shm", "-journal"))]


def every_file(*folders: Path) -> list[Path]:
    return sorted(p for folder in folders for p in folder.rglob("*") if p.is_file())


def jsonl_lines(text: str) -> list[str]:
    """The lines of JSONL output: split at ``\n`` only (``str.splitlines`` also splits at the
    U+0085, U+2028 and U+2029 a canonical line keeps unescaped inside a string)."""
    return [line for line in text.split("\n") if line]


def kept_values(lines: str | Iterable[str]) -> dict[str, tuple[Any, str]]:
    """``fact -> (value, salt)`` of each committed assert line that still carries its value."""
    found = {}
    for line in jsonl_lines(lines) if isinstance(lines, str) else lines:
        obj = json.loads(line)
        if obj.get("type") == "assert" and "salt" in obj and "value" in obj:
            found[obj["fact"]] = (obj["value"], obj["salt"])
    return found


_OPAQUE = (type, types.ModuleType, types.CodeType, types.BuiltinFunctionType, types.FrameType)


def reachable_texts(*roots: object) -> Iterator[str | bytes | bytearray]:
    """Every str and bytes reachable from ``roots`` by ``gc.get_referents``. Classes, modules
    and code are not entered (they lead to the whole interpreter); a function is entered by its
    closure and defaults only, never its globals."""
    seen: set[int] = set()
    stack: list[object] = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, str | bytes | bytearray):
            yield obj
        elif isinstance(obj, memoryview):
            yield obj.tobytes()
        elif isinstance(obj, types.FunctionType):
            stack.extend(c.cell_contents for c in obj.__closure__ or () if _filled(c))
            stack.extend(obj.__defaults__ or ())
            stack.extend((obj.__kwdefaults__ or {}).values())
        elif not isinstance(obj, _OPAQUE):
            stack.extend(gc.get_referents(obj))


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def text_leaks(roots: Iterable[object], wanted: Mapping[str, Iterable[str]]) -> list[tuple[str, str]]:
    """``(fact, the text holding it)`` for each text of ``wanted[fact]`` (an erased value, its
    core, its salt) still reachable from ``roots``, as str or as UTF-8 bytes."""
    needles = [(fact, text, text.encode("utf-8")) for fact, texts in wanted.items() for text in texts]
    found = []
    for held in reachable_texts(*roots):
        for fact, text, encoded in needles:
            if (text in held) if isinstance(held, str) else (encoded in held):
                found.append((fact, repr(held[:80])))
    return found
