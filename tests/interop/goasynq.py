"""Builds the Go interop peer (tests/interop/goapp, real hibiken/asynq) once per asynq release and runs it."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

GOAPP_DIR = Path(__file__).parent / "goapp"
T = TypeVar("T")


class GoPeerUnavailable(RuntimeError):
    """The Go peer cannot be built here (no toolchain, or the build failed); the message says why."""


class GoPeerError(RuntimeError):
    """A goapp subcommand exited with an error; the message carries its stderr."""


# Every asynq release the tests build the peer against, oldest first; the last one is tests/interop/goapp/go.mod's,
# the others' go.mod and go.sum are in goapp/versions/<release>/. To add a release there: a go.mod of
# "module asynqpy.test/goapp", "go 1.22" and "require github.com/hibiken/asynq <release>", then `go mod tidy`
# beside a copy of the .go files; a feature it adds or drops goes behind a build tag (goapp/compat_*.go, TAGS).
VERSIONS = ("v0.23.0", "v0.24.1", "v0.25.1", "v0.26.0")
LATEST = VERSIONS[-1]
# Build tags for what a release has that older ones lack (see goapp/compat_*.go).
TAGS = {"v0.23.0": "", "v0.24.1": "asynq_v024", "v0.25.1": "asynq_v024,asynq_v025",
        "v0.26.0": "asynq_v024,asynq_v025,asynq_v026"}
# Where built binaries are kept between runs (one folder per release and source hash).
CACHE_ENV = "ASYNQPY_GO_CACHE"
# A comma-separated subset of VERSIONS for the version matrix (CI's second pass runs only the latest).
VERSIONS_ENV = "ASYNQPY_GO_VERSIONS"


def matrix_versions() -> tuple[str, ...]:
    """The releases the version-matrix tests run against: VERSIONS, or the subset named in ASYNQPY_GO_VERSIONS."""
    raw = os.environ.get(VERSIONS_ENV, "").strip()
    if not raw:
        return VERSIONS
    chosen = tuple(v.strip() for v in raw.split(",") if v.strip())
    unknown = [v for v in chosen if v not in VERSIONS]
    if unknown:
        raise ValueError(f"{VERSIONS_ENV} names {unknown}; known releases: {', '.join(VERSIONS)}")
    return chosen


def module_files(version: str = LATEST, src: Path = GOAPP_DIR) -> tuple[Path, Path]:
    """The go.mod and go.sum that pin this asynq release (and the dependencies that release asks for)."""
    if version not in VERSIONS:
        raise ValueError(f"unknown asynq release {version!r}; known: {', '.join(VERSIONS)}")
    folder = src if version == LATEST else src / "versions" / version
    return folder / "go.mod", folder / "go.sum"


def source_hash(src: Path = GOAPP_DIR, version: str = LATEST) -> str:
    """A hash of the release's go.mod and go.sum, its build tags and every .go file: the binary's cache key."""
    h = hashlib.sha256(f"{version}\0{TAGS[version]}\0".encode())
    files = [*module_files(version, src), *sorted(p for p in src.iterdir() if p.suffix == ".go")]
    for path in files:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    """ASYNQPY_GO_CACHE, else ~/.cache/asynqpy-go (kept between runs; each binary is keyed by its sources)."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "asynqpy-go"


