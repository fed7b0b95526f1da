"""PeriodicTaskManager: keeps a Scheduler's entries in step with a provider (a YAML file ships here), without a
restart; when the provider breaks, the last good set keeps running and the failure is logged and counted."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import yaml

from asynqpy.cron import parse_go_duration
from asynqpy.errors import AsynqError, InvalidArgumentError
from asynqpy.scheduler.core import Scheduler
from asynqpy.scheduler.entries import OPTION_NAMES, make_entry
from asynqpy.task import Task

log = logging.getLogger("asynqpy.scheduler")

DURATION_OPTIONS = ("timeout", "unique", "process_in", "retention")
TIME_OPTIONS = ("deadline", "process_at")


@dataclass(frozen=True)
class PeriodicTaskConfig:
    """One periodic task: its cron spec, the task, and Client.enqueue's keywords."""

    cronspec: str
    task: Task
    options: Mapping[str, Any] = field(default_factory=dict)


class ConfigProvider(Protocol):
    """Where a PeriodicTaskManager gets its entries; raise to report that they cannot be read now."""

    def get_configs(self) -> Sequence[PeriodicTaskConfig]: ...


class ConfigError(AsynqError):
    """A provider's configuration cannot be used (unreadable, malformed, or a bad entry)."""


def _option(where: str, name: str, value: Any) -> Any:
    if name in DURATION_OPTIONS and isinstance(value, str):
        try:
            return parse_go_duration(value)
        except ValueError as exc:
            raise ConfigError(f"{where}: option {name}: {exc}") from exc
    if name in TIME_OPTIONS and isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError as exc:
            raise ConfigError(f"{where}: option {name}: not an ISO 8601 time: {value!r}") from exc
    return value


def _payload(where: str, value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (dict, list, int, float, bool)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
    raise ConfigError(f"{where}: payload must be a string or JSON-like data, not {type(value).__name__}")


class YamlFileProvider:
    """Entries from a YAML file, read again at every sync:

        configs:
          - cronspec: "CRON_TZ=Europe/Berlin 0 3 * * *"
            task_type: report:daily
            payload: {team: acme}          # a string is sent as is; other data as JSON
            options: {queue: cron, max_retry: 3, timeout: 5m}
    """

    KEYS = frozenset({"cronspec", "task_type", "payload", "headers", "options"})

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def get_configs(self) -> list[PeriodicTaskConfig]:
        """Raises ConfigError naming the file (and the entry) when it cannot be read or is malformed."""
        try:
            doc = yaml.safe_load(self.path.read_text())
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read: {exc.strerror or exc}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"{self.path}: not valid YAML: {' '.join(str(exc).split())}") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("configs"), list):
            raise ConfigError(f"{self.path}: expected a mapping with a 'configs' list")
        out = []
        for i, item in enumerate(doc["configs"]):
            where = f"{self.path}: configs[{i}]"
            if not isinstance(item, dict):
                raise ConfigError(f"{where}: expected a mapping")
            unknown = sorted(set(item) - self.KEYS)
            if unknown:
                raise ConfigError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(self.KEYS))})")
            spec, ttype = item.get("cronspec"), item.get("task_type")
            if not isinstance(spec, str) or not isinstance(ttype, str) or not ttype.strip():
                raise ConfigError(f"{where}: cronspec and task_type must be non-empty strings")
            opts = item.get("options") or {}
            if not isinstance(opts, dict):
                raise ConfigError(f"{where}: options must be a mapping")
            bad = sorted(set(opts) - set(OPTION_NAMES))
            if bad:
                raise ConfigError(f"{where}: unknown option {bad[0]!r} (options: {', '.join(OPTION_NAMES)})")
            headers = item.get("headers") or {}
            if not isinstance(headers, dict):
                raise ConfigError(f"{where}: headers must be a mapping of strings")
            task = Task(ttype, _payload(where, item.get("payload")), {str(k): str(v) for k, v in headers.items()})
            out.append(PeriodicTaskConfig(spec, task, {k: _option(where, k, v) for k, v in opts.items()}))
        return out


