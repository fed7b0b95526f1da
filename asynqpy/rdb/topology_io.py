"""The commands the local Redis Cluster and Sentinel groups (asynqpy.topology) send to one of their nodes by
address: cluster state and membership, replication, the Sentinels' view of a service and their failover, a flush.
asynqpy.topology decides what to ask and what the answers mean; this module only asks.

    with NodeDoor("127.0.0.1", 7000) as node:
        text = node.cluster_info()
"""

from __future__ import annotations

from typing import Any, Self

import redis
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry

from asynqpy.rdb.syncdoor import SyncDoor

# A dropped connection is made again at once (twice at most); a node that is down says so within a fraction of a
# second, not after redis-py's default ten tries (~4 s): asynqpy.topology's waits poll on their own.
_RETRY = (ExponentialWithJitterBackoff(base=0.01, cap=0.1), 2)


def _text(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class NodeDoor:
    """One node (a server or a Sentinel) at host:port on a client of its own, closed on leaving the `with` block.

    Every method raises RedisUnavailableError for transient trouble (kind "connection" when the node cannot be
    reached, the subclass of a reply code such as RedisBusyError) and RedisCommandError for any other error reply,
    naming redis://host:port (failures.translate, through SyncDoor); never a redis-py exception.
    """

    def __init__(self, host: str, port: int, *, timeout: float = 5.0) -> None:
        self.host = host
        self.port = port
        client = redis.Redis(host, port, socket_timeout=timeout, retry=Retry(*_RETRY))
        self.door = SyncDoor(client, f"redis://{host}:{port}/0")

    @property
    def url(self) -> str:
        return self.door.url

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.door.close()

    # A cluster node

    def cluster_info(self) -> str:
        """CLUSTER INFO's text ("cluster_state:ok\\r\\ncluster_slots_assigned:16384\\r\\n...")."""
        return _text(self.door.command("CLUSTER", "INFO"))  # "CLUSTER" alone: no reply callback, the raw text

    def cluster_nodes(self) -> str:
        """CLUSTER NODES's text: one line per node ("<id> <host:port@bus> <flags> <primary> ...")."""
        return _text(self.door.command("CLUSTER", "NODES"))

    # Any server

    def replication(self) -> dict[str, Any]:
        """INFO replication as a dict (role, connected_slaves, slave0: {ip, port, state, ...}, ...)."""
        return dict(self.door.command("INFO", "replication"))

    def flushall(self) -> None:
        """FLUSHALL: every database of this node emptied."""
        self.door.command("FLUSHALL")

    def kill_replica_links(self) -> int:
        """CLIENT KILL TYPE replica: this primary's links to its replicas cut; returns how many."""
        return int(self.door.command("CLIENT KILL", "TYPE", "replica"))

    # A Sentinel

    def sentinel_master(self, service: str) -> dict[str, Any]:
        """SENTINEL MASTER service: what this Sentinel knows of the service's primary (num-slaves,
        num-other-sentinels, flags, ...)."""
        return dict(self.door.command("SENTINEL MASTER", service))

    def sentinel_primary(self, service: str) -> tuple[str, int] | None:
        """SENTINEL GET-MASTER-ADDR-BY-NAME: (host, port) of the primary this Sentinel names, None when it does not
        monitor the service."""
        addr = self.door.command("SENTINEL GET-MASTER-ADDR-BY-NAME", service)
        if not addr:
            return None
        host, port = addr
        return _text(host), int(port)

    def sentinel_failover(self, service: str) -> None:
        """SENTINEL FAILOVER service: a failover started now, without the other Sentinels' agreement."""
        self.door.command("SENTINEL FAILOVER", service)

    def sentinel_info_period(self, ms: int) -> None:
        """SENTINEL DEBUG INFO-PERIOD: how often (ms) this Sentinel asks the servers it watches for INFO."""
        self.door.command("SENTINEL", "DEBUG", "INFO-PERIOD", str(ms))
