"""Find benchmark: Inspector.find, count_matches and a find job on a 1,000,000-task queue (private Valkey).

    python bench/find_bench.py                 # 1,000,000 pending, 100,000 retry, 10,000 archived (~1 minute)
    python bench/find_bench.py --scale 0.05    # a quick check

For each query: the time of one find call (limit 50, at most 10,000 tasks scanned, 500 per script call), tasks
judged per second, and the longest single Redis call (SLOWLOG, calls over --slowlog-us are logged); then the
preview count over 100,000 tasks, and a find job archiving the 1 in 1,000 pending tasks whose payload holds
the needle (one LREM walk of the pending list per call, from its nearer end). The goal: no call over ~10 ms.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/find_bench.py` from anywhere
    sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from asynqpy.embedded import EmbeddedServer  # noqa: E402
from asynqpy.rdb.broker import ARCHIVE_MAX_SIZE  # noqa: E402
from bench.inspector_data import NEEDLE, NEEDLE_EVERY, Loader  # noqa: E402
from bench.inspector_probe import Calls, Probe  # noqa: E402
from inspector import Inspector  # noqa: E402
from inspector.scripts import script  # noqa: E402

QUERIES = (
    ("type glob, every task matches", "type:bench:*"),
    ("type glob, none matches", "type:email:*"),
    ("id prefix, none matches", "id:ffff*"),
    ("state + error + retried", 'state:retry error:"connection refused" retried:>2'),
    ("age, none matches", "age:>30d"),
    ("payload text (1 in 1000)", f"payload:{NEEDLE}"),
    ("payload JSON path (1 in 1000)", f"payload.note:*{NEEDLE}"),
    ("negated type", "-type:bench:*"),
)


def slowest_by_script(admin: redis.Redis) -> str:
    """The longest logged call of each find script (SLOWLOG entries name the script by its SHA1)."""
    names = {script(n).sha: n for n in ("find", "find_act", "find_sizes")}
    worst: dict[str, float] = {}
    for e in admin.slowlog_get(-1):
        cmd = e["command"]
        parts = (cmd.decode("utf-8", "replace") if isinstance(cmd, bytes) else str(cmd)).split()
        name = names.get(parts[1], parts[0]) if len(parts) > 1 else parts[0]
        worst[name] = max(worst.get(name, 0.0), e["duration"] / 1000.0)
    return ", ".join(f"{n} {ms:.1f} ms" for n, ms in sorted(worst.items()))


def avg(calls: Calls) -> float:
    """Mean server time of a script call (INFO commandstats), steadier than the maximum on a busy machine."""
    return calls.script_ms / calls.scripts if calls.scripts else 0.0


def measure(probe: Probe, fn: Callable[[], Any]) -> tuple[float, Any, Calls]:
    probe.reset()
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1e3, out, probe.read()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0, help="1.0: a 1,000,000-task pending list")
    ap.add_argument("--slowlog-us", type=int, default=1000, help="SLOWLOG threshold in microseconds")
    args = ap.parse_args()
    big = max(1000, round(1_000_000 * args.scale))
    side = max(1000, round(100_000 * args.scale))
    server = EmbeddedServer().start()
    try:
        admin = redis.Redis.from_url(server.url)
        probe = Probe(admin, args.slowlog_us)
        loader = Loader(admin, time.time())
        t0 = time.perf_counter()
        loader.add("big", 1, "pending", big, needle_every=NEEDLE_EVERY)
        loader.add("big", 1, "retry", side, needle_every=NEEDLE_EVERY)
        archived = min(side, ARCHIVE_MAX_SIZE)  # asynq's cap: more would be trimmed by the first archive
        loader.add("big", 1, "archived", archived, needle_every=NEEDLE_EVERY)
        total = big + side + archived
        print(f"loaded {total:,} tasks into queue big ({big:,} pending, {side:,} retry, {archived:,} archived) "
              f"in {time.perf_counter() - t0:.1f} s; used memory {admin.info('memory')['used_memory_human']}")
        insp = Inspector(server.url)
        print(f"\n{'query':<34} {'ms/find':>8} {'scanned':>8} {'tasks/s':>10} {'found':>6} {'ms/script':>9} "
              f"{'max Redis call':>16}")
        for name, q in QUERIES:
            ms, res, calls = measure(probe, lambda q=q: insp.find("big", q, limit=50, max_scan=10_000))
            rate = res.scanned / (ms / 1e3) if ms else 0
            print(f"{name:<34} {ms:8.1f} {res.scanned:8d} {rate:10,.0f} {len(res.tasks):6d} {avg(calls):9.2f} "
                  f"{calls.note(args.slowlog_us):>16}")
        ms, far, calls = measure(probe, lambda: insp.find("big", "type:email:*", cursor=f"pending:{big - 5000}",
                                                          max_scan=10_000))
        print(f"{'far end of the list, by cursor':<34} {ms:8.1f} {far.scanned:8d} "
              f"{far.scanned / (ms / 1e3):10,.0f} {len(far.tasks):6d} {avg(calls):9.2f} "
              f"{calls.note(args.slowlog_us):>16}")
        ms, cnt, calls = measure(probe, lambda: insp.count_matches("big", f"payload:{NEEDLE}", max_scan=100_000))
        print(f"\npreview count over {cnt.scanned:,} tasks: {cnt.matched} match (complete={cnt.complete}), "
              f"{ms:.0f} ms, {avg(calls):.2f} ms per script call, {calls.note(args.slowlog_us)}")
        ms, cnt, calls = measure(probe, lambda: insp.count_matches("big", "state:retry retried:>2",
                                                                   max_scan=100_000))
        print(f"preview count, cheap terms only (ids), over {cnt.scanned:,}: {cnt.matched} match, {ms:.0f} ms, "
              f"{avg(calls):.2f} ms per script call, {calls.note(args.slowlog_us)}")
        job = insp.start_find_job("archive", "big", f"state:pending payload:{NEEDLE}")
        ms, final, calls = measure(probe, lambda: insp.run_job(job.id))
        print(f"\nfind job archiving the needles among {big:,} pending tasks: {final.changed} archived, "
              f"{final.done:,} scanned in {ms / 1e3:.1f} s ({final.done / (ms / 1e3):,.0f} tasks/s); "
              f"{calls.scripts} script calls ({avg(calls):.2f} ms each on average), {calls.note(args.slowlog_us)}, "
              f"{calls.over_warn} calls over 5 ms")
        print(f"  longest call per script: {slowest_by_script(admin)}")
        left = insp.count_matches("big", f"state:pending payload:{NEEDLE}", max_scan=total)
        assert left.matched == 0 and left.complete, left
        print(f"\nload average {os.getloadavg()[0]:.2f} (2 cores shared: figures vary with other work)")
        insp.close()
        admin.close()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
