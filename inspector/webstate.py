"""The dashboard's server-side state in Redis: login sessions and failed-login counters, shared by every app process.

Sessions live in asynqpy:{web}:session:<digest of the id> (a hash: user, created, seen) with the idle timeout as TTL, so
logging out (deleting the key) ends the session everywhere and a copied cookie stops working. Failed logins
are counted per account and per address in asynqpy:{web}:throttle:<kind>:<key>, each in a window that starts
with its first failure. webui reaches both through these classes; it never imports redis. Every command goes
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


@dataclass(frozen=True)
class ThrottleState:
    """Whether logins for this account/address are refused, and for how many more seconds."""

    blocked: bool
    retry_after: int


class LoginThrottle:
    """Counts failed logins per account and per address; past a limit in the window, logins are refused
    until the window ends. A successful login clears the account's counter (not the address's).

    connection: a binary redis-py client, or its door. Raises RedisUnavailableError, RedisCommandError as
    SessionStore does.
    """

    def __init__(self, connection: redis.Redis | SyncDoor, *, per_user: int = 5, per_addr: int = 20,
                 window: int = 900) -> None:
        self.door = SyncDoor.of(connection)
        self.per_user = per_user
        self.per_addr = per_addr
        self.window = int(window)

    def _keys(self, user: str, addr: str) -> tuple[str, str]:
        return (keys.login_throttle("user", user.lower()[:200]), keys.login_throttle("addr", addr))

    def check(self, user: str, addr: str) -> ThrottleState:
        """Whether a login attempt for user from addr must be refused now (checked before the password)."""
        ku, ka = self._keys(user, addr)
        nu, tu, na, ta = self.door.read(lambda b: (b.command("GET", ku), b.command("TTL", ku), b.command("GET", ka),
                                                   b.command("TTL", ka)))
        waits = []
        if nu is not None and int(nu) >= self.per_user:
            waits.append(max(int(tu), 1))
        if na is not None and int(na) >= self.per_addr:
            waits.append(max(int(ta), 1))
        return ThrottleState(bool(waits), max(waits, default=0))

    def failed(self, user: str, addr: str) -> ThrottleState:
        """Count one failed login (one atomic script for both counters); says whether the next is refused."""
        reply = self.door.run(Call(script("login_failed"), self._keys(user, addr), (self.window,), list))
        (nu, tu), (na, ta) = reply
        waits = [int(t) for n, t, limit in ((nu, tu, self.per_user), (na, ta, self.per_addr)) if int(n) >= limit]
        return ThrottleState(bool(waits), max(waits, default=0))

    def succeeded(self, user: str) -> None:
        """Forget the account's failures (the address's stay counted)."""
        self.door.command("DEL", self._keys(user, "")[0])
