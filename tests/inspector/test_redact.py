"""Payload redaction (inspector.redact): the default, per-type field and header rules, hooks, what cannot be
masked field by field, and the CLI's --redact on tasks read back from a real server."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from asynqpy import Client, Task
from asynqpy.errors import InvalidArgumentError
from asynqpy.rdb import keys
from inspector.api import Inspector
from inspector.cli import main
from inspector.redact import MASK, ROLES, Policy
from tests.inspector.worker import Worker

CARD = {"types": {"payment:*": {"fields": ["payload.card.number", "payload.cards.cvc", "result.receipt.card"],
                                "headers": ["X-Card-Ref"], "reveal_to": "operator"}}}
CHARGE = {"card": {"number": "4242424242424242", "exp": "12/30"}, "cards": [{"cvc": "123"}, {"cvc": "456"}],
          "amount": 5, "api_token": "tok-live-1"}


def masked(policy: Policy, task_type: str, value: Any, role: str) -> tuple[Any, list[str], str]:
    data, m = policy.mask_bytes(task_type, "payload", json.dumps(value).encode(), role)
    return (json.loads(data) if data else None), m.found, m.hide


def test_the_roles_are_the_dashboards() -> None:
    from webui.users import ROLES as DASHBOARD_ROLES

    assert ROLES == DASHBOARD_ROLES  # the threshold compares the dashboard's roles in the same order


def test_default_masks_secret_named_keys_at_any_depth_below_admin() -> None:
    p = Policy()
    value = {"user": "ada", "DB_Password": "p", "nested": [{"Authorization": "Bearer z", "ok": 1}],
             "clientSecret": {"a": 1}, "x-auth-token": "t"}
    out, found, _ = masked(p, "any", value, "viewer")
    assert out == {"user": "ada", "DB_Password": MASK, "nested": [{"Authorization": MASK, "ok": 1}],
                   "clientSecret": MASK, "x-auth-token": MASK}
    assert found == ["payload.DB_Password", "payload.nested[0].Authorization", "payload.clientSecret",
                     "payload.x-auth-token"]
    assert masked(p, "any", value, "operator")[0] == out
    assert masked(p, "any", value, "admin")[0] == value  # at the threshold: everything
    assert masked(Policy.from_mapping({"reveal_to": "operator"}), "any", value, "operator")[0] == value
    assert masked(Policy.from_mapping({"default": False}), "any", value, "viewer")[0] == value
    assert masked(Policy.from_mapping({"keys": ["iban"]}), "any", {"IBAN": "DE1", "n": 1}, "viewer")[0] == {
        "IBAN": MASK, "n": 1}


def test_type_rules_mask_field_paths_and_headers_for_roles_below_theirs() -> None:
    p = Policy.from_mapping(CARD)
    out, found, _ = masked(p, "payment:charge", CHARGE, "viewer")
    assert out["card"] == {"number": MASK, "exp": "12/30"} and out["cards"] == [{"cvc": MASK}, {"cvc": MASK}]
    assert out["api_token"] == MASK and out["amount"] == 5  # the default still applies beside the rule
    assert "payload.card.number" in found and "payload.cards[1].cvc" in found
    op, _, _ = masked(p, "payment:charge", CHARGE, "operator")
    assert op["card"]["number"] == "4242424242424242" and op["api_token"] == MASK  # the default is admin's
    assert masked(p, "email:send", CHARGE, "viewer")[0]["card"]["number"] == "4242424242424242"  # other type
    hdrs, names = p.headers("payment:charge", {"X-Card-Ref": "c", "Authorization": "a", "trace": "t"}, "viewer")
    assert dict(hdrs) == {"X-Card-Ref": MASK, "Authorization": MASK, "trace": "t"}
    assert names == ["headers.X-Card-Ref", "headers.Authorization"]
    star = Policy.from_mapping({"types": {"t": {"fields": ["payload.*.pin", "payload.list.0"]}}})
    assert masked(star, "t", {"a": {"pin": 1}, "b": {"pin": 2}, "list": [1, 2]}, "viewer")[0] == {
        "a": {"pin": MASK}, "b": {"pin": MASK}, "list": [MASK, 2]}


def test_what_cannot_be_masked_field_by_field_is_hidden_whole() -> None:
    p = Policy.from_mapping(CARD)
    data, m = p.mask_bytes("payment:charge", "payload", b"card=4242 exp=12/30", "viewer")
    assert data == b"" and "not JSON" in m.hide
    assert p.mask_bytes("payment:charge", "payload", b"card=4242", "operator")[0] == b"card=4242"
    # a type without rules: text gets key=value pairs masked; binary is shown unless non_json = "hide"
    data, m = Policy().mask_bytes("x", "payload", b"user=ada password=hunter2&token='abc d'", "viewer")
    assert data == b"user=ada password=[redacted]&token=[redacted]" and m.found
    assert Policy().mask_bytes("x", "payload", b"\xff\x00\x01", "viewer")[0] == b"\xff\x00\x01"
    hide = Policy.from_mapping({"non_json": "hide"})
    assert hide.mask_bytes("x", "payload", b"\xff\x00\x01", "viewer")[1].hide
    assert hide.mask_bytes("x", "payload", b"plain words", "viewer")[1].hide
    assert hide.mask_bytes("x", "payload", b"\xff\x00\x01", "admin")[0] == b"\xff\x00\x01"


def hook_upper(task_type: str, part: str, value: Any) -> Any:
    if part == "payload" and isinstance(value, dict):
        return {k: ("***" if k == "email" else v) for k, v in value.items()}
    return value


def hook_broken(task_type: str, part: str, value: Any) -> Any:
    raise RuntimeError("bug in the hook")


def test_hooks_run_for_roles_below_the_rule_and_a_failing_hook_hides() -> None:
    mod = __name__
    p = Policy.from_mapping({"types": {"user:*": {"hook": f"{mod}:hook_upper", "reveal_to": "operator"},
                                       "bad": {"hook": f"{mod}:hook_broken"}}})
    assert masked(p, "user:new", {"email": "a@b", "n": 1}, "viewer")[:2] == ({"email": "***", "n": 1},
                                                                             ["payload (hook)"])
    assert masked(p, "user:new", {"email": "a@b"}, "operator")[0] == {"email": "a@b"}
    assert masked(p, "bad", {"x": 1}, "viewer")[2] == "the redaction hook failed"
    with pytest.raises(InvalidArgumentError, match="cannot load hook"):
        Policy.from_mapping({"hook": "no_such_module_x:fn"})


@pytest.mark.parametrize("bad, match", [
    ({"reveal_to": "boss"}, "reveal_to must be one of"), ({"colour": 1}, "unknown setting"),
    ({"types": {"t": {"fields": "payload.a"}}}, "list of non-empty strings"),
    ({"types": {"t": {"fields": ["payload."]}}}, "empty part"), ({"non_json": "maybe"}, "show or hide"),
    ({"types": {"t": {"feilds": []}}}, "unknown setting")])
def test_bad_rules_are_refused_with_what_is_wrong(bad: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        Policy.from_mapping(bad)


@pytest.fixture
def charge(redis_url: str) -> dict[str, str]:
    """A payment:charge task (card, headers, a result) completed in queue billing; a text one pending."""
    with Client(redis_url) as c:
        done = c.enqueue(Task("payment:charge", json.dumps(CHARGE).encode(), {"X-Card-Ref": "ct-9"}),
                         queue="billing", retention=3600).id
        text = c.enqueue(Task("payment:refund", b"card=4242424242424242"), queue="billing").id
    r = redis.Redis.from_url(redis_url)
    w = Worker(r, time.time)
    assert done in w.take("billing", 1)
    # what a handler's write_result stores, before the task completes
    r.hset(keys.task("billing", done), "result", json.dumps({"receipt": {"card": "4242424242424242"}}))
    w.complete("billing", done)
    r.close()
    return {"done": done, "text": text}


def test_records_from_redis_are_masked_in_views_info_and_search(redis_url: str, charge: dict[str, str]) -> None:
    p = Policy.from_mapping(CARD)
    with Inspector(redis_url) as insp:
        rec = p.task(insp.get_task("billing", charge["done"]), "viewer")
        assert "4242" not in rec.payload.text and "4242" not in (rec.result.text if rec.result else "x")
        assert "4242" not in rec.info.payload.decode() and "4242" not in (rec.info.result or b"").decode()
        assert rec.info.headers["X-Card-Ref"] == MASK and "headers.X-Card-Ref" in rec.redacted
        assert p.task(insp.get_task("billing", charge["done"]), "operator").info.headers["X-Card-Ref"] == "ct-9"
        hidden = p.task(insp.get_task("billing", charge["text"]), "viewer")
        assert hidden.payload.kind == "redacted" and "shown to operator and above" in hidden.payload.text
        assert hidden.info.payload == b""
        found = insp.search("billing", "completed", text="4242")
        assert len(found.tasks) == 1 and p.search(found, "viewer", "4242").tasks == ()  # no oracle
        assert len(p.search(found, "operator", "4242").tasks) == 1
        assert len(p.search(insp.search("billing", "completed", text="12/30"), "viewer", "12/30").tasks) == 1


def test_cli_redact_masks_tables_and_json(redis_url: str, charge: dict[str, str], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    rules = tmp_path / "dashboard.toml"
    rules.write_text('poll_seconds = 5\n[redaction.types."payment:*"]\nfields = ["payload.card.number", '
                     '"result.receipt.card"]\nheaders = ["X-Card-Ref"]\nreveal_to = "operator"\n')

    def cli(*argv: str) -> str:
        assert main([*argv, "--redis-url", redis_url]) == 0
        return capsys.readouterr().out

    plain = cli("task", "info", "billing", charge["done"])
    assert "4242424242424242" in plain and "ct-9" in plain  # no --redact: the CLI shows what Redis holds
    for argv in (["task", "info", "billing", charge["done"]], ["task", "ls", "billing", "--state", "completed"],
                 ["task", "search", "billing", "--state", "completed", "--text", "12/30"]):
        out = cli(*argv, "--redaction", str(rules), "--redact")
        assert "4242" not in out and "ct-9" not in out, argv
        data = cli(*argv, "--redaction", str(rules), "--redact", "--json")
        assert "4242" not in data and "ct-9" not in data
        for t in (json.loads(data).get("tasks") or [json.loads(data)]):
            assert b"4242" not in base64.b64decode(t["info"]["payload"])
    assert "4242" in cli("task", "info", "billing", charge["done"], "--redaction", str(rules), "--redact=operator")
    monkeypatch.setenv("ASYNQPY_REDACT", "1")
    monkeypatch.setenv("ASYNQPY_REDACTION", str(rules))
    out = cli("task", "info", "billing", charge["text"])
    assert "4242" not in out and "redacted" in out
    assert "4242" in cli("task", "info", "billing", charge["text"], "--no-redact")
    monkeypatch.setenv("ASYNQPY_REDACT", "boss")
    assert main(["task", "ls", "billing", "--redis-url", redis_url]) == 2
    assert "ASYNQPY_REDACT" in capsys.readouterr().err
