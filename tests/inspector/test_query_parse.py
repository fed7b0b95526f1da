"""The task query language: every term kind, negation, quoting, and a clear error naming a bad term."""

from __future__ import annotations

import pytest

from asynqpy import InvalidArgumentError
from asynqpy.task import TaskState
from inspector import query as ql


def one(text: str) -> ql.Term:
    (t,) = ql.parse(text).terms
    return t


def test_every_term_kind() -> None:
    assert one("type:email:*") == ql.Term("type", "glob", "email:*", source="type:email:*")
    assert one("id:3f2a*").value == "3f2a*"
    assert one("state:retry,archived").value == ("retry", "archived")
    assert one('error:"SMTP busy"') == ql.Term("error", "text", "smtp busy", source='error:"SMTP busy"')
    assert one("payload:Acme").value == "acme"
    t = one("payload.user.id:42")
    assert (t.field, t.path, t.op, t.value) == ("payload", ("user", "id"), "glob", "42")
    assert one("payload.amount:>=100.5") .value == 100.5 and one("payload.amount:>=100.5").op == ">="
    t = one("header.Tenant:acme")
    assert (t.field, t.path, t.value) == ("header", ("tenant",), "acme")
    assert (one("retried:>3").op, one("retried:>3").value) == (">", 3)
    assert (one("retried:2").op, one("retried:2").value) == ("=", 2)
    assert (one("age:>1h").op, one("age:>1h").value) == (">", 3600.0)
    assert one("failed:<10m").value == 600.0
    assert one("age:>1h30m").value == 5400.0 and one("age:<250ms").value == 0.25


def test_negation_and_and() -> None:
    q = ql.parse("  type:email:*   -state:archived -header.tenant:acme ")
    assert [t.negated for t in q.terms] == [False, True, True]
    assert q.text == "type:email:*   -state:archived -header.tenant:acme"
    assert TaskState.ARCHIVED not in q.states() and TaskState.PENDING in q.states()
    assert ql.parse("state:retry,archived -state:archived").states() == (TaskState.RETRY,)
    assert ql.parse("").terms == ()


def test_quotes_keep_spaces_colons_and_escaped_quotes() -> None:
    assert one('error:"a: \\"b\\" c"').value == 'a: "b" c'
    assert one('header.x:"two words"').value == "two words"


@pytest.mark.parametrize(("text", "names"), [
    ("colour:red", "colour:red"), ("acme", "acme"), ("-acme", "-acme"), ("state:retrying", "state:retrying"),
    ("retried:>many", "retried:>many"), ("age:1h", "age:1h"), ("age:>1y", "age:>1y"), ("age:>", "age:>"),
    ('error:"open', 'error:"open'), ('error:"x"y', 'error:"x"y'), ("type:", "type:"), ("payload.:1", "payload.:1"),
    ("payload.a..b:1", "payload.a..b:1"), ("header:x", "header:x"), ("retried.x:1", "retried.x:1"),
    ("payload.n:>abc", "payload.n:>abc"), (":x", ":x"), ("type:a ty\"pe:b", 'ty"'),
    ("retried:>\u00b2", "retried:>\u00b2"),  # (str.isdigit() is true of a superscript two, which int() refuses)
])
def test_bad_terms_are_named(text: str, names: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        ql.parse(text)
    assert e.value.argument == "query" and names in str(e.value)


def test_limits() -> None:
    with pytest.raises(InvalidArgumentError, match="at most 20"):
        ql.parse(" ".join(f"payload:x{i}" for i in range(21)))
    with pytest.raises(InvalidArgumentError):
        ql.parse("payload:" + "x" * 3000)
    with pytest.raises(InvalidArgumentError):
        ql.parse(b"type:x")  # type: ignore[arg-type]


def test_payload_and_header_judging() -> None:
    q = ql.parse('payload.user_id:42 payload.tags.1:b* -header.tenant:acme payload:"ACME corp"')
    body = b'{"user_id": 42, "tags": ["a", "beta"], "name": "acme Corp"}'
    assert ql.record_matches(q, body, {"Tenant": "other"})
    assert not ql.record_matches(q, body, {"TENANT": "acme"})
    assert not ql.record_matches(q, b'{"user_id": "43", "tags": ["a", "beta"], "n": "acme corp"}', {})
    assert ql.record_matches(ql.parse("payload.user_id:42"), b'{"user_id": "42"}', {})
    assert ql.record_matches(ql.parse("payload.ok:true payload.x:null"), b'{"ok": true, "x": null}', {})
    assert ql.record_matches(ql.parse("payload.n:>3 payload.n:<=4"), b'{"n": 4}', {})
    assert not ql.record_matches(ql.parse("payload.n:>3"), b'{"n": "9"}', {})
    assert not ql.record_matches(ql.parse("payload.a:1"), b"not json", {})
    assert ql.record_matches(ql.parse("-payload.a:1"), b"not json", {})  # unknown: the negation holds
    assert ql.record_matches(ql.parse("payload.email:*@acme.com"), b'{"email": "ada@acme.com"}', {})


def test_lua_pattern_escapes_magic() -> None:
    assert ql.lua_pattern("a.b-c*%?") == "^a%.b%-c.*%%.$"


def test_script_hints_are_only_text_every_match_holds() -> None:
    def hints(q: str) -> list[str | int | float]:
        out = ql.script_terms(ql.parse(q))
        return [out[i + 3] for i in range(0, len(out), 4) if out[i] == "text"]

    assert hints("payload:ACME") == ["acme"]
    assert hints("payload.email:*@acme.com") == ["@acme.com"]
    assert hints("payload.note:*needle-7f3a*") == ["needle-7f3a"]
    assert hints("-payload:acme payload.n:42 payload.n:>3 payload.a:x* payload.s:*é* payload.u:a/b") == []
