"""RESP packing: script calls and commands as the bytes redis-py would send (and a packed EVALSHA as EVAL)."""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

from asynqpy.rdb.scripts import Call, KeyOrArg, Script


def encode_arg(x: KeyOrArg) -> bytes:
    """One argument as redis-py's encoder writes it (str UTF-8, int decimal, float repr)."""
    if isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode()
    if isinstance(x, int) and not isinstance(x, bool):
        return b"%d" % x
    if isinstance(x, float):
        return repr(x).encode()
    raise TypeError(f"a script argument must be str, bytes, int or float, not {type(x).__name__}")


def pack_command(*parts: KeyOrArg) -> bytes:
    """One command in RESP, ready to send."""
    bs = [encode_arg(p) for p in parts]
    return b"*%d\r\n" % len(bs) + b"".join([b"$%d\r\n%s\r\n" % (len(b), b) for b in bs])


@cache
def evalsha_head(sha: str, argc: int, nkeys: int) -> bytes:
    return b"*%d\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$%d\r\n%d\r\n" % (argc + 3, sha.encode(), len(str(nkeys)), nkeys)


@lru_cache(maxsize=1024)
def _str_seg(s: str) -> bytes:
    """One str argument in RESP. Cached: queue keys, prefixes and names recur in every command of a queue (the
    ids and times that do not just pass through the cache)."""
    b = s.encode()
    return b"$%d\r\n%s\r\n" % (len(b), b)


@lru_cache(maxsize=1024)
def _int_seg(n: int) -> bytes:
    """One int argument in RESP. Cached: counts, shares and expiry seconds recur from call to call."""
    b = b"%d" % n
    return b"$%d\r\n%s\r\n" % (len(b), b)


def pack(call: Call[Any]) -> bytes:
    """The EVALSHA of call in RESP, byte for byte what redis-py would send. The keys' segments (and ints: counts,
    shares, expiry seconds) come from caches; the other arguments are mostly ids and times that would only pass
    through one."""
    keys, args = call.keys, call.args
    parts = [evalsha_head(call.script.sha, len(keys) + len(args), len(keys))]
    for x in keys:
        if x.__class__ is str:
            parts.append(_str_seg(x))
        else:
            b = encode_arg(x)
            parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
    for x in args:
        cls = x.__class__
        if cls is int:
            parts.append(_int_seg(x))
            continue
        b = x.encode() if cls is str else x if cls is bytes else encode_arg(x)  # type: ignore[union-attr, assignment]
        n = len(b)
        parts += (_LENGTHS[n] if n < 512 else b"$%d\r\n" % n, b, b"\r\n")
    return b"".join(parts)


_LENGTHS = [b"$%d\r\n" % n for n in range(512)]  # the head of a bulk string of n bytes


def as_eval(packed: bytes, sc: Script) -> bytes:
    """A packed EVALSHA of sc turned into the EVAL of its text, with the same keys and arguments: the retry after
    NOSCRIPT. EVAL cannot answer NOSCRIPT (a SCRIPT FLUSH between a SCRIPT LOAD and the EVALSHA retry could), and
    it caches the script for the next EVALSHA as SCRIPT LOAD would."""
    sha = b"$7\r\nEVALSHA\r\n$40\r\n" + sc.sha.encode() + b"\r\n"
    text = sc.text.encode()
    return packed.replace(sha, b"$4\r\nEVAL\r\n$%d\r\n%s\r\n" % (len(text), text), 1)
