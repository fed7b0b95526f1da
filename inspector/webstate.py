"""The dashboard's server-side state in Redis: login sessions, shared by every app process.

Sessions live in asynqpy:{web}:session:<digest of the id> (a hash: user, created, seen) with the idle timeout as
TTL, so logging out (deleting the key) ends the session everywhere and a copied cookie stops working. (Failed
logins: inspector.throttle.) webui reaches them through this class; it never imports redis. Every command goes
through the door of asynqpy.rdb.syncdoor, and every change of more than one key is one script.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import redis

from asynqpy.errors import RedisUnavailableError
from asynqpy.rdb import keys
from asynqpy.rdb.failures import refuses_writes
from asynqpy.rdb.scripts import Call
from asynqpy.rdb.syncdoor import SyncDoor
from inspector.scripts import script


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
    """Creates, looks up and ends login sessions.

    connection: a binary redis-py client, or the door (asynqpy.rdb.syncdoor) of one. idle: seconds without a
    request before a session ends; absolute: seconds after login it ends anyway.
    Every method raises RedisUnavailableError (the subclass of its kind) for Redis trouble that passes, and
    RedisCommandError for a command Redis refused, as every Redis call through the door does.
    """

    def __init__(self, connection: redis.Redis | SyncDoor, *, idle: float = 3600, absolute: float = 12 * 3600,
                 clock: Callable[[], float] = time.time) -> None:
        self.door = SyncDoor.of(connection)
        self.idle = idle
        self.absolute = absolute
        self.clock = clock

    def create(self, user: str, stamp: str = "", *, role: str = "", via: str = "") -> WebSession:
        """A new session for user with a fresh random id (the cookie carries it); stamp, role, via: see
        WebSession."""
        now = self.clock()
        sid = secrets.token_urlsafe(32)
        self.door.run(Call(script("session_create"), [_key(sid), keys.web_user_sessions(user)],
                           [user, repr(now), stamp, role, via, self._ttl(now, now), int(self.absolute) + 60], int))
        return WebSession(sid, user, now, now, stamp, role, via)

    def get(self, sid: str, *, touch: bool = True) -> WebSession | None:
        """The live session with this id, or None (unknown, logged out, idle or past its absolute timeout).

        touch: count this as activity (extends the idle timeout; written at most once every few seconds).
        """
        if not sid or not isinstance(sid, str):
            return None
        key = _key(sid)
        user, created, seen, stamp, role, via = self.door.command("HMGET", key, "user", "created", "seen", "stamp",
                                                                  "role", "via")
        if user is None or created is None:
            return None
        now = self.clock()
        c, s = float(created), float(seen or created)
        if now - c >= self.absolute or now - s >= self.idle:
            with _unless_writes_refused():  # else its expiry ends it
                self.door.command("DEL", key)
            return None
        if touch and now - s >= min(5.0, self.idle / 10):
            with _unless_writes_refused():  # while Redis refuses writes the session goes on, not extended
                if not self.door.run(Call(script("session_touch"), [key], [repr(now), self._ttl(c, now)], int)):
                    return None  # ended (logged out) since it was read
                s = now
        return WebSession(sid, user.decode(), c, s, (stamp or b"").decode(), (role or b"").decode(),
                          (via or b"").decode())

    def end(self, sid: str) -> bool:
        """End one session (logout). True when it was live."""
        if not sid:
            return False
        key = _key(sid)
        user = self.door.command("HGET", key, "user")
        if user is None:
            return bool(self.door.command("DEL", key))
        return bool(self.door.run(Call(script("session_end"), [key, keys.web_user_sessions(user.decode())], [],
                                       int)))

    def end_user(self, user: str) -> int:
        """End every session of user (after a password change or removal). Returns how many were live."""
        listed = keys.web_user_sessions(user)
        sessions = list(self.door.command("SMEMBERS", listed))
        n = int(self.door.command("DEL", *sessions)) if sessions else 0  # one slot ({web}), also on a cluster
        self.door.command("DEL", listed)
        return n

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
