"""A real ``gamma serve`` process for tests and benchmarks: started on a free port, ready when
``/readyz`` answers 200, stopped with SIGTERM (its graceful shutdown) and killed only if that
hangs. Its stderr goes to a file, so a chatty server never blocks on a full pipe, and a
server that dies before it is ready raises with what it wrote.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx

from gamma.serve.identity import new_token

__all__ = ["Server", "serving", "start", "write_callers", "free_port"]

READY_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


def free_port() -> int:
    """A loopback port free now (the kernel's pick; it may be taken again before use, rarely)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_callers(path: Path, callers: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Write a callers file; each caller is ``{"name", "actor", "auditor"?, "cert_sha256"?}``.
    Returns each caller's secret bearer token by name (the file holds only their digests)."""
    tokens: dict[str, str] = {}
    lines: list[str] = []
    for caller in callers:
        secret, digest = new_token()
        tokens[caller["name"]] = secret
        actor = caller["actor"]
        fields = [f"id = {_toml(actor['id'])}", f"tenant = {_toml(actor['tenant'])}"]
        for name in ("roles", "clearance", "scope"):
            if name in actor:
                fields.append(f"{name} = {_toml(actor[name])}")
        lines += [
            "[[caller]]",
            f"name = {_toml(caller['name'])}",
            f'token_sha256 = "{digest}"',
            *([f'cert_sha256 = "{caller["cert_sha256"]}"'] if "cert_sha256" in caller else []),
            f"auditor = {'true' if caller.get('auditor') else 'false'}",
            f"actor = {{ {', '.join(fields)} }}",
            "",
        ]
    path.write_text("\n".join(lines), encoding="utf-8")
    return tokens


def _toml(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


@attrs.define
class Server:
    """One running server: its base URL, process and stderr file; ``verify`` the TLS context
    its clients use (None: plain HTTP)."""

    url: str
    process: subprocess.Popen[bytes]
    stderr: Path
    verify: ssl.SSLContext | None = None

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        """An httpx client of this server, authenticated with ``token`` when given."""
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        if self.verify is not None:
            kwargs.setdefault("verify", self.verify)
        return httpx.Client(base_url=self.url, headers=headers, timeout=10.0, **kwargs)

    def log(self) -> str:
        return self.stderr.read_text(encoding="utf-8", errors="replace")

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM, then wait; SIGKILL if it has not left by ``timeout``. Its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def start(store: Path, callers: Path, *args: str, env: Mapping[str, str] | None = None,
          ready_timeout: float = READY_TIMEOUT, verify: ssl.SSLContext | None = None) -> Server:
    """``python -m gamma serve STORE --callers CALLERS --port P ARGS``, once ready.

    ``verify`` (a client TLS context: the CA, and a client certificate under mTLS) makes
    it an HTTPS server, asked for readiness with that context."""
    port = free_port()
    handle, name = tempfile.mkstemp(prefix="gamma-serve-", suffix=".log")
    os.close(handle)
    stderr = Path(name)
    command = [sys.executable, "-m", "gamma", "serve", str(store), "--callers", str(callers),
               "--port", str(port), *args]
    with stderr.open("wb") as err:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                   env={**os.environ, **(env or {})})
    scheme = "http" if verify is None else "https"
    server = Server(f"{scheme}://127.0.0.1:{port}", process, stderr, verify)
    deadline = time.monotonic() + ready_timeout
    with server.client() as client:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"gamma serve exited {process.returncode}:\n{server.log()}")
            with contextlib.suppress(httpx.TransportError):
                if client.get("/readyz").status_code == 200:
                    return server
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"gamma serve not ready in {ready_timeout:g} s:\n{server.log()}")
            time.sleep(0.05)


@contextlib.contextmanager
def serving(store: Path, callers: Path, *args: str, env: Mapping[str, str] | None = None,
            verify: ssl.SSLContext | None = None) -> Iterator[Server]:
    """A server for the ``with`` block, stopped (SIGTERM) after it."""
    server = start(store, callers, *args, env=env, verify=verify)
    try:
        yield server
    finally:
        server.stop()
        server.stderr.unlink(missing_ok=True)
