"""Runs `asynqpy` commands as real processes for the CLI tests: output collected as it comes, signals, cleanup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ASYNQPY = [sys.executable, "-m", "asynqpy.cli"]


def env(**extra: str) -> dict[str, str]:
    """The environment of a command under test: no Redis URL variables (commands find servers themselves),
    the repository importable (after PYTHONPATH_EXTRA when given), plus the other extra variables."""
    out = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "ASYNQPY_REDIS_URL", "ASYNQPY_DEBUG")}
    first = extra.pop("PYTHONPATH_EXTRA", "")  # e.g. a directory with a test plugin's metadata
    out["PYTHONPATH"] = os.pathsep.join(p for p in (first, str(ROOT), out.get("PYTHONPATH", "")) if p)
    out.update(extra)
    return out


def run(*args: str, cwd: Path = ROOT, input: str | None = None, timeout: float = 60,
        **extra_env: str) -> subprocess.CompletedProcess[str]:
    """Run `asynqpy ARGS` to the end."""
    return subprocess.run([*ASYNQPY, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          input=input, env=env(**extra_env))


class Proc:
    """A long-running command (dev, redis, worker) whose merged stdout/stderr is read in the background."""

    def __init__(self, argv: list[str], cwd: Path, **extra_env: str) -> None:
        self.p = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=env(**extra_env))
        self._chunks: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def asynqpy(cls, *args: str, cwd: Path, **extra_env: str) -> Proc:
        return cls([*ASYNQPY, *args], cwd, **extra_env)

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self._chunks.append(line)

    @property
    def output(self) -> str:
        return "".join(self._chunks)

    def wait_for(self, text: str, timeout: float = 30) -> str:
        """Wait until the output contains text; fail with the output so far if the process ends or time runs out."""
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if self.p.poll() is not None:
                self._reader.join(5)
                if text in self.output:
                    break
                raise AssertionError(f"exited with {self.p.returncode} before printing {text!r}:\n{self.output}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not printed within {timeout}s:\n{self.output}")
            time.sleep(0.05)
        return self.output

    def stop(self, sig: int = signal.SIGINT, timeout: float = 60) -> tuple[int, str]:
        """Send sig, wait for the exit; (exit code, whole output). Kills it if it does not stop in time."""
        if self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            self.p.kill()
            self.p.wait(10)
            raise AssertionError(f"did not stop within {timeout}s after {signal.Signals(sig).name}:\n{self.output}") \
                from exc
        finally:
            self._reader.join(5)
        return self.p.returncode, self.output

    def __enter__(self) -> Proc:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(10)
        self._reader.join(5)
