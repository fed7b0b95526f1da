"""The one door to Redis for synchronous callers outside the worker's loops (the Inspector, the dashboard's sessions,
the audit log, the CLI): batches of reads in one round trip, plain commands and script Calls, scripts loaded again
on NOSCRIPT, and every redis-py or socket error translated into asynqpy's (failures.translate).

    door = SyncDoor(connect(url), url)
    known, infos = door.read(lambda b: (b.command("SISMEMBER", keys.QUEUES, q), b.script(call)))
    door.command("PUBLISH", keys.CANCEL_CHANNEL, task_id)
    door.run(call)

Replies are what redis-py's own methods return (its reply callbacks apply: HGETALL gives a dict, SMEMBERS a
set, INFO a dict), so callers need no redis-py method of their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import redis
from redis.exceptions import NoScriptError

from asynqpy.connection import is_cluster
from asynqpy.rdb.failures import REDIS_ERRORS, reaching, translate, url_of
from asynqpy.rdb.scripts import Call, KeyOrArg, Script, queue_call, queue_eval
from asynqpy.rdb.sync_runner import SyncRunner

T = TypeVar("T")


class Batch:
    """Commands to send in one round trip (SyncDoor.read), in order: command() for a plain command, script() for
    a script Call (its raw reply comes back; Call.parse it, or use SyncDoor.read_script)."""

    def __init__(self) -> None:
        self.items: list[tuple[tuple[KeyOrArg, ...], dict[str, Any]] | Call[Any]] = []

    def command(self, *args: KeyOrArg, **options: Any) -> Batch:
        """Queue one command, e.g. command("ZRANGEBYSCORE", key, now, "+inf"). options go to redis-py's reply
        callback (e.g. withscores=True for ZRANGE ... WITHSCORES)."""
        self.items.append((args, options))
        return self

    def script(self, call: Call[Any]) -> Batch:
        """Queue one script Call (EVALSHA; read() loads the script on NOSCRIPT and sends the batch again)."""
        self.items.append(call)
        return self

    def scripts(self) -> set[Script]:
        return {i.script for i in self.items if isinstance(i, Call)}


class SyncDoor:
    """Reads, commands and scripts on a redis-py client (binary replies), with one error handling: every method
    raises RedisUnavailableError (the subclass of its kind: RedisBusyError, RedisOutOfMemoryError, ...) for
    transient trouble and RedisCommandError for any other error reply, naming the server with its password
    masked; the typed errors a Call's parser raises (ours) pass unchanged.

    url: the server's URL for those errors (they mask its passwords); default: the one the client was made from.
    Thread-safe as the client is (its pool); one door per client is enough.
    """

    def __init__(self, client: redis.Redis, url: str | None = None) -> None:
        self.client = client
        self.url = url or url_of(client)
        self.cluster = is_cluster(client)
        self.runner = SyncRunner(client)

    @classmethod
    def of(cls, conn: redis.Redis | SyncDoor) -> SyncDoor:
        """conn itself when it is a door, else a door on the client."""
        return conn if isinstance(conn, SyncDoor) else cls(conn)

    def read(self, fill: Callable[[Batch], object]) -> list[Any]:
        """Run the read-only commands fill(batch) queues, in one round trip (a pipeline, not a transaction), and
        return their replies in order. On NOSCRIPT (a fresh or flushed server) the batch's scripts are loaded
        and it is sent once more, so no list of scripts to preload can be forgotten (and so: reads only; a
        change is one script, through run()).

        Raises (translated) the first error reply among them.
        """
        batch = Batch()
        fill(batch)
        if not batch.items:
            return []
        with reaching(self.url):
            out = self._send(batch)
            if any(isinstance(x, NoScriptError) for x in out):
                out = self._send(batch, text=True)  # EVAL of the scripts' text: it cannot answer NOSCRIPT
        for x in out:
            if isinstance(x, Exception):
                raise translate(x, self.url) from x
        return out

    def _send(self, batch: Batch, *, text: bool = False) -> list[Any]:
        pipe: Any = self.client.pipeline(transaction=False)  # redis-py leaves execute_command untyped
        for item in batch.items:
            if isinstance(item, Call):
                (queue_eval if text else queue_call)(pipe, item)
            else:
                pipe.execute_command(*item[0], **item[1])
        return list(pipe.execute(raise_on_error=False))

    def read_script(self, call: Call[T]) -> T:
        """Run one read-only script Call in a batch of its own and return its parsed reply."""
        (raw,) = self.read(lambda b: b.script(call))
        return call.parse(raw)

    def command(self, *args: KeyOrArg, **options: Any) -> Any:
        """Run one plain command and return its reply as redis-py's method for it would (e.g. command("SET", k,
        v, "NX", "PX", 5000) is True or None). options go to redis-py (target_nodes="primaries" on a cluster)."""
        client: Any = self.client  # redis-py leaves execute_command untyped
        with reaching(self.url):
            return client.execute_command(*args, **options)

    def run(self, call: Call[T], *, register_queue: str | None = None) -> T:
        """Run one script Call (EVALSHA, the script loaded on NOSCRIPT) and return its parsed reply; the parser
        raises the typed errors of its reply codes. register_queue: see SyncRunner.run."""
        with reaching(self.url):
            return self.runner.run(call, register_queue=register_queue)

    def run_many(self, calls: Sequence[Call[T]]) -> list[T | Exception]:
        """Run Calls in one pipeline; each result is the parsed reply or the (translated) error of that call.
        Raises (translated) when the round trip itself fails."""
        with reaching(self.url):
            out = self.runner.run_many(calls)
        return [translate(x, self.url) if isinstance(x, REDIS_ERRORS) else x for x in out]

    def ping(self) -> float:
        """One PING: the round-trip time in seconds."""
        t0 = time.perf_counter()
        self.command("PING")
        return time.perf_counter() - t0

    def close(self) -> None:
        self.client.close()


