"""The Go side of the Inspector benchmark: builds bench/go_inspector (asynq v0.26.0's Inspector) and runs it.

Each subcommand times only the Inspector calls and prints its durations and results as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GO_DIR = Path(__file__).resolve().parent / "go_inspector"


class GoSide:
    """Builds bench/go_inspector once and runs its subcommands; missing/failed Go turns into a reason."""

    def __init__(self, enabled: bool, url: str) -> None:
        self.url = url
        self.binary: str | None = None
        self.reason = ""
        self.version = ""
        self._tmp = tempfile.mkdtemp(prefix="asynqpy-goinsp-")
        if not enabled:
            self.reason = "n/a (--no-go)"
            return
        go = shutil.which("go")
        if go is None:
            self.reason = "n/a (no go)"
            return
        self.version = subprocess.run([go, "version"], capture_output=True, text=True).stdout.strip()
        out = os.path.join(self._tmp, "goinspector")
        t0 = time.perf_counter()
        res = subprocess.run([go, "build", "-o", out, "."], cwd=GO_DIR, capture_output=True, text=True)
        if res.returncode != 0:
            self.reason = "n/a (go build failed)"
            print(f"go build failed:\n{res.stderr.strip()}", file=sys.stderr)
            return
        print(f"built bench/go_inspector in {time.perf_counter() - t0:.1f} s", flush=True)
        self.binary = out

    def run(self, *args: Any) -> dict[str, Any]:
        assert self.binary
        res = subprocess.run([self.binary, *map(str, args), "-redis", self.url],
                             capture_output=True, text=True, timeout=600)
        if res.returncode != 0:
            raise RuntimeError(f"goinspector {args[0]} failed: {res.stderr.strip()}")
        out: dict[str, Any] = json.loads(res.stdout)
        return out

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)
