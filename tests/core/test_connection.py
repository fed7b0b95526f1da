"""asynqpy.connection: every URL form parses to the right client; bad URLs are clear errors before any connection."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster
from redis.exceptions import ClusterDownError, RedisClusterException, TryAgainError

from asynqpy import AsyncClient, Client, ServeMux, Server, Task
from asynqpy.connection import SOCKET_TIMEOUT, aconnect, cluster_url, connect, mask, parse, socket_timeout_of
from asynqpy.embedded import free_port
from asynqpy.errors import InvalidArgumentError, RedisUnavailableError, mask_url
from asynqpy.rdb.failures import is_redis_error, kind_of, reaching
from inspector import Inspector


def test_single_server_forms() -> None:
    assert parse("redis://localhost:6379/2").kind == "single"
    assert parse("rediss://:pw@example.com:6380/0").tls
    assert parse("unix:///tmp/redis.sock").kind == "single"


def test_cluster_form_lists_seeds() -> None:
    p = parse("redis+cluster://u:s3cret@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002/")
    assert p.kind == "cluster" and p.hosts == (("10.0.0.1", 7000), ("10.0.0.2", 7001), ("::1", 7002))
    assert (p.username, p.password, p.tls) == ("u", "s3cret", False)
    assert parse("rediss+cluster://h:7000").tls
    assert parse("redis+cluster://h").hosts == (("h", 6379),)


def test_cluster_flag_reads_a_plain_url_as_seeds() -> None:
    assert parse("redis://h1:7000,h2:7001", cluster=True).hosts == (("h1", 7000), ("h2", 7001))
    assert cluster_url("redis://h:7000/") == "redis+cluster://h:7000/"


def test_sentinel_form_with_both_passwords() -> None:
    p = parse("redis+sentinel://:data%40pw@s1:26379,s2/mymaster/3?sentinel_password=sp")
    assert p.kind == "sentinel" and p.hosts == (("s1", 26379), ("s2", 26379))
    assert (p.service, p.db, p.password, p.sentinel_password) == ("mymaster", 3, "data@pw", "sp")
    assert parse("redis+sentinel://s1/mymaster").db == 0


@pytest.mark.parametrize(("url", "says"), [
    ("localhost:6379", "expected a scheme"),
    ("http://localhost", "unknown scheme 'http'"),
    ("redis+cluster:///", "no host"),
    ("redis+cluster://h:70000/", "out of range"),
    ("redis+cluster://h:abc/", "not a number"),
    ("redis+cluster://h1:7000,,h2:7001/", "empty host"),
    ("redis+cluster://h:7000/3", "only database 0"),
    ("redis+sentinel://s1:26379", "no service name"),
    ("redis+sentinel://s1:26379/mymaster/x", "database 'x'"),
    ("redis+sentinel://s1:26379/a/b/c", "expected /<service>"),
    ("redis://h:6379/abc", "must be a number, not 'abc'"),  # (redis-py would use database 0 without a word)
    ("redis://h:6379/-1", "must be a number"),
    ("redis://h:6379/\u00b2", "must be a number"),  # (str.isdigit() is true of it)
])
def test_bad_urls_are_clear_errors(url: str, says: str) -> None:
    with pytest.raises(InvalidArgumentError, match=says) as info:
        connect(url)
    assert info.value.argument == "redis_url"


def test_errors_and_mask_hide_passwords() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        connect("redis+sentinel://:topsecret@s1/?sentinel_password=alsosecret")
    assert "topsecret" not in str(info.value) and "alsosecret" not in str(info.value)
    assert mask("redis://user:pw@h:1/0") == "redis://user:***@h:1/0"
    with pytest.raises(InvalidArgumentError, match="must be a str"):
        connect(None)  # type: ignore[arg-type]


def test_the_socket_timeout_is_the_urls_when_it_gives_one() -> None:
    # (a shutdown's deadline counts on it: asynqpy/server.py)
    assert socket_timeout_of(aconnect("redis://127.0.0.1:1/0")) == SOCKET_TIMEOUT
    assert socket_timeout_of(aconnect("redis://127.0.0.1:1/0?socket_timeout=1.5")) == 1.5
    assert socket_timeout_of(connect("redis://127.0.0.1:1/0?socket_timeout=2")) == 2.0
    assert socket_timeout_of(aconnect("redis+sentinel://127.0.0.1:1/mymaster/0")) == SOCKET_TIMEOUT
    assert socket_timeout_of(aconnect("redis+cluster://127.0.0.1:1/")) == SOCKET_TIMEOUT  # (makes no connection)


def test_connect_single(redis_url: str) -> None:
    r = connect(redis_url)
    r.set("k", "v")
    assert r.get("k") == b"v"
    r.close()


def test_connect_cluster_sync_and_async(cluster_url: str) -> None:
    r = connect(cluster_url)
    assert isinstance(r, RedisCluster)
    for q in ("a", "b", "c", "d"):
        r.set(f"asynq:{{{q}}}:x", q)
    assert len({r.keyslot(f"asynq:{{{q}}}:x") for q in "abcd"}) == 4
    r.close()

    async def go() -> bytes | None:
        ar = aconnect(cluster_url)
        assert isinstance(ar, AsyncRedisCluster)
        try:
            return await ar.get("asynq:{c}:x")
        finally:
            await ar.aclose()

    assert asyncio.run(go()) == b"c"


def test_connect_sentinel_finds_the_primary(redis_sentinel) -> None:  # type: ignore[no-untyped-def]
    r = connect(redis_sentinel.url)
    r.set("sentinel:k", "v")
    assert r.get("sentinel:k") == b"v"
    assert r.info("replication")["role"] == "master"
    r.delete("sentinel:k")
    r.close()


def test_an_unreachable_cluster_is_redis_unavailable() -> None:
    """No seed answers: the same RedisUnavailableError as one server down, from the clients, the Inspector and the
    Server (whose asyncio cluster client meets it at its first command); the password stays masked."""
    port = free_port()
    url = f"redis+cluster://:s3cret@127.0.0.1:{port}/"
    for make in (Client, Inspector):
        with pytest.raises(RedisUnavailableError) as info:
            make(url)
        assert info.value.url == f"redis+cluster://:***@127.0.0.1:{port}/"
        assert "s3cret" not in str(info.value)

    async def enqueue() -> None:
        c = AsyncClient(url)
        try:
            await c.enqueue(Task("t", b""))
        finally:
            await c.close()

    with pytest.raises(RedisUnavailableError, match="cannot be connected"):
        asyncio.run(enqueue())
    with pytest.raises(RedisUnavailableError):
        Server(url).run(ServeMux())


def test_every_enqueue_on_an_unreachable_cluster_is_redis_unavailable() -> None:
    """redis-py's cluster client gives up on a retry with RedisClusterUnreachableError, which is no RedisError: each
    enqueue of one AsyncClient, the first (the client's first refresh) and those after it (met by that refresh's
    outcome), is asynqpy's error of one server down, password masked; so is the error itself through reaching()."""
    port = free_port()
    url = f"redis+cluster://:s3cret@127.0.0.1:{port}/"

    async def enqueue_six_times() -> list[BaseException]:
        c = AsyncClient(url)
        errors: list[BaseException] = []
        try:
            for _ in range(6):
                try:
                    await c.enqueue(Task("t", b""), queue="emails")
                except Exception as exc:
                    errors.append(exc)
        finally:
            await c.close()
        return errors

    errors = asyncio.run(enqueue_six_times())
    assert len(errors) == 6
    for exc in errors:
        assert type(exc) is RedisUnavailableError, repr(exc)
        assert exc.kind == "connection" and "s3cret" not in str(exc)
    outage = RedisClusterException("Redis Cluster cannot be connected. Please provide at least one reachable node")
    with pytest.raises(RedisUnavailableError) as info, reaching(url):
        raise outage
    assert info.value.kind == "connection" and info.value.__cause__ is outage
    assert is_redis_error(outage) and kind_of(RedisClusterException("slot 5 is not covered")) == "CLUSTERDOWN"


def test_cluster_down_and_try_again_count_as_unreachable() -> None:
    assert kind_of(ClusterDownError("down")) == "CLUSTERDOWN" and kind_of(TryAgainError("again")) == "TRYAGAIN"


def test_mask_url_hides_sentinel_passwords() -> None:
    masked = mask_url("redis+sentinel://u:pw@s1:26379,s2:26379/mymaster/0?sentinel_password=spw&ssl=1")
    assert masked == "redis+sentinel://u:***@s1:26379,s2:26379/mymaster/0?sentinel_password=***&ssl=1"
    assert mask is mask_url
    assert str(RedisUnavailableError("redis+sentinel://s1/m/0?sentinel_password=spw")).count("spw") == 0