def _cached(binary: Path, what: str, command: Callable[[str, Path], list[str]],
            prepare: Callable[[Path], None] = lambda work: None, timeout: float = 600) -> Path:
    """binary, made if missing by running command(go, work) in a fresh folder beside it (after prepare(work))
    that leaves the program at work/<binary's name>; it is renamed into place, so that parallel sessions never
    run half a file. Raises GoPeerUnavailable (saying what) when `go` is missing or the command fails."""
    go = shutil.which("go")
    if go is None:
        raise GoPeerUnavailable("the Go toolchain (`go`) is not on PATH")
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=binary.parent))
    try:
        prepare(work)
        env = {**os.environ, "GOBIN": str(work), "GOFLAGS": "-buildvcs=false"}
        try:
            proc = subprocess.run(command(go, work), check=False, cwd=work, env=env, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise GoPeerUnavailable(f"building {what} took longer than {timeout}s") from exc
        if proc.returncode != 0:
            raise GoPeerUnavailable(f"building {what} failed (no module cache or proxy?):\n{proc.stderr[-2000:]}")
        (work / binary.name).replace(binary)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary


def build(src: Path = GOAPP_DIR, timeout: float = 600, version: str = LATEST) -> Path:
    """The path of the goapp binary built against asynq `version`, building it if this source was not built yet.

    The sources are copied beside that release's go.mod/go.sum into the cache folder and built there with its
    build tags; Go's module and build caches are reused. Raises GoPeerUnavailable when `go` is not on PATH or
    the build fails.
    """
    def prepare(work: Path) -> None:
        for path in [*(p for p in src.iterdir() if p.suffix == ".go"), *module_files(version, src)]:
            shutil.copy(path, work / path.name)

    binary = cache_dir() / f"goapp-{version}-{source_hash(src, version)}" / "goapp"
    return _cached(binary, f"goapp for asynq {version}",
                   lambda go, work: [go, "build", "-mod=readonly", "-tags", TAGS[version], "-o", "goapp", "."],
                   prepare, timeout)


GOOTEL_DIR = Path(__file__).parent / "gootel"


def build_gootel(timeout: float = 600) -> Path:
    """The gootel binary (asynq v0.26 with go.opentelemetry.io/otel: the trace interop peer), built once per
    source hash like goapp. Raises GoPeerUnavailable."""
    files = [GOOTEL_DIR / "go.mod", GOOTEL_DIR / "go.sum", *sorted(GOOTEL_DIR.glob("*.go"))]
    h = hashlib.sha256()
    for path in files:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")

    def prepare(work: Path) -> None:
        for path in files:
            shutil.copy(path, work / path.name)

    binary = cache_dir() / f"gootel-{h.hexdigest()[:16]}" / "gootel"
    return _cached(binary, "gootel (asynq v0.26 + OpenTelemetry)",
                   lambda go, work: [go, "build", "-mod=readonly", "-o", "gootel", "."], prepare, timeout)


def redis_args(redis_url: str) -> list[str]:
    """goapp's --redis/--db/--password flags for a redis:// URL."""
    u = urlsplit(redis_url)
    if u.scheme != "redis":
        raise ValueError(f"the Go peer takes redis:// URLs only, not {redis_url!r}")
    args = ["--redis", f"{u.hostname or '127.0.0.1'}:{u.port or 6379}"]
    db = u.path.strip("/")
    args += ["--db", db or "0"]
    if u.password:
        args += ["--password", unquote(u.password)]
    return args


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str | None) -> bytes:
    return base64.b64decode(text or "")


def go_time(text: str | None) -> datetime | None:
    """A Go RFC 3339 time from the peer's JSON (nanoseconds are cut to microseconds); null -> None."""
    return None if text is None else datetime.fromisoformat(text)


