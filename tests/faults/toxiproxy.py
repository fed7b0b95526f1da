"""Toxiproxy (github.com/Shopify/toxiproxy, the real server built from the Go module proxy) for network faults:
built once per pinned release into the same cache as the Go interop peer, started on loopback, driven by its
HTTP API (proxies in front of a Redis, toxics added and removed)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from asynqpy.embedded import free_port, stop_process
from tests.interop.goasynq import _cached, cache_dir

# Pinned, so every run builds and caches the same binary (its folder in the cache is named by it).
VERSION = "v2.5.0"
MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"


def build(version: str = VERSION, timeout: float = 600) -> Path:
    """The toxiproxy server binary of this release (`go install MODULE@version`), built once into
    ~/.cache/asynqpy-go/toxiproxy-<version>/. Raises GoPeerUnavailable when Go or the build is missing."""
    return _cached(cache_dir() / f"toxiproxy-{version}" / "server", f"toxiproxy {version}",
                   lambda go, work: [go, "install", f"{MODULE}@{version}"], timeout=timeout)


class Toxiproxy:
    """A running toxiproxy server; proxy() puts a named proxy in front of an upstream host:port."""

    def __init__(self, binary: Path, log_dir: Path) -> None:
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}"
        log = open(log_dir / "toxiproxy.log", "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen([str(binary), "-host", "127.0.0.1", "-port", str(self.port)],
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 20
        while True:
            try:
                self._call("GET", "/version")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"toxiproxy did not start; see {log_dir / 'toxiproxy.log'}") from None
                time.sleep(0.05)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.api + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            raw = resp.read()
        try:
            return json.loads(raw) if raw.strip() else None
        except ValueError:  # /version answers plain text
            return raw.decode()

    def proxy(self, name: str, upstream_port: int) -> Proxy:
        """A proxy listening on a free loopback port, forwarding to 127.0.0.1:upstream_port."""
        listen = free_port()
        with contextlib.suppress(urllib.error.HTTPError):  # left by an earlier test: replace it
            self._call("DELETE", f"/proxies/{name}")
        self._call("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{listen}",
                                        "upstream": f"127.0.0.1:{upstream_port}", "enabled": True})
        return Proxy(self, name, listen)

    def stop(self) -> None:
        stop_process(self.proc)


class Proxy:
    """One proxy: its port, and toxics as context managers (the fault lasts the with-block)."""

    def __init__(self, server: Toxiproxy, name: str, port: int) -> None:
        self.server = server
        self.name = name
        self.port = port

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    @contextlib.contextmanager
    def toxic(self, kind: str, stream: str = "downstream", **attributes: int) -> Iterator[None]:
        """A toxic of type kind (latency, timeout, reset_peer, bandwidth, ...) on the stream for the block."""
        name = f"{kind}_{stream}"
        self.server._call("POST", f"/proxies/{self.name}/toxics",
                          {"name": name, "type": kind, "stream": stream, "toxicity": 1.0,
                           "attributes": attributes})
        try:
            yield
        finally:
            self.server._call("DELETE", f"/proxies/{self.name}/toxics/{name}")

    @contextlib.contextmanager
    def disabled(self) -> Iterator[None]:
        """A hard cut: the proxy closes every connection and refuses new ones for the block."""
        self.server._call("POST", f"/proxies/{self.name}", {"enabled": False})
        try:
            yield
        finally:
            self.server._call("POST", f"/proxies/{self.name}", {"enabled": True})
