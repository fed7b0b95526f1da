"""Runs every measurement of one library and writes its raw results as JSON (bench/run.py calls this).

    python -m bench.adapters LIB --redis-url URL --out FILE [--tasks N] ...

It empties the Redis database of --redis-url before each measurement: run it only on a database
that bench/run.py was allowed to flush.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench.adapters import LIBS
from bench.adapters.base import ENV_URL, StepError, stop_all_workers
from bench.adapters.measure import Bench, reason


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.adapters")
    ap.add_argument("lib", choices=sorted(LIBS))
    ap.add_argument("--redis-url", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--tasks", type=int, default=20000)
    ap.add_argument("--enqueue-tasks", type=int, default=5000)
    ap.add_argument("--pickup-samples", type=int, default=200)
    ap.add_argument("--delayed-samples", type=int, default=50)
    ap.add_argument("--delay", type=float, default=0.5)
    ap.add_argument("--spread", type=float, default=2.0)
    ap.add_argument("--drain-timeout", type=float, default=60.0)
    ap.add_argument("--steps", default="enqueue_single,enqueue_batch,producer_extras,drain,drain2,latency")
    ap.add_argument("--log-dir", type=Path, default=Path("bench/results/logs"))
    args = ap.parse_args(argv)

    os.environ[ENV_URL] = args.redis_url  # adapter modules read it at import
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out: dict[str, Any] = {"lib": args.lib}

    def save() -> None:
        args.out.write_text(json.dumps(out))

    def say(msg: str) -> None:
        print(f"[{args.lib}] {msg}", file=sys.stderr, flush=True)

    try:
        module = importlib.import_module(LIBS[args.lib])
        adapter = module.ADAPTER(args.redis_url)
    except Exception as exc:
        missing = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
        out["error"] = f"{missing} not installed" if missing else reason(exc)
        say(out["error"])
        save()
        return 0
    out.update(version=adapter.version(), settings=adapter.settings, batch_how=adapter.batch_how)
    save()
    bench = Bench(adapter, args.redis_url, args.log_dir, say)
    steps = args.steps.split(",")
    try:
        for step in ("enqueue_single", "enqueue_batch", "producer_extras", "drain", "drain2", "latency"):
            if step not in steps:
                continue
            t0 = time.time()
            try:
                if step == "drain2" and adapter.worker_argv_processes(2) is None:
                    continue  # this library is measured with one process only
                if step in ("drain", "drain2", "latency") and (why := adapter.unavailable()):
                    raise StepError(why)
                if step == "enqueue_single":
                    out[step] = bench.enqueue_single(args.enqueue_tasks)
                elif step == "enqueue_batch":
                    out[step] = bench.enqueue_batch(args.tasks)
                elif step == "producer_extras":
                    out[step] = bench.producer_extras(args.tasks)
                elif step == "drain":
                    out[step] = bench.drain(args.tasks, args.drain_timeout)
                elif step == "drain2":  # `--processes 2`, beside Go's one process
                    out[step] = bench.drain(args.tasks, args.drain_timeout, processes=2)
                else:
                    out.update(bench.latency(args.pickup_samples, args.delayed_samples, args.delay, args.spread))
            except Exception as exc:
                err = {"error": reason(exc)}
                if step == "latency":
                    out["pickup"] = out["delayed"] = err
                else:
                    out[step] = err
                if not isinstance(exc, StepError):
                    traceback.print_exc(file=sys.stderr)
            say(f"{step} done in {time.time() - t0:.1f}s")
            save()
    finally:
        stop_all_workers()
        try:
            adapter.close()
        except Exception:
            pass
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
