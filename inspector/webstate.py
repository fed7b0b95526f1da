"""The dashboard's server-side state in Redis: login sessions, shared by every app process.

Sessions live in asynqpy:{web}:session:<digest of the id> (a hash: user, created, seen) with the idle timeout as
TTL, so logging out (deleting the key) ends the session everywhere and a copied cookie stops working. (Failed
logins: inspector.throttle.) webui reaches them through this class; it never imports redis. Every command goes
through the door of asynqpy.rdb.syncdoor, and every change of more than one key is one script.

Each process keeps the sessions it has checked in memory, so a browser's polls cost Redis nothing for its session:
every end of a session (logout, a user's sessions ended) bumps one counter, the sessions epoch, and a process reads
it at most once per ``recheck`` seconds (1 s) and reads its sessions afresh when it moved. So a logout ends the
session in every process within about a second. The timeouts are judged from the kept record: the absolute one
exactly (it never moves); an idle one it shows is read again from Redis before refusing, since another process may
have seen activity since.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import redis

from asynqpy.errors import RedisUnavailableError
from asynqpy.rdb import keys
from asynqpy.rdb.failures import refuses_writes
from asynqpy.rdb.scripts import Call
from asynqpy.rdb.syncdoor import SyncDoor
from inspector.scripts import script

RECHECK = 1.0  # seconds between reads of the sessions epoch, per process: a logout takes at most this long
MAX_KEPT = 10_000  # sessions kept in memory per process (the least recently used are dropped): bounded memory
_UNREAD = object()


@dataclass(frozen=True)
class WebSession:
    """A live login session: its id, the user's name, when it began and was last used (Unix seconds), and the
    credential stamp it was made with (a session whose stamp no longer matches the user's is stale)."""

    id: str
    user: str
    created: float
    seen: float
    stamp: str = ""
    role: str = ""  # for a user signed in through an identity provider (via): the role it mapped to
    via: str = ""  # "" for a users-file login, "oidc" for OpenID Connect


def _key(sid: str) -> str:
    # The stored key is a hash of the id, so a read of Redis (e.g. a backup) does not hand out live cookies.
    return keys.web_session(hashlib.sha256(sid.encode()).hexdigest())


class SessionStore:
    """Creates, looks up and ends login sessions, keeping the ones it checked in memory (see the module docstring).

    connection: a binary redis-py client, or the door (asynqpy.rdb.syncdoor) of one. idle: seconds without a
    request before a session ends; absolute: seconds after login it ends anyway; recheck: seconds between reads
    of the sessions epoch (how long another process may still accept a session ended elsewhere).
    Every method raises RedisUnavailableError (the subclass of its kind) for Redis trouble that passes, and
    RedisCommandError for a command Redis refused, as every Redis call through the door does.
    Thread-safe.
    """

    def __init__(self, connection: redis.Redis | SyncDoor, *, idle: float = 3600, absolute: float = 12 * 3600,
                 clock: Callable[[], float] = time.time, recheck: float = RECHECK) -> None:
        self.door = SyncDoor.of(connection)
        self.idle = idle
        self.absolute = absolute
        self.clock = clock
        self.recheck = recheck
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, WebSession] = OrderedDict()  # by key
        self._epoch: object = _UNREAD  # the epoch key's value at the last read
        self._checked = float("-inf")  # when it was read (monotonic)
        self._generation = 0  # bumped whenever the kept sessions are dropped

    def create(self, user: str, stamp: str = "", *, role: str = "", via: str = "") -> WebSession:
        """A new session for user with a fresh random id (the cookie carries it); stamp, role, via: see
        WebSession."""
        generation = self._follow_epoch()
        now = self.clock()
        sid = secrets.token_urlsafe(32)
        key = _key(sid)
        self.door.run(Call(script("session_create"), [key, keys.web_user_sessions(user), keys.WEB_SESSIONS_EPOCH],
                           [user, repr(now), stamp, role, via, self._ttl(now, now), int(self.absolute) + 60,
                            secrets.randbelow(2**48)], int))
        made = WebSession(sid, user, now, now, stamp, role, via)
        self._keep(key, made, generation)
        return made

    def get(self, sid: str, *, touch: bool = True) -> WebSession | None:
        """The live session with this id, or None (unknown, logged out, idle or past its absolute timeout).

        touch: count this as activity (extends the idle timeout; written at most once every few seconds).
        A session this process kept costs no Redis command (but the epoch's read, once per recheck seconds).
        """
        if not sid or not isinstance(sid, str):
            return None
        generation = self._follow_epoch()
        key = _key(sid)
        now = self.clock()
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and now - kept.created < self.absolute and now - kept.seen < self.idle:
            return self._touched(key, kept, now, touch, generation)
        # Not kept, or idle by what this process saw (another may have seen activity since): ask Redis.
        found = self._read(key, sid)
        if found is None or now - found.created >= self.absolute or now - found.seen >= self.idle:
            self._forget(key)
            if found is not None:
                with _unless_writes_refused():  # else its expiry ends it
                    self.door.command("DEL", key)
            return None
        self._keep(key, found, generation)
        return self._touched(key, found, now, touch, generation)

    def end(self, sid: str) -> bool:
        """End one session (logout), in every process within recheck seconds. True when it was live."""
        if not sid:
            return False
        key = _key(sid)
        kept = self._forget(key)
        user = self.door.command("HGET", key, "user")
        name = user.decode() if user is not None else kept.user if kept is not None else ""
        return bool(self.door.run(Call(script("session_end"),
                                       [key, keys.web_user_sessions(name), keys.WEB_SESSIONS_EPOCH], [], int)))

    def end_user(self, user: str) -> int:
        """End every session of user (after a password change or removal). Returns how many were live."""
        with self._lock:
            for key in [k for k, s in self._kept.items() if s.user == user]:
                del self._kept[key]
        listed = keys.web_user_sessions(user)
        sessions = sorted(self.door.command("SMEMBERS", listed))
        return int(self.door.run(Call(script("session_end_user"), [keys.WEB_SESSIONS_EPOCH, listed, *sessions], [],
                                      int)))

    def _read(self, key: str, sid: str) -> WebSession | None:
        user, created, seen, stamp, role, via = self.door.command("HMGET", key, "user", "created", "seen", "stamp",
                                                                  "role", "via")
        if user is None or created is None:
            return None
        return WebSession(sid, user.decode(), float(created), float(seen or created), (stamp or b"").decode(),
                          (role or b"").decode(), (via or b"").decode())

    def _touched(self, key: str, ses: WebSession, now: float, touch: bool, generation: int) -> WebSession | None:
        """ses, its activity noted in Redis first when touch and the last note is a few seconds old."""
        if not touch or now - ses.seen < min(5.0, self.idle / 10):
            return ses
        with _unless_writes_refused():  # while Redis refuses writes the session goes on, not extended
            if not self.door.run(Call(script("session_touch"), [key], [repr(now), self._ttl(ses.created, now)],
                                      int)):
                self._forget(key)
                return None  # ended (logged out) since it was read
            ses = dataclasses.replace(ses, seen=now)
            self._keep(key, ses, generation)
        return ses

    def _follow_epoch(self) -> int:
        """Read the sessions epoch when the last read is recheck seconds old, and drop the kept sessions when it
        moved. Returns the generation of the kept sessions a caller may add to (see _keep)."""
        now = time.monotonic()
        with self._lock:
            if now - self._checked < self.recheck:
                return self._generation
            self._checked = now  # this thread reads it; the others go on with what is kept meanwhile
        try:
            epoch = self.door.command("GET", keys.WEB_SESSIONS_EPOCH)
        except BaseException:
            with self._lock:
                self._checked = float("-inf")  # the next request tries again
            raise
        with self._lock:
            if epoch != self._epoch:
                self._kept.clear()
                self._generation += 1
                self._epoch = epoch
            return self._generation

    def _keep(self, key: str, ses: WebSession, generation: int) -> None:
        """Keep ses unless the kept sessions were dropped since the caller read it (it may have ended since)."""
        with self._lock:
            if generation != self._generation:
                return
            self._kept[key] = ses
            self._kept.move_to_end(key)
            while len(self._kept) > MAX_KEPT:
                self._kept.popitem(last=False)

    def _forget(self, key: str) -> WebSession | None:
        with self._lock:
            return self._kept.pop(key, None)

    def _ttl(self, created: float, now: float) -> int:
        return max(1, int(min(self.idle, self.absolute - (now - created))) + 1)


@contextlib.contextmanager
def _unless_writes_refused() -> Iterator[None]:
    """Skip a write Redis refuses for now (OOM, READONLY) where reading on without it is right."""
    try:
        yield
    except RedisUnavailableError as exc:
        if not refuses_writes(exc):
            raise
