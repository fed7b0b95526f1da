"""Go asynq: the released github.com/hibiken/asynq v0.26.0 through bench/go_asynq (built by bench/run.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from bench.adapters.base import ROOT, Adapter, StepError

ENV_BIN = "BENCH_GO_BIN"
GO_DIR = ROOT / "bench" / "go_asynq"
CONCURRENCY = 10


def module_version() -> str:
    for line in (GO_DIR / "go.mod").read_text().splitlines():
        parts = line.split()
        if "github.com/hibiken/asynq" in parts:
            return parts[parts.index("github.com/hibiken/asynq") + 1]
    return "?"


class GoAdapter(Adapter):
    name = "go"
    settings = (f"asynq.Server(Concurrency: {CONCURRENCY}, Queues: default=1), other settings default "
                "(TaskCheckInterval 1s, DelayedTaskCheckInterval 5s)")
    batch_how = "10 goroutines on one Client (v0.26.0 has no batch API)"
    queue_key = "asynq:{default}:pending"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.bin = os.environ.get(ENV_BIN, "")
        if not self.bin or not Path(self.bin).exists():
            raise RuntimeError("no go binary (bench/run.py builds it; is go installed?)")

    def version(self) -> str:
        return f"asynq {module_version()}"

    def _go(self, *args: str, stdin: str | None = None, timeout: float = 300) -> str:
        proc = subprocess.run([self.bin, *args, "-redis", self.url], input=stdin, capture_output=True,
                              text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise StepError(f"goasynq {args[0]} failed: {proc.stderr.strip()[-300:]}")
        return proc.stdout

    def _enqueue(self, n: int, mode: str, kind: str) -> float:
        out = self._go("enqueue", "-n", str(n), "-mode", mode, "-kind", kind, "-c", "10")
        return float(json.loads(out.strip().splitlines()[-1])["seconds"])

    def worker_argv(self) -> list[str]:
        return [self.bin, "worker", "-redis", self.url, "-c", str(CONCURRENCY)]  # -n from $BENCH_N

    def timed_single(self, n: int) -> float:
        return self._enqueue(n, "single", "x")

    def timed_batch(self, n: int) -> float:
        return self._enqueue(n, "concurrent", "x")

    def fill(self, n: int) -> None:
        self._enqueue(n, "concurrent", "d")

    def warm(self) -> None:
        self._enqueue(1, "single", "w")

    def produce_pickup(self, samples: int) -> None:
        self._go("pickup", "-samples", str(samples))

    def produce_delayed(self, dues: list[float]) -> None:
        self._go("delayed", stdin="".join(f"{d!r}\n" for d in dues))


ADAPTER = GoAdapter
