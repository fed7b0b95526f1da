"""`asynqpy user ...` and `asynqpy audit ...` as a person or a script runs them."""

from __future__ import annotations

import io
import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest
import redis

from asynqpy.cli import main
from asynqpy.errors import InvalidArgumentError
from inspector.audit import STREAM, AuditLog
from tests.webui.authkit import PASSWORD
from webui.users import MIN_PASSWORD, UsersFile, UsersFileError, verify_password


def run(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_user_add_ls_passwd_role_rm(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch, redis_url: str) -> None:
    path = tmp_path / "users.toml"
    f = ["--users", str(path), "--redis-url", redis_url]
    code, out, _ = run(["user", "add", "ann", "--role", "admin", "--password-stdin", *f], capsys, monkeypatch,
                       "s3cret pass phrase\n")
    assert code == 0 and "added ann (admin)" in out
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    data = tomllib.loads(path.read_text())
    assert data["users"]["ann"]["role"] == "admin"
    assert verify_password(data["users"]["ann"]["password"], "s3cret pass phrase")  # the trailing newline is not in it
    assert "s3cret" not in path.read_text()
    run(["user", "add", "bob", "--role", "viewer", "--password-stdin", *f], capsys, monkeypatch, f"bob-{PASSWORD}\n")
    code, out, _ = run(["user", "ls", *f], capsys, monkeypatch)
    assert code == 0 and out.split() == ["NAME", "ROLE", "QUEUE", "ROLES", "ann", "admin", "-", "bob", "viewer", "-"]
    code, out, _ = run(["user", "ls", "--json", *f], capsys, monkeypatch)
    assert json.loads(out) == [{"name": "ann", "role": "admin", "queues": {}},
                               {"name": "bob", "role": "viewer", "queues": {}}]

    code, out, _ = run(["user", "passwd", "bob", "--password-stdin", *f], capsys,
                       monkeypatch, f"new-{PASSWORD}\n")
    assert code == 0 and "changed the password of bob" in out
    assert UsersFile(path).authenticate("bob", f"new-{PASSWORD}") is not None
    assert UsersFile(path).authenticate("bob", f"bob-{PASSWORD}") is None
    assert run(["user", "role", "bob", "operator", *f], capsys, monkeypatch)[0] == 0
    assert UsersFile(path).get("bob").role == "operator"  # type: ignore[union-attr]
    code, out, _ = run(["user", "rm", "bob", *f], capsys, monkeypatch)
    assert code == 0 and "removed bob" in out
    assert [u.name for u in UsersFile(path).all()] == ["ann"]
    recs = AuditLog(redis.Redis.from_url(redis_url)).list().records
    assert [(x.action, x.role, x.detail) for x in reversed(recs)] == [
        ("user.add", "cli", "ann: added as admin"), ("user.add", "cli", "bob: added as viewer"),
        ("user.passwd", "cli", "bob: password changed"), ("user.role", "cli", "bob: role set to operator"),
        ("user.rm", "cli", "bob: removed")]


def test_user_changes_stand_when_redis_is_down(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    f = ["--users", str(tmp_path / "u.toml"), "--redis-url", "redis://127.0.0.1:1/0"]
    code, out, _ = run(["user", "add", "ann", "--role", "viewer", "--password-stdin", *f], capsys, monkeypatch,
                       f"{PASSWORD}\n")
    assert code == 0 and "not in the audit log: Redis unreachable" in out
    assert UsersFile(tmp_path / "u.toml").get("ann") is not None


def test_user_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch, redis_url: str) -> None:
    f = ["--users", str(tmp_path / "users.toml"), "--redis-url", redis_url]
    run(["user", "add", "ann", "--role", "viewer", "--password-stdin", *f], capsys, monkeypatch, f"{PASSWORD}\n")
    code, _, err = run(["user", "add", "ann", "--role", "viewer", "--password-stdin", *f], capsys, monkeypatch,
                       f"{PASSWORD}\n")
    assert code == 2 and "already exists" in err
    code, _, err = run(["user", "add", "bad name", "--role", "viewer", "--password-stdin", *f], capsys, monkeypatch,
                       f"{PASSWORD}\n")
    assert code == 2 and "not allowed" in err
    code, _, err = run(["user", "add", "eve", "--role", "viewer", "--password-stdin", *f], capsys, monkeypatch, "")
    assert code == 2 and "stdin is empty" in err
    code, _, err = run(["user", "add", "eve", "--role", "viewer", "--password-stdin", *f], capsys, monkeypatch, "\n")
    assert code == 2 and "must not be empty" in err
    code, _, err = run(["user", "add", "eve", "--role", "viewer", *f], capsys, monkeypatch)
    assert code == 2 and "--password-stdin" in err  # no terminal to ask on
    code, _, err = run(["user", "rm", "nobody", *f], capsys, monkeypatch)
    assert code == 1 and "no user 'nobody'" in err
    with pytest.raises(SystemExit):
        run(["user", "add", "eve", "--role", "root", "--password-stdin", *f], capsys, monkeypatch, "x\n")


def test_a_short_password_is_refused_wherever_one_is_set(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch, redis_url: str) -> None:
    """user add and user passwd refuse a password under MIN_PASSWORD characters (exit 2, one line, nothing
    written); exactly MIN_PASSWORD is enough, counted in characters, not bytes."""
    path = tmp_path / "users.toml"
    f = ["--users", str(path), "--redis-url", redis_url]
    for short in ("x", "a" * (MIN_PASSWORD - 1), "é" * (MIN_PASSWORD - 1)):
        code, out, err = run(["user", "add", "eve", "--role", "admin", "--password-stdin", *f], capsys, monkeypatch,
                             f"{short}\n")
        assert (code, out) == (2, "") and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"is {len(short)} character(s) long; it needs at least {MIN_PASSWORD}" in err
    assert not path.exists()
    code, _, _ = run(["user", "add", "eve", "--role", "admin", "--password-stdin", *f], capsys, monkeypatch,
                     "b" * MIN_PASSWORD + "\n")
    assert code == 0 and UsersFile(path).authenticate("eve", "b" * MIN_PASSWORD) is not None
    code, _, err = run(["user", "passwd", "eve", "--password-stdin", *f], capsys, monkeypatch, "short-one\n")
    assert code == 2 and f"at least {MIN_PASSWORD}" in err
    assert UsersFile(path).authenticate("eve", "b" * MIN_PASSWORD) is not None  # unchanged
    with pytest.raises(InvalidArgumentError, match=f"at least {MIN_PASSWORD}"):
        UsersFile(path).set_password("eve", "short-one")  # the library refuses it too, not only the CLI


def test_a_hand_edited_users_file(tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    UsersFile(path).add("ann", "admin", PASSWORD)
    text = path.read_text().replace('role = "admin"', 'role = "operator"  # demoted by hand')
    path.write_text("# our team\n" + text)
    assert UsersFile(path).get("ann").role == "operator"  # type: ignore[union-attr]
    path.write_text(text.replace('role = "admin"', 'role = "operator"').replace("[users.", "[user."))
    assert UsersFile(path).all() == []
    path.write_text('[users.ann]\nrole = "boss"\npassword = "x"\n')
    from webui.users import UsersFileError

    with pytest.raises(UsersFileError, match="role"):
        UsersFile(path).all()


def _tamper(r: Any, sid: str, **changes: object) -> None:
    entries = [(k.decode(), v) for k, v in r.xrange(STREAM)]
    r.delete(STREAM)
    for k, fields in entries:
        if k == sid:
            fields = {b"r": json.dumps({**json.loads(fields[b"r"]), **changes}).encode()}
        r.xadd(STREAM, fields, id=k)


def test_audit_ls_and_verify(redis_url: str, r: redis.Redis, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    u = ["--redis-url", redis_url]
    code, _, err = run(["audit", "verify", *u, "--audit-dir", str(tmp_path)], capsys, monkeypatch)
    assert code == 1 and "no audit key" in err  # verify never makes one
    log = AuditLog.open(r, tmp_path, writer=True)
    code, out, _ = run(["audit", "verify", *u, "--audit-dir", str(tmp_path)], capsys, monkeypatch)
    assert code == 0 and "empty" in out
    monkeypatch.setenv("ASYNQPY_AUDIT_DIR", str(tmp_path))
    ids = [log.append("queue.pause", outcome="ok", user="ann", role="operator", queue=f"q{i}").id for i in range(4)]
    code, out, _ = run(["audit", "verify", *u], capsys, monkeypatch)
    assert code == 0 and "intact: 4 record(s)" in out
    code, out, _ = run(["audit", "ls", "--queue", "q2", *u], capsys, monkeypatch)
    assert code == 0 and len(out.splitlines()) == 1 and "ann(operator)" in out and "queue.pause ok" in out
    code, out, _ = run(["audit", "ls", "--json", *u], capsys, monkeypatch)
    assert [json.loads(line)["seq"] for line in out.splitlines()] == [1, 2, 3, 4]  # newest last, as the text
    _tamper(r, ids[1], user="someone-else")
    code, out, _ = run(["audit", "verify", *u], capsys, monkeypatch)
    assert code == 1 and "BROKEN at record seq 2" in out and "edited" in out and ids[1] in out
    code, out, _ = run(["audit", "verify", "--json", *u], capsys, monkeypatch)
    assert code == 1 and json.loads(out)["broken"]["kind"] == "edited"


def test_user_queue_roles(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                          redis_url: str) -> None:
    path = tmp_path / "users.toml"
    f = ["--users", str(path), "--redis-url", redis_url]
    code, out, _ = run(["user", "add", "alice", "--role", "viewer", "--queue-role", "billing:*=operator",
                        "--queue-role", "hr:*=none", "--password-stdin", *f], capsys, monkeypatch,
                       f"alice-{PASSWORD}\n")
    assert code == 0 and "added alice (viewer; on queues billing:*=operator, hr:*=none)" in out
    assert tomllib.loads(path.read_text())["users"]["alice"]["queues"] == {"billing:*": "operator", "hr:*": "none"}
    alice = UsersFile(path).get("alice")
    assert alice is not None and alice.role_on("billing:eu") == "operator" and alice.role_on("hr:pay") == "none"
    assert alice.role_on("mail") == "viewer"
    code, out, _ = run(["user", "ls", *f], capsys, monkeypatch)
    assert out.splitlines()[1].split() == ["alice", "viewer", "billing:*=operator,", "hr:*=none"]
    code, out, _ = run(["user", "queue-role", "alice", "billing:eu=admin", "--remove", "hr:*", *f], capsys,
                       monkeypatch)
    assert code == 0 and "billing:*=operator, billing:eu=admin" in out
    alice = UsersFile(path).get("alice")
    assert alice is not None and alice.role_on("billing:eu") == "admin" and alice.role_on("billing:us") == "operator"
    assert alice.role_on("hr:pay") == "viewer"
    code, _, err = run(["user", "queue-role", "alice", "billing=boss", *f], capsys, monkeypatch)
    assert code == 2 and "unknown role 'boss'" in err and err.count("\n") == 1
    code, _, err = run(["user", "add", "bob", "--role", "viewer", "--queue-role", "nopattern", "--password-stdin",
                        *f], capsys, monkeypatch, f"{PASSWORD}\n")
    assert code == 2 and "PATTERN=ROLE" in err and UsersFile(path).get("bob") is None
    assert run(["user", "queue-role", "alice", "--clear", *f], capsys, monkeypatch)[0] == 0
    assert UsersFile(path).get("alice").queues == ()  # type: ignore[union-attr]
    recs = AuditLog(redis.Redis.from_url(redis_url)).list().records
    assert any(x.action == "user.queue_role" and "billing:eu=admin" in (x.detail or "") for x in recs)
    path.write_text(path.read_text().replace('role = "viewer"', 'role = "viewer"\nqueues = { "a" = "boss" }'))
    with pytest.raises(UsersFileError, match="unknown role 'boss'"):
        UsersFile(path).get("alice")


def test_a_user_command_that_changes_nothing_writes_and_records_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, r: redis.Redis,
        redis_url: str) -> None:
    path = tmp_path / "users.toml"
    f = ["--users", str(path), "--redis-url", redis_url]
    assert run(["user", "add", "alice", "--role", "admin", "--queue-role", "hr:*=none", "--password-stdin", *f],
               capsys, monkeypatch, f"alice-{PASSWORD}\n")[0] == 0
    before, records = path.stat().st_mtime_ns, r.xlen(STREAM)
    assert run(["user", "queue-role", "alice", *f], capsys, monkeypatch) == \
        (0, "alice (admin) queue roles: hr:*=none\n", "")
    assert run(["user", "queue-role", "alice", "hr:*=none", *f], capsys, monkeypatch)[0] == 0  # the same again
    assert run(["user", "role", "alice", "admin", *f], capsys, monkeypatch) == (0, "alice is admin already\n", "")
    assert (path.stat().st_mtime_ns, r.xlen(STREAM)) == (before, records)
    # a real change is written and recorded
    code, out, _ = run(["user", "role", "alice", "viewer", *f], capsys, monkeypatch)
    assert code == 0 and out.startswith("alice is now viewer") and r.xlen(STREAM) == records + 1