class PeriodicTaskManager:
    """Runs a Scheduler whose entries come from provider, re-read every sync_interval seconds (asynq: 3 min).

    sync_failures counts the syncs that failed (last_error says why until one works again); the entries then
    stay as they were.
    Other keywords go to the Scheduler (redis_url, location, catch_up, clock, ...).
    """

    def __init__(self, provider: ConfigProvider, sync_interval: float = 180.0, *,
                 scheduler: Scheduler | None = None, **scheduler_settings: Any) -> None:
        if isinstance(sync_interval, bool) or not isinstance(sync_interval, int | float) \
                or not math.isfinite(sync_interval) or sync_interval <= 0:
            raise InvalidArgumentError(f"sync_interval must be a positive finite number of seconds, got "
                                       f"{sync_interval!r}", argument="sync_interval")
        self.provider = provider
        self.sync_interval = float(sync_interval)
        self.scheduler = scheduler or Scheduler(**scheduler_settings)
        self.sync_failures = 0
        self.last_error: str | None = None
        self.syncs = 0
        self._ids: set[str] = set()

    def _wanted(self) -> dict[str, Any]:
        """The provider's entries by id. Raises what the provider raises, or ConfigError naming a bad entry."""
        s = self.scheduler
        wanted = {}
        for i, c in enumerate(list(self.provider.get_configs())):
            try:
                e = make_entry(c.cronspec, c.task, dict(c.options), {}, location=s.location, entry_id=None,
                               now=s.clock.now())
            except InvalidArgumentError as exc:
                where = f"{self.provider.path}: configs[{i}]" if isinstance(self.provider, YamlFileProvider) \
                    else f"entry {i}"
                raise ConfigError(f"{where} ({c.task.type}): {exc}") from exc
            wanted[e.id] = c
        return wanted

    def sync(self, wanted: dict[str, Any] | None = None) -> bool:
        """Read the provider (unless given what it read) and apply the changes. False (logged, counted) when the
        provider failed."""
        s = self.scheduler
        try:
            wanted = self._wanted() if wanted is None else wanted
        except Exception as exc:
            self.sync_failures += 1
            level = logging.ERROR if str(exc) != self.last_error else logging.DEBUG  # once per distinct error
            self.last_error = str(exc)
            log.log(level, "scheduler: config sync failed (%d so far), keeping the %d entries running: %s",
                    self.sync_failures, len(self._ids), exc)
            return False
        if self.last_error is not None:
            log.info("scheduler: config sync works again")
            self.last_error = None
        for eid in self._ids - set(wanted):
            with contextlib.suppress(InvalidArgumentError):
                s.unregister(eid)
        for eid, c in wanted.items():
            if eid not in self._ids:
                s.register(c.cronspec, c.task, dict(c.options), entry_id=eid)
        if set(wanted) != self._ids:
            log.info("scheduler: %d entries (%d added, %d removed)", len(wanted), len(set(wanted) - self._ids),
                     len(self._ids - set(wanted)))
        self._ids = set(wanted)
        self.syncs += 1
        return True

    def run(self) -> None:
        """Sync, then run until SIGTERM or SIGINT. Raises ConfigError when the first sync fails."""
        self._first_sync()
        asyncio.run(self._run(signals=True))

    async def arun(self) -> None:
        """The asyncio form of run()."""
        self._first_sync()
        await self._run(signals=False)

    def stop(self) -> None:
        self.scheduler.stop()

    def _first_sync(self) -> None:
        """Raises ConfigError, and logs nothing (there are no entries to keep yet), when the first read fails."""
        try:
            wanted = self._wanted()
        except Exception as exc:
            self.sync_failures += 1
            self.last_error = str(exc)
            raise ConfigError(f"cannot start: {exc}") from exc
        self.sync(wanted)

    async def _run(self, *, signals: bool) -> None:
        syncer = asyncio.ensure_future(self._sync_loop())
        try:
            if signals:
                await self.scheduler._run_with_signals()
            else:
                await self.scheduler.arun()
        finally:
            syncer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await syncer

    async def _sync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.sync_interval)
            await asyncio.to_thread(self.sync)
