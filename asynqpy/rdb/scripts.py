"""The Lua scripts (Script, script()), one run of a script (Call), and the redis-py helpers both runners share."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Generic, TypeVar

from redis.exceptions import ResponseError

from asynqpy.errors import NotDurableError
from asynqpy.rdb.durability import Durability

KeyOrArg = str | bytes | int | float
T = TypeVar("T")
R = TypeVar("R", covariant=True)


@dataclass(frozen=True)
class Script:
    """One Lua file from rdb/lua, with its SHA1 for EVALSHA."""

    name: str
    text: str
    sha: str


@cache
def script(name: str) -> Script:
    """The script rdb/lua/<name>.lua, with "-- #include <file>" lines replaced by that fragment's text.

    Raises FileNotFoundError for an unknown name.
    """
    return load_script("asynqpy.rdb", name)


def load_script(package: str, name: str) -> Script:
    """<package>/lua/<name>.lua with its "-- #include <file>" lines replaced by those fragments.

    A fragment is looked up in the same folder first, then in asynqpy/rdb/lua, so another package's scripts
    share the core's fragments (one definition of each step of a transition).
    """
    folder = resources.files(package).joinpath("lua")
    core = resources.files("asynqpy.rdb").joinpath("lua")
    lines = []
    for line in folder.joinpath(f"{name}.lua").read_text().splitlines(keepends=True):
        if line.startswith("-- #include "):
            frag = line.split()[-1]
            own = folder.joinpath(frag)
            line = (own if own.is_file() else core.joinpath(frag)).read_text()
        lines.append(line)
    text = "".join(lines)
    return Script(name, text, hashlib.sha1(text.encode()).hexdigest())


@dataclass(frozen=True)
class Call(Generic[R]):
    """One script invocation: the script, its KEYS and ARGV, and parse, which turns its raw reply (as redis-py
    returns it) into a T or raises the typed error the reply code stands for."""

    script: Script
    keys: Sequence[KeyOrArg]
    args: Sequence[KeyOrArg]
    parse: Callable[[Any], R]


def eval_args(call: Call[Any]) -> tuple[Any, ...]:
    """The EVAL of call's script text, as execute_command's arguments (the retry after NOSCRIPT)."""
    return ("EVAL", call.script.text, len(call.keys), *call.keys, *call.args)


def evalsha_args(call: Call[Any]) -> tuple[Any, ...]:
    """The EVALSHA of call, as execute_command's arguments."""
    return ("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)


def queue_call(pipe: Any, call: Call[Any]) -> Any:
    """Queue EVALSHA for call on a pipeline. Through execute_command: redis-py's cluster pipeline refuses its
    evalsha() method, yet routes the command by its first key (every script's keys share one slot)."""
    return pipe.execute_command("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)


def queue_eval(pipe: Any, call: Call[Any]) -> Any:
    """Queue the EVAL of call's script text on a pipeline (the retry after NOSCRIPT)."""
    return pipe.execute_command(*eval_args(call))


def durable_replies(res: list[Any]) -> tuple[list[Any], Any]:
    """One node's durable pipeline replies (its calls', then WAIT's) as (the calls' replies, WAIT's reply);
    raises the first failure that is no error reply (a connection's: the whole group is in doubt)."""
    for r in res[:-1]:
        if isinstance(r, Exception) and not isinstance(r, ResponseError):
            raise r
    return res[:-1], res[-1]


def gather_by_node(calls: Sequence[Call[T]], order: list[list[int]], groups: list[tuple[list[Any], Any]],
                   durable: Durability) -> tuple[list[T | Exception], bool]:
    """Per-call results in call order from per-node replies, and whether every node's WAIT was enough."""
    slots: dict[int, T | Exception] = {}
    confirmed = True
    for idxs, (raws, acked) in zip(order, groups, strict=True):
        for i, raw in zip(idxs, raws, strict=True):
            slots[i] = _parse_or_error(calls[i], raw)
        try:
            durable.check(acked, "batch")
        except NotDurableError:
            confirmed = False
    return [slots[i] for i in range(len(calls))], confirmed


def parse_all(calls: Sequence[Call[T]], raws: Sequence[Any]) -> list[T | Exception]:
    out: list[T | Exception] = []
    for c, r in zip(calls, raws, strict=True):
        out.append(_parse_or_error(c, r))
    return out


def _parse_or_error(call: Call[T], raw: Any) -> T | Exception:
    if isinstance(raw, ResponseError):
        return raw
    try:
        return call.parse(raw)
    except Exception as exc:  # returned, not raised: the caller sees each call's own outcome
        return exc
