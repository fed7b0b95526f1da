"""Measures asynqpy beside Go asynq, huey, dramatiq, saq, arq and RQ on one Redis, in one run.

    python bench/run.py [--tasks 20000] [--libs asynqpy,go,huey,...] [--redis-url URL] [--json out.json]
    python bench/run.py --scale [bench/scale_bench.py's options]   (queues, task types and memory of the hot path)

Without --redis-url it starts a private Valkey (asynqpy.embedded) and empties it between libraries.
With --redis-url it empties that database (FLUSHDB) between libraries and measurements, so it refuses a
database that already holds keys unless --flush-existing is given. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # run as a script: import `bench` from the repository, not bench/ itself

import redis  # noqa: E402

from bench import idle as idle_cost  # noqa: E402
from bench import report  # noqa: E402
from bench.adapters import LIBS  # noqa: E402
from bench.adapters.go_adapter import ENV_BIN, GO_DIR  # noqa: E402

RESULTS = ROOT / "bench" / "results"
# --only's step names -> the driver's steps (drain: one process and `--processes 2`; pickup and delayed are measured
# on one worker, so either runs both)
STEPS = {"enqueue": "enqueue_single", "batch": "enqueue_batch", "producer": "producer_extras", "drain": "drain,drain2",
         "pickup": "latency", "delayed": "latency", "idle": ""}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python bench/run.py", description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=20000, help="tasks drained, and enqueued batched (20000)")
    ap.add_argument("--enqueue-tasks", type=int, default=5000, help="tasks enqueued one by one (5000)")
    ap.add_argument("--libs", default=",".join(LIBS), help=f"comma-separated subset of {','.join(LIBS)}")
    ap.add_argument("--redis-url", help="use this Redis database instead of a private Valkey (it gets flushed)")
    ap.add_argument("--flush-existing", action="store_true", help="allow --redis-url to name a non-empty db")
    ap.add_argument("--json", type=Path, help="also write the results, with every sample, to this file")
    ap.add_argument("--pickup-samples", type=int, default=200)
    ap.add_argument("--delayed-samples", type=int, default=50)
    ap.add_argument("--delay", type=float, default=0.5, help="seconds from enqueue to the first due time")
    ap.add_argument("--spread", type=float, default=2.0, help="seconds over which due times are staggered")
    ap.add_argument("--drain-timeout", type=float, default=60.0, help="stop a drain after this many seconds")
    ap.add_argument("--idle-seconds", type=float, default=10.0,
                    help="measure an idle worker (three queues) of asynqpy and go this long (0: skip)")
    ap.add_argument("--lib-timeout", type=float, default=300.0, help="give up on one library after this")
    ap.add_argument("--only", default="",
                    help=f"comma-separated subset of the steps {','.join(STEPS)} (default: all of them)")
    args = ap.parse_args(argv)
    only = [x.strip() for x in args.only.split(",") if x.strip()]
    if bad := [x for x in only if x not in STEPS]:
        ap.error(f"unknown steps {bad}; choose from {', '.join(STEPS)}")
    args.only = only
    libs = [x.strip() for x in args.libs.split(",") if x.strip()]
    unknown = [x for x in libs if x not in LIBS]
    if unknown:
        ap.error(f"unknown libraries {unknown}; choose from {', '.join(LIBS)}")
    args.libs = libs
    return args


def build_go(out_dir: Path) -> tuple[str | None, str | None]:
    """Builds bench/go_asynq once. Returns (binary, None) or (None, reason)."""
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        return None, "no go"
    binary = out_dir / "goasynq"
    try:
        proc = subprocess.run([go, "build", "-o", str(binary), "."], cwd=GO_DIR, capture_output=True,
                              text=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        return None, "go build timed out"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"go build failed: {last[:200]}"
    return str(binary), None


def go_version() -> str:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    try:
        return subprocess.run([go, "version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return ""


def run_lib(lib: str, url: str, args: argparse.Namespace, env: dict[str, str], work: Path) -> dict[str, Any]:
    """Runs one library's driver (python -m bench.adapters) in its own process group and reads its JSON."""
    out = work / f"{lib}.json"
    cmd = [sys.executable, "-m", "bench.adapters", lib, "--redis-url", url, "--out", str(out),
           "--tasks", str(args.tasks), "--enqueue-tasks", str(args.enqueue_tasks),
           "--pickup-samples", str(args.pickup_samples), "--delayed-samples", str(args.delayed_samples),
           "--delay", str(args.delay), "--spread", str(args.spread), "--drain-timeout", str(args.drain_timeout),
           "--log-dir", str(RESULTS / "logs")]
    if args.only:
        cmd += ["--steps", ",".join(dict.fromkeys(STEPS[x] for x in args.only if STEPS[x]))]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
    timed_out = False
    try:
        proc.wait(args.lib_timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        if proc.poll() is None:  # timed out, or Ctrl-C: the driver stops its workers on SIGTERM
            _end_group(proc)
    try:
        raw: dict[str, Any] = json.loads(out.read_text())
    except (OSError, ValueError):
        raw = {"lib": lib, "error": f"driver exited with status {proc.returncode}"}
    if timed_out:
        raw.setdefault("lib", lib)
        for step in ("drain", "pickup", "delayed"):
            raw.setdefault(step, {"error": f"library timed out after {args.lib_timeout:.0f}s"})
    raw["tasks"] = args.tasks
    return raw


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def server_info(r: redis.Redis) -> str:
    info = r.info("server")
    if "valkey_version" in info:
        return f"valkey {info['valkey_version']}"
    return f"redis {info.get('redis_version', '?')}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--scale" in argv:  # the scale of the hot path instead: its own options (bench/scale_bench.py --help)
        from bench import scale_bench

        return scale_bench.main([a for a in argv if a != "--scale"])
    args = parse_args(argv)
    server = None
    if args.redis_url:
        url = args.redis_url
        r = redis.Redis.from_url(url)
        if r.dbsize() and not args.flush_existing:
            print(f"{url} holds {r.dbsize()} keys and the benchmark empties it (FLUSHDB) between runs; "
                  "name an empty database or pass --flush-existing", file=sys.stderr)
            return 2

        def flush() -> None:
            r.flushdb()
    else:
        from asynqpy.embedded import EmbeddedServer

        server = EmbeddedServer().start()
        url = server.url
        r = redis.Redis.from_url(url)

        def flush() -> None:
            r.flushall()

    started = time.time()
    results: dict[str, dict[str, Any]] = {}
    idle: dict[str, dict[str, Any]] = {}
    meta: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "server": server_info(r), "private_server": server is not None, "go": go_version(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("json", "redis_url")},
    }
    try:
        with tempfile.TemporaryDirectory(prefix="asynqpy-bench-") as tmp:
            work = Path(tmp)
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                                               os.environ.get("PYTHONPATH")]))}
            go_bin, go_missing = (None, None)
            if "go" in args.libs:
                print("building bench/go_asynq ...", file=sys.stderr, flush=True)
                go_bin, go_missing = build_go(work)
                if go_bin:
                    env[ENV_BIN] = go_bin
            for lib in args.libs:
                flush()
                if lib == "go" and go_missing:
                    results[lib] = {"lib": lib, "error": go_missing}
                    continue
                print(f"--- {lib}", file=sys.stderr, flush=True)
                results[lib] = run_lib(lib, url, args, env, work)
            flush()
            measure_idle = args.idle_seconds > 0 and (not args.only or "idle" in args.only)
            for lib in [x for x in ("asynqpy", "go") if x in args.libs] if measure_idle else []:
                if lib == "go" and not go_bin:
                    continue
                print(f"--- idle {lib}", file=sys.stderr, flush=True)
                os.environ.update(env)
                try:
                    idle[lib] = idle_cost.measure(lib, url, seconds=args.idle_seconds)
                except Exception as exc:  # reported in its line, the rest of the run stands
                    idle[lib] = {"error": str(exc)[:200]}
                flush()
    finally:
        if server is not None:
            server.stop()
    meta["seconds"] = round(time.time() - started, 1)

    rows = [report.summarize(results[lib]) for lib in args.libs]
    print()
    print(f"asynqpy benchmark: {meta['machine']}, {meta['server']}, Python {meta['python']}, "
          f"{args.tasks:,} tasks drained, {meta['seconds']:.0f}s")
    print()
    print(report.table(rows))
    print()
    print(report.ratios(rows))
    print()
    print(report.producer(rows, idle))
    print()
    print(report.targets(rows))
    print(report.producer_targets(rows, idle))
    if args.json:
        for row in rows:
            results[row["lib"]]["summary"] = {k: v for k, v in row.items() if k != "lib"}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"meta": meta, "results": results, "idle": idle}, indent=1))
        print(f"\nresults written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
