"""The dashboard's server-side state in Redis: login sessions and failed-login counters, shared by every app process.

Sessions live in asynqpy:{web}:session:<id> (a hash: user, created, seen) with the idle timeout as TTL, so
logging out (deleting the key) ends the session everywhere and a copied cookie stops working. Failed logins
are counted per account and per address in asynqpy:{web}:throttle:<kind>:<key>, each in a window that starts
with its first failure. webui reaches both through these classes; it never imports redis.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from asynqpy.rdb.scripts import Call, SyncRunner
from inspector.audit import redis_errors
from inspector.scripts import script

SESSION_PREFIX = "asynqpy:{web}:session:"
USER_SESSIONS_PREFIX = "asynqpy:{web}:user-sessions:"
THROTTLE_PREFIX = "asynqpy:{web}:throttle:"


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
    return SESSION_PREFIX + hashlib.sha256(sid.encode()).hexdigest()


class SessionStore:
    """Creates, looks up and ends login sessions.

    idle: seconds without a request before a session ends; absolute: seconds after login it ends anyway.
    Every method raises RedisUnavailableError when Redis cannot be reached.
    """

    def __init__(self, connection: redis.Redis, *, idle: float = 3600, absolute: float = 12 * 3600,
                 clock: Callable[[], float] = time.time) -> None:
        self.redis: Any = connection  # binary replies; redis-py types them loosely
        self.idle = idle
        self.absolute = absolute
        self.clock = clock

    def create(self, user: str, stamp: str = "", *, role: str = "", via: str = "") -> WebSession:
        """A new session for user with a fresh random id (the cookie carries it); stamp, role, via: see
        WebSession."""
        now = self.clock()
        sid = secrets.token_urlsafe(32)
        with redis_errors():
            pipe = self.redis.pipeline(transaction=True)
            pipe.hset(_key(sid), mapping={"user": user, "created": repr(now), "seen": repr(now), "stamp": stamp,
                                          "role": role, "via": via})
            pipe.expire(_key(sid), self._ttl(now, now))
            pipe.sadd(USER_SESSIONS_PREFIX + user, _key(sid))
            pipe.expire(USER_SESSIONS_PREFIX + user, int(self.absolute) + 60)
            pipe.execute()
        return WebSession(sid, user, now, now, stamp, role, via)

    def get(self, sid: str, *, touch: bool = True) -> WebSession | None:
        """The live session with this id, or None (unknown, logged out, idle or past its absolute timeout).

        touch: count this as activity (extends the idle timeout; written at most once every few seconds).
        """
        if not sid or not isinstance(sid, str):
            return None
        key = _key(sid)
        with redis_errors():
            user, created, seen, stamp, role, via = self.redis.hmget(key, "user", "created", "seen", "stamp", "role",
                                                                     "via")
            if user is None or created is None:
                return None
            now = self.clock()
            c, s = float(created), float(seen or created)
            if now - c >= self.absolute or now - s >= self.idle:
                self.redis.delete(key)
                return None
            if touch and now - s >= min(5.0, self.idle / 10):
                pipe = self.redis.pipeline(transaction=True)
                pipe.hset(key, "seen", repr(now))
                pipe.expire(key, self._ttl(c, now))
                pipe.execute()
                s = now
        return WebSession(sid, user.decode(), c, s, (stamp or b"").decode(), (role or b"").decode(),
                          (via or b"").decode())

    def end(self, sid: str) -> bool:
        """End one session (logout). True when it was live."""
        if not sid:
            return False
        with redis_errors():
            user = self.redis.hget(_key(sid), "user")
            n = self.redis.delete(_key(sid))
            if user is not None:
                self.redis.srem(USER_SESSIONS_PREFIX + user.decode(), _key(sid))
        return bool(n)

    def end_user(self, user: str) -> int:
        """End every session of user (after a password change or removal). Returns how many were live."""
        with redis_errors():
            keys = list(self.redis.smembers(USER_SESSIONS_PREFIX + user))
            n = int(self.redis.delete(*keys)) if keys else 0
            self.redis.delete(USER_SESSIONS_PREFIX + user)
        return n

    def _ttl(self, created: float, now: float) -> int:
        return max(1, int(min(self.idle, self.absolute - (now - created))) + 1)


@dataclass(frozen=True)
class ThrottleState:
    """Whether logins for this account/address are refused, and for how many more seconds."""

    blocked: bool
    retry_after: int


class LoginThrottle:
    """Counts failed logins per account and per address; past a limit in the window, logins are refused
    until the window ends. A successful login clears the account's counter (not the address's).

    Raises RedisUnavailableError when Redis cannot be reached.
    """

    def __init__(self, connection: redis.Redis, *, per_user: int = 5, per_addr: int = 20,
                 window: int = 900) -> None:
        self.redis: Any = connection  # binary replies; redis-py types them loosely
        self.runner = SyncRunner(connection)
        self.per_user = per_user
        self.per_addr = per_addr
        self.window = int(window)

    def _keys(self, user: str, addr: str) -> tuple[str, str]:
        return (THROTTLE_PREFIX + "user:" + user.lower()[:200], THROTTLE_PREFIX + "addr:" + addr)

    def check(self, user: str, addr: str) -> ThrottleState:
        """Whether a login attempt for user from addr must be refused now (checked before the password)."""
        ku, ka = self._keys(user, addr)
        with redis_errors():
            pipe = self.redis.pipeline(transaction=False)
            pipe.get(ku)
            pipe.ttl(ku)
            pipe.get(ka)
            pipe.ttl(ka)
            nu, tu, na, ta = pipe.execute()
        waits = []
        if nu is not None and int(nu) >= self.per_user:
            waits.append(max(int(tu), 1))
        if na is not None and int(na) >= self.per_addr:
            waits.append(max(int(ta), 1))
        return ThrottleState(bool(waits), max(waits, default=0))

    def failed(self, user: str, addr: str) -> ThrottleState:
        """Count one failed login (one atomic script for both counters); says whether the next is refused."""
        with redis_errors():
            reply: list[Any] = self.runner.run(Call(script("login_failed"), self._keys(user, addr), (self.window,),
                                                    list))
        (nu, tu), (na, ta) = reply
        waits = [int(t) for n, t, limit in ((nu, tu, self.per_user), (na, ta, self.per_addr)) if int(n) >= limit]
        return ThrottleState(bool(waits), max(waits, default=0))

    def succeeded(self, user: str) -> None:
        """Forget the account's failures (the address's stay counted)."""
        with redis_errors():
            self.redis.delete(self._keys(user, "")[0])
