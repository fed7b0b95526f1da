"""The dashboard's server-side state in Redis: login sessions, shared by every app process.

Sessions live in asynqpy:{web}:session:<id> (a hash: user, created, seen) with the idle timeout as TTL, so
logging out (deleting the key) ends the session everywhere and a copied cookie stops working. (Failed logins:
inspector.throttle.) webui reaches them through this class; it never imports redis.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from inspector.audit import redis_errors

SESSION_PREFIX = "asynqpy:{web}:session:"
USER_SESSIONS_PREFIX = "asynqpy:{web}:user-sessions:"


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
