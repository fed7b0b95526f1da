"""What Redis saw during one measurement of the Inspector benchmark: its script calls, their server time
(INFO commandstats) and its longest single call (SLOWLOG).
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

BLOCK_WARN_MS = 5.0  # a single Redis call longer than this is reported as blocking


@dataclass
class Calls:
    """What Redis saw in one measurement window: script calls and their server time (INFO commandstats),
    and the longest single call (SLOWLOG; calls faster than the threshold are not logged)."""

    scripts: int = 0
    script_ms: float = 0.0
    logged: int = 0
    max_ms: float = 0.0
    max_cmd: str = ""
    over_warn: int = 0
    overflow: bool = False

    def note(self, threshold_us: int) -> str:
        if not self.logged:
            return f"max call < {threshold_us / 1000:g} ms"
        return f"max call {self.max_ms:.2f} ms ({self.max_cmd})"


class Probe:
    """Measures Redis around a block of calls.

    Longest call: SLOWLOG with slowlog-log-slower-than = threshold_us. Valkey (like Redis 7) also logs every
    command a script runs as its own entry, so 0 would add a log entry per HSET inside a script, slowing
    the very scripts being measured several times over; a small threshold keeps the log to the slow calls.
    Script calls and their server time: deltas of INFO commandstats (eval + evalsha; Lua cannot call
    EVAL, so every one is a client's call).
    """

    MAX_LEN = 100_000

    def __init__(self, r: redis.Redis, threshold_us: int) -> None:
        self.r = r
        self.threshold_us = threshold_us
        r.config_set("slowlog-log-slower-than", threshold_us)
        r.config_set("slowlog-max-len", self.MAX_LEN)
        self._base = (0, 0)

    def _scripts(self) -> tuple[int, int]:
        stats = self.r.info("commandstats")
        calls = usec = 0
        for name in ("cmdstat_eval", "cmdstat_evalsha"):
            st = stats.get(name, {})  # a NOSCRIPT reply (before the EVAL fallback) is a failed call
            calls += int(st.get("calls", 0)) - int(st.get("failed_calls", 0)) - int(st.get("rejected_calls", 0))
            usec += int(stats.get(name, {}).get("usec", 0))
        return calls, usec

    def reset(self) -> None:
        self.r.slowlog_reset()
        self._base = self._scripts()

    def read(self) -> Calls:
        calls_now, usec_now = self._scripts()
        entries = self.r.slowlog_get(-1)
        calls = Calls(scripts=calls_now - self._base[0], script_ms=(usec_now - self._base[1]) / 1000.0,
                      overflow=len(entries) >= self.MAX_LEN)
        for e in entries:
            cmd = e["command"]
            cmd = cmd.decode("utf-8", "replace") if isinstance(cmd, bytes) else str(cmd)
            name = cmd.split(" ", 1)[0].upper()
            if name in ("SLOWLOG", "CONFIG", "INFO"):
                continue
            calls.logged += 1
            ms = e["duration"] / 1000.0
            calls.over_warn += ms > BLOCK_WARN_MS
            if ms > calls.max_ms:
                calls.max_ms, calls.max_cmd = ms, name
        return calls
