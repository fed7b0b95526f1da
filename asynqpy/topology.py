"""Local multi-node setups on loopback from the same server binary as the embedded one: a Redis Cluster
(primaries, optional replicas) and a Sentinel group (a primary, replicas, Sentinels). For tests, benchmarks
and trying things out; each node gets its own directory, removed on stop.

What the nodes are asked goes through asynqpy.rdb.topology_io (NodeDoor): a node that cannot be reached, or that
refuses a command, raises asynqpy's RedisUnavailableError (its kind's subclass) or RedisCommandError, never a
redis-py exception; a group that does not settle in time raises RuntimeError."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

from asynqpy.embedded import _answers_ping, port_is_free, server_binary, stop_process
from asynqpy.rdb.topology_io import NodeDoor

NODE_TIMEOUT_MS = 2000  # cluster-node-timeout: how soon a cluster notices a dead node


def cli_binary(server: str) -> str:
    """valkey-cli beside the server binary, else redis-cli on PATH. Raises FileNotFoundError."""
    beside = Path(server).with_name("valkey-cli")
    if beside.exists():
        return str(beside)
    found = shutil.which("valkey-cli") or shutil.which("redis-cli")
    if not found:
        raise FileNotFoundError("neither valkey-cli nor redis-cli found (needed to create a cluster)")
    return found


def _ephemeral_low() -> int:
    """The first port the OS may give an outgoing connection (Linux's ip_local_port_range; 32768 elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def cluster_port(host: str = "127.0.0.1") -> int:
    """A free port whose cluster bus port (port + 10000) is free too: both below the ephemeral range, so that no
    outgoing connection of another process takes one between this check and the server's bind."""
    top = max(20100, min(30000, _ephemeral_low() - 10000))  # (32768: ports 20000-22767, bus ports below 32768)
    for _ in range(200):
        port = random.randrange(20000, top)
        if port_is_free(port, host) and port_is_free(port + 10000, host):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def _online_replicas(info: dict[str, object]) -> int:
    """Replicas past their initial sync (state=online) in an INFO replication reply."""
    return sum(1 for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)
               and v.get("state") == "online")


