"""SyncRunner: runs Calls on a redis.Redis client, with EVALSHA and the EVAL retry on NOSCRIPT."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError

from asynqpy.connection import is_cluster
from asynqpy.rdb.durability import Durability
from asynqpy.rdb.keys import QUEUES
from asynqpy.rdb.plain import plain_pool
from asynqpy.rdb.resp import as_eval, pack, pack_command
from asynqpy.rdb.scripts import (
    Call,
    Script,
    durable_replies,
    eval_args,
    evalsha_args,
    gather_by_node,
    parse_all,
    queue_call,
    queue_eval,
)

T = TypeVar("T")

# How many forks made this process (0 in the first): a runner's own connection is its parent's when the count
# changed since it took it.
_forks = [0]
os.register_at_fork(after_in_child=lambda: _forks.__setitem__(0, _forks[0] + 1))


class SyncRunner:
    """Runs Calls on a redis.Redis client (decode_responses must be off: messages are binary)."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._pool = plain_pool(client)
        self.plain = self._pool is not None  # send() and send_scripts() work
        self._lock = threading.Lock()
        self._conn: Any = None
        self._conn_forks = 0

    def send(self, packed: Sequence[bytes]) -> list[Any]:
        """Send pre-packed commands in one round trip; the raw replies, an error reply as its exception.

        The runner keeps one pooled connection for itself (a thread that finds it busy takes another from the
        pool), so the hot path skips the pool's checks. A broken connection (e.g. closed by the server while
        idle) is retried once, as redis-py does. Needs a plain client (self.plain).
        """
        data = b"".join(packed) if len(packed) > 1 else packed[0]
        own = self._lock.acquire(blocking=False)
        try:
            for attempt in (1, 2):
                conn = self._own() if own else self._pool.get_connection()
                try:
                    conn.send_packed_command([data])
                    out: list[Any] = []
                    for _ in packed:
                        try:
                            out.append(conn.read_response())
                        except ResponseError as exc:
                            out.append(exc)
                    return out
                except RedisConnectionError:
                    conn.disconnect()
                    if attempt == 2:
                        raise
                except BaseException:
                    conn.disconnect()
                    raise
                finally:
                    if not own:
                        self._pool.release(conn)
            raise AssertionError("unreachable")
        finally:
            if own:
                self._lock.release()

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """The runner's own connection, or one from the pool while another thread uses that (see send())."""
        own = self._lock.acquire(blocking=False)
        try:
            conn = self._own() if own else self._pool.get_connection()
            try:
                yield conn
            finally:
                if not own:
                    self._pool.release(conn)
        finally:
            if own:
                self._lock.release()

    def _own(self) -> Any:
        """The runner's own connection (a new one in a forked child); it reconnects by itself when dropped."""
        if self._conn is None or self._conn_forks != _forks[0]:  # (not os.getpid(): a system call per command)
            self._conn = self._pool.get_connection()  # in use for good: the pool closes it with the client
            self._conn_forks = _forks[0]
        return self._conn

    def send_scripts(self, packed: Sequence[bytes], scripts: Sequence[Script | None]) -> list[Any]:
        """send(), then load the scripts Redis did not have (NOSCRIPT) and send those commands again.
        scripts: each command's script (None for a command that is no script call)."""
        raws = self.send(packed)
        missing = [i for i, r in enumerate(raws) if isinstance(r, NoScriptError) and scripts[i] is not None]
        if missing:
            again = self.send([as_eval(packed[i], scripts[i]) for i in missing])  # type: ignore[arg-type]
            for i, r in zip(missing, again, strict=True):
                raws[i] = r
        return raws

    def run(self, call: Call[T], *, register_queue: str | None = None) -> T:
        """Run one Call and return its parsed reply; the parser raises the typed errors.

        register_queue: also SADD it to asynq:queues, in the same round trip (a producer's duty).
        """
        if self._pool is not None:
            return call.parse(self.run_packed(pack(call), call.script, register_queue=register_queue))
        if register_queue is not None:
            return self._run_registering(call, register_queue)
        n = len(call.keys)
        try:
            raw = self.redis.evalsha(call.script.sha, n, *call.keys, *call.args)
        except NoScriptError:
            raw = self.redis.eval(call.script.text, n, *call.keys, *call.args)
        return call.parse(raw)

    def run_packed(self, cmd: bytes, sc: Script, *, register_queue: str | None = None) -> Any:
        """run() of a call packed already (an EVALSHA of sc): its raw reply, an error reply raised. Needs a plain
        client (self.plain)."""
        sent = [cmd] if register_queue is None else [pack_command("SADD", QUEUES, register_queue), cmd]
        raw = self.send(sent)[-1]
        if isinstance(raw, NoScriptError):
            raw = self.send([as_eval(cmd, sc)])[0]
        if isinstance(raw, Exception):
            raise raw
        return raw

    def run_durable(self, call: Call[T], durable: Durability, *, register_queue: str | None = None) -> T:
        """run(), then WAIT on the same connection (the node holding the call's keys on a cluster).

        Raises NotDurableError when too few replicas confirm within the timeout (the write stands on the primary).
        """
        if register_queue is not None:
            self.redis.sadd(QUEUES, register_queue)  # a global key: another slot on a cluster
        [(raw, acked)] = self._durable_groups([call], durable)
        if isinstance(raw[0], Exception):
            raise raw[0]
        result = call.parse(raw[0])  # typed errors (duplicate, conflict) first: then nothing was written
        durable.check(acked, call.script.name)
        return result

    def run_many_durable(self, calls: Sequence[Call[T]], durable: Durability) -> tuple[list[T | Exception], bool]:
        """run_many() followed by WAIT per node. Returns (results, True when every node's replicas confirmed)."""
        return gather_by_node(calls, self._by_node(calls), self._durable_groups(calls, durable), durable)

    def _by_node(self, calls: Sequence[Call[Any]]) -> list[list[int]]:
        groups: dict[str, list[int]] = {}
        for i, c in enumerate(calls):
            node = self.redis.get_node_from_key(c.keys[0]).name if is_cluster(self.redis) else ""  # type: ignore[attr-defined]
            groups.setdefault(node, []).append(i)
        return list(groups.values())

    def _durable_groups(self, calls: Sequence[Call[Any]], durable: Durability) -> list[tuple[list[Any], Any]]:
        """Per node: its calls and WAIT in one pipeline on one connection; NOSCRIPT loads and retries once."""
        out = []
        for idxs in self._by_node(calls):
            group = [calls[i] for i in idxs]
            conn: Any = self.redis
            if is_cluster(self.redis):
                rc: Any = self.redis
                conn = rc.get_redis_connection(rc.get_node_from_key(group[0].keys[0]))
            for attempt in range(2):
                pipe = conn.pipeline(transaction=False)
                for c in group:  # the retry after NOSCRIPT sends the scripts' text
                    pipe.execute_command(*(evalsha_args(c) if attempt == 0 else eval_args(c)))
                pipe.execute_command(*durable.wait_command)
                res = list(pipe.execute(raise_on_error=False))
                if attempt == 0 and any(isinstance(r, NoScriptError) for r in res):
                    continue
                break
            out.append(durable_replies(res))
        return out

    def _run_registering(self, call: Call[T], queue: str) -> T:
        pipe = self.redis.pipeline(transaction=False)
        pipe.sadd(QUEUES, queue)
        queue_call(pipe, call)
        _, raw = pipe.execute(raise_on_error=False)
        if isinstance(raw, NoScriptError):
            raw = self.redis.eval(call.script.text, len(call.keys), *call.keys, *call.args)
        elif isinstance(raw, Exception):
            raise raw
        return call.parse(raw)

    def run_many(self, calls: Sequence[Call[T]]) -> list[T | Exception]:
        """Run Calls in one pipeline (not a transaction); each result is the parsed reply or the exception."""
        raws = self._pipeline(calls)
        missing = [i for i, r in enumerate(raws) if isinstance(r, NoScriptError)]
        if missing:
            again = self._pipeline([calls[i] for i in missing], text=True)
            for i, r in zip(missing, again, strict=True):
                raws[i] = r
        return parse_all(calls, raws)

    def _pipeline(self, calls: Sequence[Call[Any]], *, text: bool = False) -> list[Any]:
        """The calls in one round trip: EVALSHA, or (text) EVAL of the scripts' text, the retry after NOSCRIPT."""
        if self._pool is not None:
            return self.send([as_eval(pack(c), c.script) if text else pack(c) for c in calls])
        pipe = self.redis.pipeline(transaction=False)
        for c in calls:
            (queue_eval if text else queue_call)(pipe, c)
        return list(pipe.execute(raise_on_error=False))
