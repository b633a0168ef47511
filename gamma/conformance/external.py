"""The external-system protocol client: ask another memory system about conformance cases.

gamma starts the system's command once, writes one JSON request per case on its stdin and
reads one JSON reply line per case from its stdout (SPEC.md §14). The
system is untrusted: a crash, a hang past the per-case timeout, a line that is not JSON, a
reply for another case or no reply at all becomes an ``Exchange`` with an ``error`` for
that case, never an exception, and the process is restarted for the following cases so
one bad answer cannot shift every later one.
"""

from __future__ import annotations

import io
import json
import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import IO, Any, Self, cast

import attrs

from gamma.conformance.cases import VERDICTS, Case
from gamma.core.reading.strictjson import decode_json
from gamma.core.terms.decisions import REASON_CODES
from gamma.core.terms.errors import InputError
from gamma.core.terms.model import Value

__all__ = ["MAX_LINE", "REQUEST_FIELDS", "Exchange", "ExternalSystem", "Reply", "parse_reply",
           "request_for"]

#: The longest reply line read (bytes); a longer one is garbage, not a memory exhaustion.
MAX_LINE = 16 * 1024 * 1024
_STDERR_TAIL = 64 * 1024  # the last 64 KiB of a system's stderr are kept
_GRACE = 2.0  # seconds a system gets to exit after its stdin closes
_REPLY_FIELDS = ("id", "admitted", "needs_recheck", "values", "excluded", "experiences", "ignored",
                 "response", "context", "verdict", "bindings", "error")
_EOF = None


def _frozen_sorted(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return None if value is None else MappingProxyType(dict(sorted(value.items())))


@attrs.frozen(kw_only=True)
class Reply:
    """One validated reply. Resolver level: ``admitted`` (with ``needs_recheck``, ``values``,
    ``excluded``, ``experiences``, ``ignored``); agent level: ``response`` (with ``context``,
    ``verdict``, ``bindings``). ``error`` is the system declining the case.

    ``values`` gives an admitted fact's current value where it is not the stated one (a value
    recomputed from a stated derivation, issue 29): a reply naming facts by id could not
    otherwise say it recomputed them."""

    admitted: tuple[str, ...] | None = None
    needs_recheck: tuple[str, ...] = ()
    values: Mapping[str, Value] = attrs.field(factory=dict, converter=_frozen_sorted, hash=False)
    excluded: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict, converter=_frozen_sorted, hash=False)
    experiences: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_sorted, hash=False)
    ignored: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_sorted, hash=False)
    response: str | None = None
    context: str | None = None
    verdict: str | None = None
    bindings: Mapping[str, str] | None = attrs.field(default=None, converter=_frozen_sorted, hash=False)
    error: str | None = None


@attrs.frozen(kw_only=True)
class Exchange:
    """What came back for one case: a reply, or why there is none."""

    reply: Reply | None = None
    error: str | None = None


#: The fields of a request line: what a system may know about a case, never its answer.
REQUEST_FIELDS: tuple[str, ...] = ("id", "events", "actor", "at", "question", "policy")


def request_for(case: Case) -> dict[str, Any]:
    """The protocol line for ``case``: the log, who asks, when, what, and under which policy."""
    body = case.request()
    return {name: body[name] for name in REQUEST_FIELDS}


class _ProtocolError(ValueError):
    pass


