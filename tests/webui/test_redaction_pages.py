"""Payload redaction in the dashboard through real HTTP: the config file's [redaction] rules and the default mask
values on the task page, in lists and in search results for roles below the rule's; a search cannot find text
that is hidden; typed tasks' calls are masked too; the audit log never holds a payload."""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from asynqpy import Client, ServeMux, Task
from asynqpy.errors import InvalidArgumentError
from inspector.audit import STREAM
from tests.webui.authkit import login, make_app, token

CARD = "4242424242424242"
RULES = """
poll_seconds = 5

[redaction]
keys = ["iban"]

[redaction.types."payment:*"]
fields = ["payload.card.number", "result.card"]
headers = ["X-Card-Ref"]
reveal_to = "operator"
"""
mux = ServeMux()


@mux.task("web:typed:signup", queue="typedq")
def signup(user: str, password: str) -> None:
    """Only its payloads are read here."""


@pytest.fixture
def rapp(redis_url: str, users_path: Path, tmp_path: Path) -> Iterator[Flask]:
    cfg = tmp_path / "dashboard.toml"
    cfg.write_text(RULES)
    a = make_app(redis_url, users_path, ASYNQPY_CONFIG_FILE=str(cfg))
    yield a
    a.extensions["asynqpy.inspector"].close()


@pytest.fixture
def tasks(redis_url: str) -> dict[str, str]:
    charge = {"card": {"number": CARD, "exp": "12/30"}, "amount": 5}
    with Client(redis_url) as c:
        return {
            "charge": c.enqueue(Task("payment:charge", json.dumps(charge).encode(), {"X-Card-Ref": "ref-77"}),
                                queue="billing").id,
            "refund": c.enqueue(Task("payment:refund", f"card={CARD}".encode()), queue="billing").id,
            "login": c.enqueue(Task("mail:login", b'{"user": "ada", "Password": "hunter2", "IBAN": "DE89"}'),
                               queue="mail").id,
            "typed": signup.enqueue(c, "ada", "hunter2").id,
        }


def as_user(app: Flask, name: str) -> FlaskClient:
    c = app.test_client()
    assert login(c, name).status_code == 303
    return c


def text(resp: Any) -> str:
    assert resp.status_code == 200, resp.status_code
    return html.unescape(resp.get_data(as_text=True))


def test_rules_from_the_config_file_mask_pages_lists_and_search(rapp: Flask, tasks: dict[str, str]) -> None:
    vera = as_user(rapp, "vera")
    page = text(vera.get(f"/queues/billing/tasks/{tasks['charge']}"))
    assert CARD not in page and "ref-77" not in page and "12/30" in page and "[redacted]" in page
    assert "masked for your role: payload.card.number, headers.X-Card-Ref" in page
    assert CARD not in text(vera.get("/queues/billing/pending"))
    refund = text(vera.get(f"/queues/billing/tasks/{tasks['refund']}"))
    assert CARD not in refund and "shown to operator and above" in refund
    assert '<pre class="payload redacted">' in vera.get(f"/queues/billing/tasks/{tasks['refund']}").get_data(
        as_text=True)
    found = text(vera.get(f"/queues/billing/pending?text={CARD[:8]}"))
    assert tasks["charge"] not in found and tasks["refund"] not in found  # no way to test what a hidden value holds
    assert tasks["charge"] in text(vera.get("/queues/billing/pending?text=12/30"))
    otto = as_user(rapp, "otto")
    assert CARD in text(otto.get(f"/queues/billing/tasks/{tasks['charge']}"))
    assert tasks["charge"] in text(otto.get(f"/queues/billing/pending?text={CARD[:8]}"))


def test_the_default_masks_secret_keys_below_admin_typed_calls_too(rapp: Flask, tasks: dict[str, str]) -> None:
    for name in ("vera", "otto"):
        c = as_user(rapp, name)
        page = text(c.get(f"/queues/mail/tasks/{tasks['login']}"))
        assert "hunter2" not in page and "DE89" not in page and '"user": "ada"' in page  # keys = ["iban"] too
        assert "hunter2" not in text(c.get("/queues/mail/pending"))
        assert "mail:login" not in text(c.get("/queues/mail/pending?text=hunter"))
        call = text(c.get(f"/queues/typedq/tasks/{tasks['typed']}"))
        assert "signup(user='ada', password='[redacted]')" in call and "hunter2" not in call
        assert "hunter2" not in text(c.get("/queues/typedq/pending"))
    ada = as_user(rapp, "ada")
    assert "hunter2" in text(ada.get(f"/queues/mail/tasks/{tasks['login']}"))
    assert "signup(user='ada', password='hunter2')" in text(ada.get(f"/queues/typedq/tasks/{tasks['typed']}"))
    assert CARD in text(ada.get(f"/queues/billing/tasks/{tasks['charge']}"))


def test_the_audit_log_never_holds_a_payload(rapp: Flask, tasks: dict[str, str], redis_url: str,
                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="asynqpy.audit")
    vera, otto, ada = (as_user(rapp, n) for n in ("vera", "otto", "ada"))
    vera.post(f"/queues/billing/tasks/{tasks['charge']}/archive", headers={"X-CSRF-Token": token(vera)})
    h = {"X-CSRF-Token": token(otto)}
    assert otto.post(f"/queues/billing/tasks/{tasks['charge']}/archive", headers=h).status_code == 200
    assert otto.post(f"/queues/billing/tasks/{tasks['charge']}/run", headers=h).status_code == 200
    assert otto.post("/queues/billing/pending/delete", data={"ids": f"{tasks['refund']},nosuch"},
                     headers=h).status_code == 200
    assert otto.post(f"/queues/mail/tasks/{tasks['login']}/run", headers=h).status_code == 400  # pending: refused
    h = {"X-CSRF-Token": token(ada)}
    assert ada.post("/queues/mail/pending/archive", data={"all": "1"}, headers=h).status_code == 200
    with redis.Redis.from_url(redis_url) as r:
        entries = r.xrange(STREAM)
    assert len(entries) >= 8
    stored = json.dumps([{k.decode(): v.decode() for k, v in fields.items()} for _, fields in entries])
    logged = "\n".join(rec.getMessage() for rec in caplog.records)
    for secret in (CARD, "hunter2", "ref-77", "DE89", "12/30"):
        assert secret not in stored and secret not in logged, secret
    assert tasks["charge"] in stored  # the records are there, naming tasks by id


def test_bad_redaction_rules_stop_the_app_with_what_is_wrong(redis_url: str, users_path: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[redaction.types."x"]\nfields = ["payload.a"]\nreveal_to = "boss"\n')
    with pytest.raises(InvalidArgumentError, match="reveal_to must be one of"):
        make_app(redis_url, users_path, ASYNQPY_CONFIG_FILE=str(cfg))
    rules = tmp_path / "rules.toml"  # ASYNQPY_REDACTION may also name a file of its own
    rules.write_text('reveal_to = "viewer"\n')
    app = make_app(redis_url, users_path, ASYNQPY_REDACTION=str(rules))
    try:
        with Client(redis_url) as c:
            tid = c.enqueue(Task("t", b'{"token": "tok-1"}'), queue="q").id
        assert "tok-1" in text(as_user(app, "vera").get(f"/queues/q/tasks/{tid}"))
    finally:
        app.extensions["asynqpy.inspector"].close()
