"""Idle cost: the commands per second one idle worker process with three queues sends Redis.

    python bench/idle.py [--libs asynqpy,go] [--seconds 10] [--redis-url URL]

Each worker starts on an empty database, settles for --settle seconds, then INFO commandstats is read
before and after --seconds of idling; the difference, per command, is the idle cost (the reading
connection's own INFO calls are left out). bench/run.py calls measure() for its idle line.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":
    sys.path[0] = str(ROOT)

import redis  # noqa: E402

from bench.common import bench_redis  # noqa: E402

QUEUES = ("critical", "default", "low")
MUX = '''from asynqpy import ServeMux
mux = ServeMux()


@mux.handler("bench:noop")
async def noop(task):
    pass
'''


def commandstats(r: redis.Redis) -> dict[str, int]:
    """Calls per command since the last reset, from INFO commandstats."""
    out: dict[str, int] = {}
    for name, stats in r.info("commandstats").items():
        out[name.removeprefix("cmdstat_")] = int(stats["calls"])
    return out


def worker_argv(lib: str, url: str, work: Path) -> list[str]:
    if lib == "asynqpy":
        (work / "idle_mux.py").write_text(MUX)
        exe = Path(sys.executable).parent / "asynqpy"
        return [str(exe), "worker", "idle_mux:mux", "--redis-url", url,
                "--queues", ",".join(f"{q}=1" for q in QUEUES)]
    if lib == "go":
        binary = os.environ.get("BENCH_GO_BIN", "")
        if not binary:
            raise RuntimeError("no go binary (set BENCH_GO_BIN; bench/run.py builds it)")
        return [binary, "worker", "-redis", url, "-queues", ",".join(QUEUES)]
    raise ValueError(f"no idle worker for {lib}")


def measure(lib: str, url: str, *, seconds: float = 10.0, settle: float = 3.0) -> dict[str, Any]:
    """{"per_second": total, "commands": {name: per second}} of one idle worker of lib."""
    r = redis.Redis.from_url(url)
    with tempfile.TemporaryDirectory(prefix="asynqpy-idle-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(work), str(ROOT)])}
        proc = subprocess.Popen(worker_argv(lib, url, work), cwd=work, env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(settle)
            if proc.poll() is not None:
                raise RuntimeError(f"{lib} worker exited with status {proc.returncode}")
            before = commandstats(r)
            time.sleep(seconds)
            after = commandstats(r)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    per = {k: (after[k] - before.get(k, 0)) / seconds for k in after}
    per["info"] = per.get("info", 0) - 1 / seconds  # our own second INFO
    per = {k: round(v, 1) for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if v > 0}
    return {"per_second": round(sum(per.values()), 1), "commands": per}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/idle.py", description=__doc__.split("\n")[0])
    ap.add_argument("--libs", default="asynqpy")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--redis-url", help="an empty database to use (default: a private Valkey)")
    args = ap.parse_args(argv)
    with bench_redis(args.redis_url) as url:
        for lib in [x for x in args.libs.split(",") if x]:
            redis.Redis.from_url(url).flushdb()
            res = measure(lib, url, seconds=args.seconds)
            cmds = ", ".join(f"{k} {v:g}" for k, v in res["commands"].items())
            print(f"{lib}: {res['per_second']:g} commands/s idle ({cmds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
