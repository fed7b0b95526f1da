"""Builds the redis-py client (sync or asyncio) for every URL form asynqpy accepts; nothing else parses URLs.

- ``redis://[user:pw@]host:port/db`` and ``rediss://...`` (TLS): one server (redis-py's own URL options apply).
- ``redis+cluster://[user:pw@]h1:p1,h2:p2/`` (``rediss+cluster://`` for TLS): Redis Cluster; any reachable
  node discovers the rest. ``connect(url, cluster=True)`` reads a plain ``redis://h:p`` as a cluster seed
  (the CLI's ``--cluster``).
- ``redis+sentinel://[user:pw@]h1:26379,h2:26379/mymaster/0``: the primary that the Sentinels name for the
  service ``mymaster``, database 0. The password in the URL is the data nodes'; the Sentinels' own password
  is the query option ``sentinel_password=`` (and ``sentinel_username=``). The client asks the Sentinels again
  after a failover, by itself.

Every bad URL raises InvalidArgumentError(argument="redis_url") saying what is wrong, before any connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self, cast
from urllib.parse import parse_qs, quote, unquote

import redis
import redis.asyncio as aredis
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import ClusterError, RedisClusterException
from redis.sentinel import Sentinel

from asynqpy.errors import InvalidArgumentError, RedisUnavailableError, mask_url

SINGLE_SCHEMES = ("redis", "rediss", "unix")
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
SCHEMES = SINGLE_SCHEMES + CLUSTER_SCHEMES + SENTINEL_SCHEMES

mask = mask_url  # one rule hides passwords in every message: asynqpy.errors.mask_url

# Options every client gets: sockets that notice a dead peer instead of hanging, and a retry on the
# network errors a failover or a node restart causes.
SOCKET_TIMEOUT = 10.0
CONNECT_TIMEOUT = 5.0

# connect() returns a RedisCluster for cluster URLs: it is typed as redis.Redis because asynqpy uses only the
# part of the API both share (single-slot commands, scripts, pipelines through execute_command).
SyncClient = redis.Redis
AsyncClient = aredis.Redis


@dataclass(frozen=True)
class RedisURL:
    """A parsed URL: kind is "single", "cluster" or "sentinel"."""

    kind: str
    url: str
    tls: bool = False
    hosts: tuple[tuple[str, int], ...] = ()
    username: str | None = None
    password: str | None = None
    db: int = 0
    service: str = ""
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    options: dict[str, str] = field(default_factory=dict)


def _bad(url: str, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"bad Redis URL {mask(url)!r}: {why}", argument="redis_url")


def _hosts(url: str, hostlist: str, default_port: int) -> tuple[tuple[str, int], ...]:
    out = []
    for item in hostlist.split(","):
        item = item.strip()
        if not item:
            raise _bad(url, "empty host in the host list")
        if item.startswith("["):  # [::1]:7000
            host, _, port = item[1:].partition("]")
            port = port.lstrip(":")
        else:
            host, _, port = item.rpartition(":") if ":" in item else (item, "", "")
        if not host:
            raise _bad(url, f"no host in {item!r}")
        try:
            p = int(port) if port else default_port
        except ValueError:
            raise _bad(url, f"port of {item!r} is not a number") from None
        if not 0 < p < 65536:
            raise _bad(url, f"port {p} of {item!r} is out of range")
        out.append((host, p))
    return tuple(out)


def _db(url: str, text: str) -> int:
    try:
        db = int(text)
    except ValueError:
        raise _bad(url, f"database {text!r} is not a number") from None
    if db < 0:
        raise _bad(url, f"database {db} is negative")
    return db


def parse(url: str, *, cluster: bool = False) -> RedisURL:
    """Check and split a URL. cluster=True reads redis://h:p (or h1:p1,h2:p2) as cluster seeds.

    Raises InvalidArgumentError naming what is wrong.
    """
    if not isinstance(url, str):
        raise InvalidArgumentError(f"redis_url must be a str, not {type(url).__name__}", argument="redis_url")
    if "://" not in url:
        raise _bad(url, f"expected a scheme: one of {', '.join(s + '://' for s in SCHEMES)}")
    scheme = url.split("://", 1)[0].lower()
    if scheme not in SCHEMES:
        raise _bad(url, f"unknown scheme {scheme!r}; expected one of {', '.join(SCHEMES)}")
    if cluster and scheme in ("redis", "rediss"):
        scheme = f"{scheme}+cluster"
        url = scheme + url[url.index("://"):]
    rest = url.split("://", 1)[1]
    netloc, _, tail = rest.partition("/")
    path, _, query = tail.partition("?")
    if "?" in netloc:
        netloc, _, query = netloc.partition("?")
    userinfo, at, hostlist = netloc.rpartition("@")
    username = password = None
    if at:
        u, sep, pw = userinfo.partition(":")
        username = unquote(u) or None
        password = unquote(pw) if sep else None
    opts = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    tls = scheme.startswith("rediss")
    if scheme in SINGLE_SCHEMES:
        try:
            cast(Any, redis.connection).parse_url(url)
        except ValueError as exc:
            raise _bad(url, str(exc)) from None
        database = unquote(path).strip("/")
        if scheme != "unix" and database and not database.isdecimal():  # (redis-py would silently use database 0)
            raise _bad(url, f"the database after the host must be a number, not {database[:40]!r}")
        return RedisURL("single", url, tls=tls)
    if not hostlist:
        raise _bad(url, "no host")
    if scheme in CLUSTER_SCHEMES:
        hosts = _hosts(url, hostlist, 6379)
        if path.strip("/") not in ("", "0"):
            raise _bad(url, "Redis Cluster has only database 0")
        return RedisURL("cluster", url, tls=tls, hosts=hosts, username=username, password=password, options=opts)
    hosts = _hosts(url, hostlist, 26379)
    segs = [s for s in path.split("/") if s]
    if not segs:
        raise _bad(url, "no service name: expected redis+sentinel://host:26379/<service>[/<db>]")
    if len(segs) > 2:
        raise _bad(url, "expected /<service>[/<db>] after the hosts")
    db = _db(url, segs[1]) if len(segs) == 2 else 0
    return RedisURL("sentinel", url, tls=tls, hosts=hosts, username=username, password=password, db=db,
                    service=unquote(segs[0]), sentinel_username=opts.pop("sentinel_username", None),
                    sentinel_password=opts.pop("sentinel_password", None), options=opts)


def cluster_url(url: str) -> str:
    """redis://h:p... as redis+cluster://h:p... (what --cluster does); other forms unchanged."""
    return parse(url, cluster=True).url


