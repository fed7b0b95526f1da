"""The local groups' commands (asynqpy.rdb.topology_io.NodeDoor) against real nodes: the replies asynqpy.topology
reads, and Redis trouble coming out as asynqpy's errors (a node down, a command refused), never redis-py's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from asynqpy.embedded import free_port
from asynqpy.errors import RedisCommandError, RedisUnavailableError
from asynqpy.rdb.topology_io import NodeDoor
from asynqpy.topology import LocalCluster, LocalSentinel

CALLS: dict[str, Callable[[NodeDoor], Any]] = {
    "cluster_info": NodeDoor.cluster_info,
    "cluster_nodes": NodeDoor.cluster_nodes,
    "replication": NodeDoor.replication,
    "flushall": NodeDoor.flushall,
    "kill_replica_links": NodeDoor.kill_replica_links,
    "sentinel_master": lambda d: d.sentinel_master("mymaster"),
    "sentinel_primary": lambda d: d.sentinel_primary("mymaster"),
    "sentinel_failover": lambda d: d.sentinel_failover("mymaster"),
    "sentinel_info_period": lambda d: d.sentinel_info_period(1000),
}


def _assert_unreachable(exc: BaseException, addr: str) -> None:
    assert isinstance(exc, RedisUnavailableError)
    assert not isinstance(exc, redis.RedisError)
    assert exc.kind == "connection"
    assert exc.url == f"redis://{addr}/0"
    assert str(exc).startswith(f"cannot reach Redis at redis://{addr}/0")
    assert isinstance(exc.__cause__, redis.ConnectionError)  # what redis-py said, kept as the cause


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_node_that_cannot_be_reached_is_asynqpys_unavailable_error(name: str) -> None:
    port = free_port()  # nothing listens there
    with NodeDoor("127.0.0.1", port, timeout=1) as node, pytest.raises(RedisUnavailableError) as info:
        CALLS[name](node)
    _assert_unreachable(info.value, f"127.0.0.1:{port}")


@pytest.fixture
def stopped_group() -> Iterator[tuple[LocalCluster, str]]:
    """A cluster object whose one node was started, then stopped (its port answers no more)."""
    group = LocalCluster(primaries=1)
    try:
        node = group._node("node0", [])
        node.wait()
        node.stop()
        yield group, node.addr
    finally:
        group.stop()


def test_a_cluster_whose_node_is_down_raises_asynqpys_error(stopped_group: tuple[LocalCluster, str]) -> None:
    cluster, addr = stopped_group
    with pytest.raises(RedisUnavailableError) as info:
        cluster.primaries()
    _assert_unreachable(info.value, addr)
    with pytest.raises(RedisUnavailableError) as info:
        cluster.flushall()
    _assert_unreachable(info.value, addr)


def test_a_sentinel_group_whose_sentinel_is_down_raises_asynqpys_error(
        stopped_group: tuple[LocalCluster, str]) -> None:
    cluster, addr = stopped_group
    sentinel = LocalSentinel()
    try:
        sentinel.sentinels = list(cluster.nodes)
        for call in (sentinel.primary_addr, sentinel.failover, sentinel.flushall):
            with pytest.raises(RedisUnavailableError) as info:
                call()
            _assert_unreachable(info.value, addr)
    finally:
        sentinel.stop()


def test_a_command_the_node_refuses_is_asynqpys_command_error() -> None:
    """A plain server (no cluster, no Sentinel) answers CLUSTER and SENTINEL with error replies: RedisCommandError
    naming it; what it does answer comes in redis-py's forms."""
    group = LocalCluster(primaries=1)
    try:
        node = group._node("plain", [])
        node.wait()
        with node.door() as d:
            for name in ("cluster_info", "cluster_nodes", "sentinel_master", "sentinel_primary"):
                with pytest.raises(RedisCommandError) as info:
                    CALLS[name](d)
                assert not isinstance(info.value, redis.RedisError)
                assert info.value.url == f"redis://{node.addr}/0"
            assert d.replication()["role"] == "master"
            assert d.kill_replica_links() == 0
            d.flushall()
    finally:
        group.stop()


def test_a_cluster_node_answers_its_state_and_members(redis_cluster: LocalCluster) -> None:
    with redis_cluster.nodes[0].door() as d:
        assert "cluster_state:ok" in d.cluster_info().splitlines()[0]
        lines = d.cluster_nodes().splitlines()
    assert len(lines) == len(redis_cluster.nodes)
    primaries = redis_cluster.primaries()  # topology's reading of those lines
    assert len(primaries) == redis_cluster.n_primaries
    assert set(primaries) <= {n.addr for n in redis_cluster.nodes}


def test_a_sentinel_names_the_primary_and_none_for_a_service_it_does_not_watch(
        redis_sentinel: LocalSentinel) -> None:
    with redis_sentinel.sentinels[0].door() as d:
        assert d.sentinel_primary(redis_sentinel.service) == redis_sentinel.primary_addr()
        assert d.sentinel_primary("no-such-service") is None
        master = d.sentinel_master(redis_sentinel.service)
    assert (master["ip"], int(master["port"])) == redis_sentinel.primary_addr()
    other = LocalSentinel(service="no-such-service")
    try:
        other.sentinels = list(redis_sentinel.sentinels)
        with pytest.raises(RuntimeError, match="does not monitor 'no-such-service'"):
            other.primary_addr()
    finally:
        other.sentinels = []  # they belong to the session's group: not stopped here
        other.stop()
