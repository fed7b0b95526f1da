"""The state one running worker server shares among its loops: identity, connections, active tasks."""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from dataclasses import dataclass, field

from asynqpy.config import ServerConfig
from asynqpy.connection import aconnect, connect
from asynqpy.rdb import keys, state
from asynqpy.rdb.async_runner import AsyncRunner
from asynqpy.rdb.failures import reaching
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.task import ReceivedTask
from asynqpy.wire import TaskMessage


@dataclass
class ActiveTask:
    """A task this server has dequeued and not yet handed back to Redis."""

    queue: str
    msg: TaskMessage
    received: ReceivedTask
    started: float
    deadline: float
    lease_expiry: float
    handle: asyncio.Task[None] | None = None
    stop_reason: str = ""  # why we cancelled it: "canceled", "lease", "shutdown", "deadline"
    wait: float | None = None  # seconds from pending_since to start (None: unknown)
    limit: str | None = None  # the flow-control limit it waited on before it started (None: it did not wait)
    ended: float = 0.0  # when the handler returned or raised


@dataclass
class Runtime:
    """Identity and shared resources of one server process."""

    config: ServerConfig
    redis_url: str
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    server_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=time.time)
    status: str = "new"
    active: dict[str, ActiveTask] = field(default_factory=dict)
    # Redis's clock minus this machine's (s), measured at every heartbeat; None until the first one.
    clock_offset: float | None = None
    stuck: dict[str, float] = field(default_factory=dict)  # task id -> monotonic time a still-running handler lost it

    def __post_init__(self) -> None:
        self.aredis = aconnect(self.redis_url, health_check_interval=15)
        self.runner = AsyncRunner(self.aredis)
        # Result writes come from handler threads as well as the loop: a thread-safe sync pool.
        self.sredis = connect(self.redis_url)
        self.srunner = SyncRunner(self.sredis)

    def redis_now(self) -> float:
        """Redis's time estimated from this machine's clock and the measured offset (Unix s)."""
        return time.time() + (self.clock_offset or 0.0)

    @property
    def server_key(self) -> str:
        return keys.server_info(self.host, self.pid, self.server_id)

    @property
    def workers_key(self) -> str:
        return keys.workers(self.host, self.pid, self.server_id)

    @property
    def health_key(self) -> str:
        return keys.server_health(self.host, self.pid, self.server_id)

    def write_result(self, queue: str, task_id: str, data: bytes) -> None:
        """Store a handler's result in its task (called from handler threads as well as the loop).

        Raises RedisUnavailableError (the subclass of its kind) or RedisCommandError, never redis-py's errors.
        """
        with reaching(self.redis_url):
            self.srunner.run(state.write_result(queue, task_id, data))

    async def close(self) -> None:
        await self.aredis.aclose()
        self.sredis.close()
