"""Regenerates the golden vectors in data/ with the real Go asynq (gen/, a Go program) against a private Redis.

    python tests/inspector/vectors/regenerate.py                      # v0.26.0 and v0.25.1 into data/
    python tests/inspector/vectors/regenerate.py --versions v0.26.0 --out /tmp/vectors

Needs Go and the Go module proxy (or a module cache holding the releases), and redis-server on PATH (the
committed set was written on Redis 7.0) or else the embedded Valkey. Each run takes about 10 s per release:
Go's worker and scheduler run for real. Times inside are the wall clock of the run; the tests compare
structure and decoded fields, not ages. Review the diff of data/ before committing it.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
MODULE = "github.com/hibiken/asynq"


@contextlib.contextmanager
def private_redis() -> Iterator[str]:
    """host:port of an empty, private Redis (redis-server when installed, else the embedded Valkey)."""
    sys.path.insert(0, str(ROOT))
    from asynqpy.embedded import EmbeddedServer, answers, free_port

    exe = shutil.which("redis-server")
    if exe is None:
        with EmbeddedServer() as server:
            yield f"{server.host}:{server.port}"
        return
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                 "--dir", d], stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while not answers(f"redis://127.0.0.1:{port}/0"):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.05)
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(10)


def build(version: str, work: Path) -> Path:
    """gen/ built against asynq `version` in a scratch copy (gen/ itself stays on the release it names)."""
    src = work / "gen"
    shutil.copytree(HERE / "gen", src)
    go = shutil.which("go") or sys.exit("regenerate.py needs the Go toolchain (`go`) on PATH")
    subprocess.run([go, "mod", "edit", f"-require={MODULE}@{version}"], cwd=src, check=True)
    subprocess.run([go, "mod", "tidy"], cwd=src, check=True)
    tags = ["-tags", "asynq025"] if version.startswith("v0.25.") else []
    binary = work / f"vectorsgen-{version}"
    subprocess.run([go, "build", *tags, "-o", str(binary), "."], cwd=src, check=True)
    return binary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--versions", nargs="+", default=["v0.26.0", "v0.25.1"], help="asynq releases to run")
    ap.add_argument("--out", type=Path, default=HERE / "data", help="where the files go (default: data/)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for version in args.versions:
        with tempfile.TemporaryDirectory() as work:
            binary = build(version, Path(work))
            with private_redis() as addr:
                subprocess.run([str(binary), "--redis", addr, "--out", str(args.out), "--label", version], check=True)
        print(f"asynq {version}: wrote {args.out}/asynq-{version}-state.{{json,enqueue.jsonl,inspect.json}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