def parse_reply(obj: Any, case_id: str) -> Reply:
    """Validate a decoded reply for ``case_id``; raises ``ValueError`` naming the problem."""
    if not isinstance(obj, dict):
        raise _ProtocolError(f"a reply must be a JSON object, got {type(obj).__name__}")
    if obj.get("id") != case_id:
        raise _ProtocolError(f"reply for id {_short(json.dumps(obj.get('id')))}, expected {case_id!r}")
    unknown = sorted(set(obj) - set(_REPLY_FIELDS))
    if unknown:
        raise _ProtocolError(f"unknown reply fields {unknown}")

    def strings(name: str) -> tuple[str, ...]:
        value = obj[name]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _ProtocolError(f"{name!r} must be a list of strings")
        return tuple(value)

    def mapping(name: str, check: Any) -> dict[str, Any]:
        value = obj.get(name, {})
        if not isinstance(value, dict):
            raise _ProtocolError(f"{name!r} must be an object")
        return {k: check(name, k, v) for k, v in value.items()}

    def codes(name: str, key: str, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(c in REASON_CODES for c in value):
            raise _ProtocolError(f"{name}.{key} must be a list of reason codes")
        return tuple(value)

    def verdict(name: str, key: str, value: Any) -> str:
        if not isinstance(value, str) or value.upper() not in VERDICTS:
            raise _ProtocolError(f"{name}.{key} must be KEEP, ADAPT or REJECT")
        return value.upper()

    def text(name: str, key: str, value: Any) -> str:
        if not isinstance(value, str):
            raise _ProtocolError(f"{name}.{key} must be a string")
        return value

    def value(name: str, key: str, given: Any) -> Value:
        if key not in obj.get("admitted", ()):
            raise _ProtocolError(f"{name}.{key} names a fact the reply does not admit")
        if isinstance(given, float) or not isinstance(given, str | int | bool):
            raise _ProtocolError(f"{name}.{key} must be a string, an integer or a boolean")
        return given

    for name in ("response", "context", "error"):
        if name in obj and not isinstance(obj[name], str):
            raise _ProtocolError(f"{name!r} must be a string")
    if "admitted" not in obj and any(n in obj for n in ("needs_recheck", "values", "excluded",
                                                        "experiences", "ignored")):
        raise _ProtocolError("a resolver-level reply needs 'admitted'")
    if not any(n in obj for n in ("admitted", "response", "error")):
        raise _ProtocolError("a reply needs 'admitted', 'response' or 'error'")
    return Reply(
        admitted=strings("admitted") if "admitted" in obj else None,
        needs_recheck=strings("needs_recheck") if "needs_recheck" in obj else (),
        values=mapping("values", value),
        excluded=mapping("excluded", codes),
        experiences=mapping("experiences", verdict),
        ignored=mapping("ignored", text),
        response=obj.get("response"),
        context=obj.get("context"),
        verdict=verdict("reply", "verdict", obj["verdict"]) if "verdict" in obj else None,
        bindings=mapping("bindings", text) if "bindings" in obj else None,
        error=obj.get("error"),
    )


def _short(text: str, limit: int = 120) -> str:
    """An excerpt of untrusted text, control characters escaped, for a one-line message."""
    clean = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return clean if len(clean) <= limit else clean[:limit] + "..."


class StderrTail:
    """What a system wrote on stderr over all its restarts: the last 64 KiB, and a count of
    every byte, so the part written while one case ran can be cut out (``since``)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.written = 0
        self._lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self._buffer += chunk
            del self._buffer[:-_STDERR_TAIL]
            self.written += len(chunk)

    def since(self, mark: int) -> str:
        """The text written after ``mark`` (a past ``written``), at most the last 64 KiB."""
        with self._lock:
            count = min(self.written - mark, len(self._buffer))
            data = bytes(self._buffer[len(self._buffer) - count:]) if count > 0 else b""
        return data.decode("utf-8", "replace")


class _Process:
    """One running instance of the system, with threads that keep its pipes moving.

    A writer thread feeds stdin (a system that stops reading cannot block gamma), a
    reader thread queues stdout lines, a third keeps the tail of stderr for messages.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None,
        env: Mapping[str, str] | None,
        sink: StderrTail | None = None,
    ) -> None:
        self.proc = subprocess.Popen(  # the user names the command to test
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=cwd, env=dict(env) if env is not None else None, start_new_session=True,
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.outbox: queue.Queue[bytes | None] = queue.Queue()
        self._stderr = bytearray()
        self._lock = threading.Lock()
        self._sink = sink
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr
        self._threads = [
            threading.Thread(target=self._write, args=(self.proc.stdin,), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _write(self, pipe: IO[bytes]) -> None:
        try:
            while (data := self.outbox.get()) is not None:
                pipe.write(data)
                pipe.flush()
        except (OSError, ValueError):
            pass  # the system closed its stdin or died: its reply (or EOF) tells the rest
        finally:
            try:
                pipe.close()
            except OSError:
                pass

    def _read(self, pipe: IO[bytes]) -> None:
        try:
            while line := pipe.readline(MAX_LINE + 1):
                self.lines.put(line)
                if len(line) > MAX_LINE:
                    break
        except (OSError, ValueError):
            pass
        self.lines.put(_EOF)

    def _drain(self, pipe: IO[bytes]) -> None:
        try:
            while chunk := cast(io.BufferedReader, pipe).read1(65536):
                with self._lock:
                    self._stderr += chunk
                    del self._stderr[:-_STDERR_TAIL]
                if self._sink is not None:
                    self._sink.add(chunk)
        except (OSError, ValueError):
            pass

    def stderr_tail(self) -> str:
        """The end of what the system wrote on stderr (after it ended, all of it)."""
        if self.proc.poll() is not None:
            self._threads[2].join(timeout=1.0)
        with self._lock:
            tail = bytes(self._stderr).decode("utf-8", "replace").strip()
        clean = _short(tail, len(tail) * 10)  # escaped; then keep its end, where errors are
        return f"; stderr: {'...' if len(clean) > 300 else ''}{clean[-300:]}" if tail else ""

    def stop(self, *, grace: float = 0.0) -> None:
        """Close stdin, give the system ``grace`` seconds to exit, then kill its process group
        (what is left of it after a clean exit too: helpers holding the pipes)."""
        self.outbox.put(None)
        if grace:
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group we started, nothing else
        except ProcessLookupError:
            pass  # the group is gone already
        except PermissionError:
            if self.proc.poll() is None:
                self.proc.kill()
        self.proc.wait()
        self._close()

    def _close(self) -> None:
        for thread in self._threads:
            thread.join(timeout=1.0)
        # a pipe still held open by a grandchild that left the group is left to its thread:
        # closing it under a blocked read would block here
        for pipe, thread in ((self.proc.stdout, self._threads[1]), (self.proc.stderr, self._threads[2])):
            if pipe is not None and not thread.is_alive():
                try:
                    pipe.close()
                except OSError:
                    pass


class ExternalSystem:
    """A memory system under test, started from ``command`` and asked one case at a time.

    ``command`` is split like a shell would (``shlex``) but run without a shell; use
    ``sh -c '...'`` for pipes. A command that cannot be started is an ``InputError``.
    Use as a context manager, or call ``close()``.
    """

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        timeout: float = 10.0,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise InputError("the system command is empty", field="system")
        if timeout <= 0:
            raise InputError("the timeout must be positive", field="timeout")
        self.timeout = timeout
        self.command = command if isinstance(command, str) else shlex.join(self.argv)
        self._cwd, self._env = cwd, env
        self._process: _Process | None = None
        self.starts = 0
        self.stderr = StderrTail()
        self._start()

    def _start(self) -> _Process:
        try:
            self._process = _Process(self.argv, cwd=self._cwd, env=self._env, sink=self.stderr)
        except OSError as exc:
            raise InputError(f"cannot start {self.command!r}: {exc.strerror or exc}",
                             field="system") from None
        self.starts += 1
        return self._process

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the system's stdin and let it exit (killed after a short grace)."""
        if self._process is not None:
            self._process.stop(grace=_GRACE)
            self._process = None

    def _discard(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None

    def ask(self, case: Case) -> Exchange:
        """Send ``case``, wait up to the timeout for its reply line, and validate it."""
        # No liveness check before sending: a system that died after its last reply, or
        # said two lines for it, fails this case the same way whatever the timing.
        process = self._process if self._process is not None else self._start()
        line = json.dumps(request_for(case), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=True) + "\n"
        process.outbox.put(line.encode("ascii"))
        deadline = time.monotonic() + self.timeout
        try:
            raw = process.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            self._discard()
            return Exchange(error=f"no reply within {self.timeout:g}s: killed, restarted for the next case")
        if raw is _EOF:
            status = self._exit_status(process)
            tail = process.stderr_tail()
            self._discard()
            return Exchange(error=f"the system {status} before replying{tail}")
        return self._decode(raw, case.id)

    def _exit_status(self, process: _Process) -> str:
        try:
            code = process.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "closed its stdout"
        return f"exited with status {code}" if code >= 0 else f"was killed by signal {-code}"

    def _decode(self, raw: bytes, case_id: str) -> Exchange:
        """A reply line, validated; on a transport problem the process is restarted."""
        problem: str | None = None
        obj: Any = None
        if len(raw) > MAX_LINE:
            problem = f"reply line longer than {MAX_LINE} bytes"
        else:
            try:
                text = raw.decode("utf-8")
                obj = decode_json(text)  # the event reader's JSON rules: no huge ints, no floats
            except UnicodeDecodeError:
                problem = f"reply is not UTF-8: {_short(repr(raw[:80]))}"
            except InputError as exc:
                if exc.field is None:
                    problem = f"reply is not JSON: {_short(raw.decode('utf-8', 'replace').strip())}"
                else:
                    problem = f"reply field {exc.field!r}: {exc.message}"
        if problem is None and not isinstance(obj, dict):
            problem = f"a reply must be a JSON object, got {type(obj).__name__}"
        elif problem is None and obj.get("id") != case_id:
            problem = f"reply for id {_short(json.dumps(obj.get('id')))}, expected {case_id!r}"
        if problem is not None:
            self._discard()  # out of step with the protocol: start afresh for the next case
            return Exchange(error=problem + " (restarted for the next case)")
        try:
            return Exchange(reply=parse_reply(obj, case_id))
        except ValueError as exc:
            return Exchange(error=f"invalid reply: {exc}")