def _common(p: RedisURL, kw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"socket_timeout": SOCKET_TIMEOUT, "socket_connect_timeout": CONNECT_TIMEOUT}
    if p.username:
        out["username"] = p.username
    if p.password is not None:
        out["password"] = p.password
    if p.tls:
        out["ssl"] = True
    out.update(kw)
    return out


def connect(url: str, *, cluster: bool = False, **kwargs: Any) -> SyncClient:
    """A redis-py client for url (binary replies unless decode_responses=True is given).

    kwargs go to the client (e.g. health_check_interval). Raises InvalidArgumentError for a bad URL.
    """
    p = parse(url, cluster=cluster)
    if p.kind == "single":
        kw = {"socket_timeout": SOCKET_TIMEOUT, "socket_connect_timeout": CONNECT_TIMEOUT, **kwargs}
        return redis.Redis.from_url(p.url, **kw)
    if p.kind == "cluster":
        kw = _common(p, kwargs)
        try:  # the sync cluster client asks the seeds for the slot map at once
            rc = RedisCluster(startup_nodes=[_node(ClusterNode, h, port) for h, port in p.hosts], **kw)
        except RedisClusterException as exc:
            raise RedisUnavailableError(p.url, exc) from exc
        return cast(redis.Redis, rc)
    sentinel: Any = cast(Any, Sentinel)(list(p.hosts), sentinel_kwargs=_sentinel_kwargs(p),
                                        socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=CONNECT_TIMEOUT)
    return cast(redis.Redis, sentinel.master_for(p.service, redis_class=redis.Redis, db=p.db, **_common(p, kwargs)))