class _Node:
    """One server process on 127.0.0.1 with its own directory (and config file, which Sentinel needs)."""

    def __init__(self, binary: str, root: Path, name: str, args: list[str], *, sentinel: bool = False,
                 config: str = "") -> None:
        self.host = "127.0.0.1"
        self.port = cluster_port(self.host)
        self.dir = root / name
        self.dir.mkdir(parents=True)
        conf = self.dir / "node.conf"
        conf.write_text(config.replace("$PORT", str(self.port)))
        cmd = [binary, str(conf), "--port", str(self.port), "--bind", self.host, "--dir", str(self.dir),
               "--save", "", "--appendonly", "no", "--loglevel", "warning", *args]
        if sentinel:
            cmd.append("--sentinel")
        self.cmd = cmd
        self.proc = self._spawn(cmd)

    def _spawn(self, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.dir / "server.log", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        return proc

    def restart_as_replica_of(self, host: str, port: int) -> None:
        """Start the (stopped) server again, same port and directory, replicating host:port."""
        cmd = list(self.cmd)
        if "--replicaof" in cmd:
            i = cmd.index("--replicaof")
            del cmd[i:i + 3]
        self.cmd = [*cmd, "--replicaof", host, str(port)]
        self.proc = self._spawn(self.cmd)
        self.wait()

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    def wait(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited at start; see {self.dir / 'server.log'}")
            if _answers_ping(self.host, self.port):
                return
            time.sleep(0.02)
        raise RuntimeError(f"server on {self.addr} did not answer within {timeout}s")

    def door(self, timeout: float = 5.0) -> NodeDoor:
        """This node's commands (asynqpy.rdb.topology_io), on a client of its own: use it in a `with` block."""
        return NodeDoor(self.host, self.port, timeout=timeout)

    def stop(self) -> None:
        stop_process(self.proc)


class _Group:
    def __init__(self, binary: str | None) -> None:
        self.binary = binary or server_binary()
        self.root = Path(tempfile.mkdtemp(prefix=f"asynqpy-{type(self).__name__.lower()}-"))
        self.nodes: list[_Node] = []

    def _node(self, name: str, args: list[str], **kw: object) -> _Node:
        n = _Node(self.binary, self.root, name, args, **kw)  # type: ignore[arg-type]
        self.nodes.append(n)
        return n

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
        self.nodes.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Self:  # pragma: no cover - overridden
        raise NotImplementedError


class LocalCluster(_Group):
    """A Redis Cluster of `primaries` primaries (each with `replicas` replicas) on loopback.

    url: redis+cluster://h:p1,h:p2,.../ ; primary_urls: a plain redis:// URL per primary.
    """

    def __init__(self, primaries: int = 3, replicas: int = 0, *, binary: str | None = None) -> None:
        super().__init__(binary)
        self.n_primaries = primaries
        self.n_replicas = replicas

    def start(self, timeout: float = 30.0) -> Self:
        args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--appendonly", "no"]
        try:
            for i in range(self.n_primaries * (1 + self.n_replicas)):
                self._node(f"node{i}", args)
            for n in self.nodes:
                n.wait()
            cmd = [cli_binary(self.binary), "--cluster", "create", *(n.addr for n in self.nodes),
                   "--cluster-replicas", str(self.n_replicas), "--cluster-yes"]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            if out.returncode != 0:
                raise RuntimeError(f"cluster create failed: {out.stdout[-800:]} {out.stderr[-800:]}")
            self._wait_ok(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ok(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = []
            for n in self.nodes:
                with n.door() as d:
                    states.append("cluster_state:ok" in d.cluster_info())
            if all(states):
                return
            time.sleep(0.05)
        raise RuntimeError("cluster did not reach cluster_state:ok")

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(n.addr for n in self.nodes[:self.n_primaries]) + "/"

    def primaries(self) -> list[str]:
        """host:port of the current primaries."""
        with self.nodes[0].door() as d:
            raw = d.cluster_nodes()
        out = []
        for line in raw.splitlines():
            parts = line.split()
            if "master" in parts[2].split(","):
                out.append(parts[1].split("@")[0])
        return sorted(out)

    def flushall(self) -> None:
        for addr in self.primaries():
            host, _, port = addr.rpartition(":")
            with NodeDoor(host, int(port)) as d:
                d.flushall()


class LocalSentinel(_Group):
    """One primary, `replicas` replicas and `sentinels` Sentinels watching service `service`.

    url: redis+sentinel://h:s1,h:s2,h:s3/<service>/0 ; failover() forces SENTINEL FAILOVER and waits for it.
    """

    def __init__(self, replicas: int = 1, sentinels: int = 3, *, service: str = "mymaster",
                 binary: str | None = None, down_after_ms: int = 1000) -> None:
        super().__init__(binary)
        self.n_replicas = replicas
        self.n_sentinels = sentinels
        self.service = service
        self.down_after_ms = down_after_ms
        self.data: list[_Node] = []
        self.sentinels: list[_Node] = []

    def start(self, timeout: float = 30.0) -> Self:
        try:
            fast_sync = ["--repl-diskless-sync-delay", "0"]  # no 5 s pause before a replica's full sync
            primary = self._node("primary", fast_sync)
            primary.wait()
            self.data.append(primary)
            for i in range(self.n_replicas):
                r = self._node(f"replica{i}", ["--replicaof", primary.host, str(primary.port), *fast_sync])
                self.data.append(r)
            conf = (f"sentinel monitor {self.service} {primary.host} {primary.port} 2\n"
                    f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}\n"
                    f"sentinel failover-timeout {self.service} 10000\n"
                    f"sentinel parallel-syncs {self.service} 1\n")
            for i in range(self.n_sentinels):
                self.sentinels.append(self._node(f"sentinel{i}", [], sentinel=True, config=conf))
            for n in self.nodes:
                n.wait()
            for sn in self.sentinels:  # look at nodes every second, not every 10 s: failovers settle faster
                with sn.door() as d:
                    d.sentinel_info_period(1000)
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        """Replicas in sync and every Sentinel seeing every replica and the other Sentinels."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ok = True
            for s in self.sentinels:
                with s.door() as d:
                    m = d.sentinel_master(self.service)
                    if int(m.get("num-slaves", 0)) < self.n_replicas or \
                            int(m.get("num-other-sentinels", 0)) < self.n_sentinels - 1:
                        ok = False
            with self.data[0].door() as d:
                if _online_replicas(d.replication()) < self.n_replicas:
                    ok = False
            if ok:
                return
            time.sleep(0.1)
        raise RuntimeError("Sentinel group did not become ready")

    @property
    def url(self) -> str:
        return f"redis+sentinel://{','.join(s.addr for s in self.sentinels)}/{self.service}/0"

    def primary_addr(self) -> tuple[str, int]:
        """(host, port) of the primary the first Sentinel names. Raises RuntimeError when it does not monitor the
        service, asynqpy's RedisUnavailableError when it cannot be reached."""
        with self.sentinels[0].door() as d:
            return self._named(d)

    def _named(self, sentinel: NodeDoor) -> tuple[str, int]:
        addr = sentinel.sentinel_primary(self.service)
        if addr is None:
            raise RuntimeError(f"the Sentinel at {sentinel.url} does not monitor {self.service!r}")
        return addr

    def _named_primaries(self) -> set[tuple[str, int]]:
        """The primary each Sentinel names now (one address once they agree)."""
        addrs = set()
        for s in self.sentinels:
            with s.door() as d:
                addrs.add(self._named(d))
        return addrs

    def failover(self, timeout: float = 20.0) -> tuple[str, int]:
        """SENTINEL FAILOVER, then wait until every Sentinel names the new primary and it accepts writes."""
        old = self.primary_addr()
        with self.sentinels[0].door() as d:
            d.sentinel_failover(self.service)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            addrs = self._named_primaries()
            if len(addrs) == 1 and old not in addrs:
                new = addrs.pop()
                with NodeDoor(*new, timeout=2) as d:
                    if d.replication().get("role") == "master":
                        return new
            time.sleep(0.05)
        raise RuntimeError("failover did not complete")

    def crash_primary(self, lag: float = 0.5, timeout: float = 30.0) -> tuple[str, int]:
        """A primary crash that loses writes: the replica is frozen (SIGSTOP) and its link cut, for `lag` seconds
        the primary keeps taking writes it cannot replicate, then it is killed (SIGKILL) and the replica thawed.
        Waits until the Sentinels have promoted it, restarts the old primary as its replica; returns the new
        primary's address. Needs exactly one replica."""
        old = self.primary_addr()
        primary = next(n for n in self.data if (n.host, n.port) == old)
        replica = next(n for n in self.data if n is not primary)
        os.kill(replica.proc.pid, signal.SIGSTOP)
        try:
            with primary.door() as d:  # cut the link: what the primary takes from now on stays there
                d.kill_replica_links()
            time.sleep(lag)
            primary.proc.kill()
            primary.proc.wait(5)
        finally:
            os.kill(replica.proc.pid, signal.SIGCONT)
        new = (replica.host, replica.port)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._named_primaries() == {new}:
                with replica.door() as d:
                    if d.replication().get("role") == "master":
                        primary.restart_as_replica_of(*new)
                        return new
            time.sleep(0.05)
        raise RuntimeError("Sentinel did not promote the replica after the primary crashed")

    def wait_replicas_synced(self, timeout: float = 20.0) -> None:
        """Until the current primary has all its replicas connected again (after a failover)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with NodeDoor(*self.primary_addr(), timeout=2) as d:
                info = d.replication()
                if info.get("role") == "master" and _online_replicas(info) >= self.n_replicas:
                    return
            time.sleep(0.1)
        raise RuntimeError("replicas did not reconnect after the failover")

    def flushall(self) -> None:
        with NodeDoor(*self.primary_addr()) as d:
            d.flushall()
