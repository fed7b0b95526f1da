"""The task query language of `Inspector.find`, the CLI's `task find` and the dashboard's search box: parsing a
query into terms, and judging one task against them.

A query is terms separated by spaces, all of which must hold (AND); a leading ``-`` negates a term::

    type:email:*            task type, a glob (* any run, ? one character; case-sensitive)
    id:3f2a*                task id, a glob
    state:retry,archived    one of these states
    error:"SMTP busy"       the last error contains this (case-insensitive)
    payload:acme            the payload contains this text (case-insensitive)
    payload.user_id:42      a JSON field of the payload (typed tasks: an argument) equals this; a glob
                            (payload.email:*@acme.com), or compared: payload.amount:>100
    header.tenant:acme      a header equals this (a glob; header names are case-insensitive)
    retried:>3              retries so far (>, >=, <, <=, = or a bare number)
    age:>1h                 time in its state: pending since, archived at, completed at, last failed (retry),
                            added to its group (aggregating); unknown for scheduled and active tasks
    failed:<10m             time since the last failure (tasks that never failed have none)

Durations are a number and a unit (ms, s, m, h, d, w), several may follow each other (1h30m). A term whose
value is unknown for a task (no age, no such JSON field) does not hold for it, so its negation does. A value
may be double-quoted to hold spaces or a colon ("a \\"b\\"" escapes quotes).
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from asynqpy.errors import InvalidArgumentError
from asynqpy.task import TaskState

MAX_QUERY = 2000
MAX_TERMS = 20
FIELDS = ("type", "id", "state", "error", "payload", "header", "retried", "age", "failed")
CHEAP = ("type", "id", "state", "error", "retried", "age", "failed")  # what the scan script can judge itself
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_COMPARE = re.compile(r"(>=|<=|>|<|=)?(.*)", re.S)
OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "=": operator.eq}


def _bad(term: str, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"bad query term {term!r}: {why}", argument="query")


@dataclass(frozen=True)
class Term:
    """One condition. field: one of FIELDS; path: the JSON path (payload.a.b) or header name; op: a comparison
    (> >= < <= =) for retried, age, failed and compared JSON fields, "glob" or "text" otherwise; value: the
    number (seconds for durations), the lower-cased text, the glob, or the tuple of state names."""

    field: str
    op: str
    value: Any
    negated: bool = False
    path: tuple[str, ...] = ()
    source: str = ""

    def __str__(self) -> str:
        return self.source


@dataclass(frozen=True)
class Query:
    """A parsed query: its terms (all must hold) and its text as given."""

    terms: tuple[Term, ...]
    text: str

    def states(self) -> tuple[TaskState, ...]:
        """The states whose tasks can match, in scanning order (asynqmon's tab order)."""
        out = list(TaskState)
        for t in self.terms:
            if t.field == "state":
                out = [s for s in out if (s.value in t.value) != t.negated]
        return tuple(out)

    def cheap_terms(self) -> tuple[Term, ...]:
        """The terms the scan script judges (state is judged by choosing what to scan)."""
        return tuple(t for t in self.terms if t.field in CHEAP and t.field != "state")

    def needs_record(self) -> bool:
        """Whether some term looks into the payload or headers (judged on the decoded, masked task)."""
        return any(t.field not in CHEAP for t in self.terms)


def parse(text: str) -> Query:
    """The Query of text. Raises InvalidArgumentError (argument "query") naming the term that is wrong."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"query must be a str, not {type(text).__name__}", argument="query")
    if len(text) > MAX_QUERY:
        raise InvalidArgumentError(f"query is longer than {MAX_QUERY} characters", argument="query")
    terms = tuple(_term(raw, key, value, neg) for raw, key, value, neg in _split(text))
    if len(terms) > MAX_TERMS:
        raise InvalidArgumentError(f"query has {len(terms)} terms; at most {MAX_TERMS}", argument="query")
    return Query(terms, text.strip())


def _split(text: str) -> list[tuple[str, str, str, bool]]:
    """(term as written, field, value, negated) for each space-separated term; quotes keep spaces in a value."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        start = i
        neg = text[i] == "-"
        if neg:
            i += 1
        colon = i
        while colon < n and text[colon] not in ':"' and not text[colon].isspace():
            colon += 1
        if colon >= n or text[colon] != ":":
            end = colon
            while end < n and not text[end].isspace():
                end += 1
            word = text[start:end]
            raise _bad(word, "a term is field:value (fields: " + ", ".join(FIELDS) + "); for text in the "
                       f"payload write payload:{word.lstrip('-') or 'text'}")
        key = text[i:colon]
        i = colon + 1
        if i < n and text[i] == '"':
            i += 1
            chars = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                chars.append(text[i])
                i += 1
            if i >= n:
                raise _bad(text[start:], "the quote is not closed")
            i += 1
            value = "".join(chars)
            if i < n and not text[i].isspace():
                raise _bad(text[start:i + 1], "put a space after the closing quote")
        else:
            vstart = i
            while i < n and not text[i].isspace():
                if text[i] == '"':
                    raise _bad(text[start:i + 1], "a quote may only open a value")
                i += 1
            value = text[vstart:i]
        out.append((text[start:i], key, value, neg))
    return out


def _term(raw: str, key: str, value: str, neg: bool) -> Term:
    base, dot, rest = key.partition(".")
    if not base:
        raise _bad(raw, "the field name is missing")
    if dot and not rest:
        raise _bad(raw, f"name the field after {base}.")
    if base not in FIELDS:
        raise _bad(raw, f"unknown field {base!r}; fields: " + ", ".join(FIELDS))
    if rest and base not in ("payload", "header"):
        raise _bad(raw, f"{base} has no sub-fields (only payload.<path> and header.<name> do)")
    if base == "header" and not rest:
        raise _bad(raw, "name the header: header.<name>:value")
    if value == "" and base not in ("payload", "header", "error"):
        raise _bad(raw, "the value is missing")
    if base in ("type", "id"):
        return Term(base, "glob", value, neg, source=raw)
    if base == "state":
        names = tuple(s.strip() for s in value.split(","))
        known = {s.value for s in TaskState}
        for s in names:
            if s not in known:
                raise _bad(raw, f"unknown state {s!r}; states: " + ", ".join(sorted(known)))
        return Term(base, "in", names, neg, source=raw)
    if base in ("error", "payload") and not rest:
        if value == "":
            raise _bad(raw, "the value is missing")
        return Term(base, "text", value.encode().lower().decode(), neg, source=raw)  # ASCII lower, as Lua
    if base == "retried":
        op, num = _comparison(raw, value, "a whole number")
        if not num.isdecimal():  # (isdigit() is also true of "²", which int() refuses)
            raise _bad(raw, "retried takes a whole number (retried:>3)")
        return Term(base, op or "=", int(num), neg, source=raw)
    if base in ("age", "failed"):
        op, dur = _comparison(raw, value, "a duration")
        if op is None or op == "=":
            raise _bad(raw, f"say {base}:>{dur} (longer ago than) or {base}:<{dur} (more recently than)")
        return Term(base, op, duration(dur, raw), neg, source=raw)
    path = tuple(rest.split("."))
    if any(not seg for seg in path):
        raise _bad(raw, "a field path has an empty part")
    if base == "header":
        return Term(base, "glob", value, neg, path=(rest.lower(),), source=raw)
    op, operand = _comparison(raw, value, "a value")
    if op in (">", ">=", "<", "<="):
        try:
            number = float(operand)
        except ValueError:
            raise _bad(raw, f"{op} compares numbers; {operand!r} is not one") from None
        return Term(base, op, number, neg, path=path, source=raw)
    return Term(base, "glob", value[1:] if op == "=" else value, neg, path=path, source=raw)


def _comparison(raw: str, value: str, what: str) -> tuple[str | None, str]:
    m = _COMPARE.fullmatch(value)
    assert m is not None  # the pattern matches any text
    op, operand = m.group(1), m.group(2)
    if not operand:
        raise _bad(raw, f"{what} is missing after {op}")
    return op, operand


def duration(text: str, raw: str = "") -> float:
    """Seconds in a duration such as 90s, 10m, 1h30m, 2d, 250ms. Raises InvalidArgumentError."""
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise _bad(raw or text, f"{text!r} is not a duration (a number and a unit: ms, s, m, h, d, w; e.g. 1h30m)")
    return total


def glob_regex(pattern: str) -> re.Pattern[str]:
    """The regular expression of a glob: * any run of characters, ? one; everything else literal (header and
    JSON values; the scan script matches types and ids with lua_pattern)."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.S)


def lua_pattern(pattern: str) -> str:
    """The anchored Lua pattern of a glob (the scan script matches types and ids with it)."""
    out = []
    for c in pattern:
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c.isalnum() or ord(c) > 127:
            out.append(c)
        else:
            out.append("%" + c)
    return "^" + "".join(out) + "$"


# -- judging a task on what the scan script returns ------------------------------------------------------------

def record_matches(query: Query, payload: bytes, headers: Mapping[str, str]) -> bool:
    """Whether the payload and header terms of query hold for a task with this payload and these headers (as
    the viewer may see them: masked). The scan script has judged the other terms."""
    return all(_holds(t, payload, headers) != t.negated for t in query.terms if t.field not in CHEAP)


def _holds(term: Term, payload: bytes, headers: Mapping[str, str]) -> bool:
    if term.field == "header":
        name = term.path[0]
        return any(glob_regex(term.value).fullmatch(v) for k, v in headers.items() if k.lower() == name)
    if not term.path:
        return term.value.encode() in payload.lower()  # ASCII case-insensitive, as the script compares
    return _json_holds(term, payload)


_MISSING = object()
def _json_holds(term: Term, payload: bytes) -> bool:
    try:
        value: Any = json.loads(payload) if payload else _MISSING
    except (ValueError, RecursionError):
        return False
    for seg in term.path:
        if isinstance(value, dict):
            value = value.get(seg, _MISSING)
        elif isinstance(value, list) and seg.isdecimal() and int(seg) < len(value):
            value = value[int(seg)]
        else:
            return False
    if value is _MISSING:
        return False
    if term.op != "glob":
        return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                and OPS[term.op](float(value), term.value))
    if isinstance(value, str):
        shown = value
    elif isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        shown = json.dumps(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                return float(term.value) == float(value)
            except ValueError:
                pass
    else:
        return False
    return glob_regex(term.value).fullmatch(shown) is not None


def script_terms(query: Query) -> list[str | int | float]:
    """The cheap terms as the scan script reads them: field, negated ("1"/"0"), op, operand for each."""
    out: list[str | int | float] = []
    for t in query.cheap_terms():
        operand = lua_pattern(t.value) if t.field in ("type", "id") else t.value
        out += [t.field, "1" if t.negated else "0", t.op, operand]
    for t in query.terms:  # text that must be in the payload is in the raw message too: fewer rows come back
        hint = _hint(t)
        if hint:
            out += ["text", "0", "in", hint]
    return out


_PLAIN = re.compile(r"[A-Za-z0-9 _.@:+-]{3,}")  # characters no JSON encoder escapes


def _hint(t: Term) -> str:
    """Lower-cased text every task a payload term holds for has in its raw message ("" when there is none)."""
    if t.field != "payload" or t.negated:
        return ""
    if not t.path:
        return str(t.value)
    if t.op != "glob":
        return ""
    try:
        float(t.value)
        return ""  # a number may be written in other ways (4.2e1)
    except ValueError:
        pass
    runs = [r for part in re.split(r"[*?]", t.value) for r in _PLAIN.findall(part) if _PLAIN.fullmatch(part)]
    return max(runs, key=len).lower() if runs else ""