def aconnect(url: str, *, cluster: bool = False, **kwargs: Any) -> AsyncClient:
    """The asyncio twin of connect()."""
    p = parse(url, cluster=cluster)
    if p.kind == "single":
        kw = {"socket_timeout": SOCKET_TIMEOUT, "socket_connect_timeout": CONNECT_TIMEOUT, **kwargs}
        return aredis.Redis.from_url(p.url, **kw)
    if p.kind == "cluster":
        kw = _common(p, kwargs)
        kw.pop("health_check_interval", None)  # not an option of the asyncio cluster client
        nodes = [_node(AsyncClusterNode, h, port) for h, port in p.hosts]
        return cast(aredis.Redis, _AsyncCluster(startup_nodes=nodes, **kw))
    sentinel: Any = cast(Any, AsyncSentinel)(list(p.hosts), sentinel_kwargs=_sentinel_kwargs(p),
                                             socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=CONNECT_TIMEOUT)
    return cast(aredis.Redis,
                sentinel.master_for(p.service, redis_class=aredis.Redis, db=p.db, **_common(p, kwargs)))


def socket_timeout_of(client: Any) -> float:
    """The socket timeout of a (sync or asyncio) client's connections: the URL's socket_timeout= when it gives one
    (redis-py's URL options win over connect()'s defaults), else SOCKET_TIMEOUT; SOCKET_TIMEOUT too when timeouts
    are off (0 or None), for the bounds that count on one."""
    pool = getattr(client, "connection_pool", None)  # one server, a Sentinel's primary
    kwargs = getattr(pool, "connection_kwargs", None) or getattr(client, "connection_kwargs", None) or {}  # a cluster
    timeout = kwargs.get("socket_timeout")
    return float(timeout) if timeout else SOCKET_TIMEOUT


def _node(cls: Any, host: str, port: int) -> Any:
    """A (sync or asyncio) ClusterNode: redis-py leaves its constructor untyped."""
    return cls(host, port)


def cluster_unreachable(exc: BaseException) -> bool:
    """True when exc is redis-py's word that no node of a cluster answered (RedisClusterUnreachableError in
    redis-py 8, or a RedisClusterException saying "cannot be connected"): Redis down, as one server's
    ConnectionError, not a misuse of the cluster."""
    if not isinstance(exc, RedisClusterException) or isinstance(exc, ClusterError):
        return False
    return isinstance(exc, _UNREACHABLE) or "cannot be connected" in str(exc)


# redis-py 8's class, or () before it (nothing is an instance of that)
_UNREACHABLE: Any = getattr(redis.exceptions, "RedisClusterUnreachableError", ())


class _AsyncCluster(AsyncRedisCluster):
    """The asyncio cluster client, whose first command asks the seeds for the slot map: no seed reachable is a
    redis ConnectionError (as for one server), not a bare RedisClusterException, so callers see Redis down."""

    async def initialize(self, *args: Any, **kwargs: Any) -> Self:
        try:
            await super().initialize(*args, **kwargs)
            return self
        except RedisClusterException as exc:
            if not cluster_unreachable(exc):
                raise
            raise redis.ConnectionError(str(exc)) from exc


def _sentinel_kwargs(p: RedisURL) -> dict[str, Any]:
    kw: dict[str, Any] = {"socket_timeout": SOCKET_TIMEOUT, "socket_connect_timeout": CONNECT_TIMEOUT}
    if p.sentinel_username:
        kw["username"] = p.sentinel_username
    if p.sentinel_password is not None:
        kw["password"] = p.sentinel_password
    if p.tls:
        kw["ssl"] = True
    return kw


_CLUSTER_TYPES: dict[type, bool] = {}


def is_cluster(client: Any) -> bool:
    """True for a (sync or asyncio) Redis Cluster client. Known per client class: every fetch asks, and an
    isinstance() against redis-py's generic cluster classes goes through typing's slow __instancecheck__."""
    kind = type(client)
    found = _CLUSTER_TYPES.get(kind)
    if found is None:
        found = _CLUSTER_TYPES[kind] = issubclass(kind, (RedisCluster, AsyncRedisCluster))
    return found


def node_url(host: str, port: int, *, password: str | None = None, tls: bool = False) -> str:
    """redis://[:pw@]host:port/0: a URL for one node."""
    auth = f":{quote(password, safe='')}@" if password else ""
    return f"{'rediss' if tls else 'redis'}://{auth}{host}:{port}/0"