def wait_until(probe: Callable[[], T | None], what: str, timeout: float = 15.0, every: float = 0.05) -> T:
    """Poll probe until it returns something truthy and return that; AssertionError after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@dataclass(frozen=True)
class GoPeer:
    """Runs goapp subcommands against one Redis database and returns their parsed JSON."""

    binary: Path
    redis_url: str

    def _run(self, cmd: str, *args: str, stdin: str | None = None, timeout: float = 60) -> str:
        argv = [str(self.binary), cmd, *redis_args(self.redis_url), *args]
        proc = subprocess.run(argv, input=None if stdin is None else stdin.encode(), capture_output=True,
                              timeout=timeout, check=False)
        if proc.returncode != 0:
            # stderr may quote binary protobuf bytes; keep them readable rather than failing to decode.
            err = proc.stderr.decode(errors="backslashreplace").strip()
            raise GoPeerError(f"goapp {cmd} exited {proc.returncode}: {err}")
        return proc.stdout.decode()

    def enqueue(self, specs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Enqueue with the Go client. Each spec: type, payload_b64, queue, max_retry, timeout_s,
        deadline_unix, process_in_s, process_at_unix, unique_s, task_id, retention_s, group, headers.

        Returns per spec Go's TaskInfo (event "enqueued") or {event: "enqueue_error", error, kind}.
        """
        return _json_lines(self._run("enqueue", stdin=json.dumps(list(specs))))

    def enqueue_one(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        (out,) = self.enqueue([spec])
        return out

    def work(self, queues: Mapping[str, int] | None = None, *, expect: int = 0, duration: float = 20,
             concurrency: int = 4, retry_delay: float = 3600, strict: bool = False) -> list[dict[str, Any]]:
        """Run a Go asynq.Server until `expect` handler calls returned (or `duration` seconds passed).

        Handlers by type prefix: ok: (result "ok:<id>"), fail: ("boom <id>"), skip: (SkipRetry),
        sleep: (payload ms). Returns one dict per call: id, type, payload_b64, headers, queue,
        retry_count, max_retry, deadline_unix (the handler context's deadline), started_unix.
        """
        qs = ",".join(f"{q}={p}" for q, p in (queues or {"default": 1}).items())
        args = ["--queues", qs, "--expect", str(expect), "--duration", f"{duration}s",
                "--concurrency", str(concurrency), "--retry-delay-s", str(retry_delay)]
        if strict:
            args.append("--strict")
        return _json_lines(self._run("work", *args, timeout=duration + 30))

    def inspect(self, *tasks: tuple[str, str]) -> dict[str, Any]:
        """What Go's Inspector reports: queues, per_queue, servers, scheduler_entries, and `tasks`
        (GetTaskInfo for each (queue, id) given, or {queue, id, error})."""
        args = [f"--task={q}={tid}" for q, tid in tasks]
        return json.loads(self._run("inspect", *args))

    def act(self, *actions: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Go Inspector actions, run in order. Each: op (run, archive, delete, cancel, pause, unpause,
        delete_queue, run_all_<state>, archive_all_<state>, delete_all_<state>), queue, id, group, force.

        Returns per action {op, n} (n: the count a bulk action returns, else 1) or {op, error} (Go's text)."""
        return _json_lines(self._run("act", stdin=json.dumps(list(actions))))

    def version(self) -> dict[str, Any]:
        """The asynq release the peer was built against and its features: {asynq, go, headers, ...}."""
        out: dict[str, Any] = json.loads(self._run("version"))
        return out

    def task_info(self, queue: str, task_id: str) -> dict[str, Any]:
        """Go's GetTaskInfo of one task; raises GoPeerError with Go's error text if it fails."""
        (info,) = self.inspect((queue, task_id))["tasks"]
        if "error" in info:
            raise GoPeerError(info["error"])
        return info


ASYNQMON_VERSION = "v0.7.2"


def build_asynqmon(version: str = ASYNQMON_VERSION, timeout: float = 900) -> Path:
    """The asynqmon binary of this release (`go install github.com/hibiken/asynqmon/cmd/asynqmon@<version>`,
    UI included), installed once into the cache folder. Raises GoPeerUnavailable when it cannot be built."""
    return _cached(cache_dir() / f"asynqmon-{version}" / "asynqmon", f"asynqmon {version}",
                   lambda go, work: [go, "install", f"github.com/hibiken/asynqmon/cmd/asynqmon@{version}"],
                   timeout=timeout)


def built_or_skip(make: Callable[[], Path], what: str) -> Path:
    """make()'s binary; when it cannot be built the test skips, saying why, or fails when ASYNQPY_REQUIRE_GO
    is set (CI, where Go is on the machine and a broken build must not pass unseen)."""
    import pytest  # only the tests' fixtures call this

    try:
        return make()
    except GoPeerUnavailable as exc:
        if os.environ.get("ASYNQPY_REQUIRE_GO"):
            pytest.fail(f"{what} unavailable: {exc}")
        pytest.skip(f"{what} unavailable: {exc}")
