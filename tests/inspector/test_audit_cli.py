"""`asynqpy audit verify` as an operator runs it, after each kind of tampering done in Redis; and every CLI line
shows control characters from the data as visible escapes (a hostile queue or user name cannot drive the
terminal)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import redis

from asynqpy import Client, Task
from asynqpy.cli import main
from inspector.audit import HEAD, STREAM, AuditLog, canonical

HOSTILE = "ann\x1b[2J\x1b]0;owned\x07\x1b]52;c;SGVsbG8=\x07\x9b31m\u202e"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def filled(r: redis.Redis, tmp_path: Path) -> list[str]:
    log = AuditLog.open(r, tmp_path, writer=True)
    return [log.append("queue.pause", outcome="ok", user="ann", role="operator", queue=f"q{i}").id for i in range(8)]


def _verify(redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, out, err = cli(["audit", "verify", "--redis-url", redis_url, "--audit-dir", str(tmp_path)], capsys)
    return code, out + err


def test_intact(filled: list[str], redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _verify(redis_url, tmp_path, capsys)
    assert code == 0 and "audit chain intact: 8 record(s), seq 1..8" in out and "no anchor" not in out


def test_oldest_record_deleted(filled: list[str], r: redis.Redis, redis_url: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    r.xdel(STREAM, filled[0])
    code, out = _verify(redis_url, tmp_path, capsys)
    assert code == 1 and "BROKEN at record seq 2" in out and "truncated" in out and "without a checkpoint" in out


def test_trimmed_to_five(filled: list[str], r: redis.Redis, redis_url: str, tmp_path: Path,
                         capsys: pytest.CaptureFixture[str]) -> None:
    r.xtrim(STREAM, maxlen=5, approximate=False)
    code, out = _verify(redis_url, tmp_path, capsys)
    assert code == 1 and "truncated" in out and "starts at seq 4" in out


def test_stream_and_head_deleted(filled: list[str], r: redis.Redis, redis_url: str, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    r.delete(STREAM, HEAD)
    code, out = _verify(redis_url, tmp_path, capsys)
    assert code == 1 and "emptied" in out and "reached seq 8" in out and "empty" not in out.split(":")[0]


def test_newest_deleted_and_head_rewound(filled: list[str], r: redis.Redis, redis_url: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    [(_, fields)] = r.xrange(STREAM, filled[-2], filled[-2])
    r.xdel(STREAM, filled[-1])
    r.hset(HEAD, mapping={"mac": json.loads(fields[b"r"])["mac"], "seq": 7, "id": filled[-2]})
    code, out = _verify(redis_url, tmp_path, capsys)
    assert code == 1 and "rewound" in out and "newest 1 record(s) were removed" in out


def test_edited_with_every_later_hash_recomputed(filled: list[str], r: redis.Redis, redis_url: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    entries = [(sid, json.loads(f[b"r"])) for sid, f in r.xrange(STREAM)]
    r.delete(STREAM)
    prev = ""
    for n, (sid, rec) in enumerate(entries):
        if n == 3:
            rec["user"] = "someone-else"
        body = {k: v for k, v in rec.items() if k != "mac"} | ({"prev": prev} if n >= 3 else {})
        rec = body | {"mac": hashlib.sha256(canonical(body).encode()).hexdigest() if n >= 3 else rec["mac"]}
        prev = rec["mac"]
        r.xadd(STREAM, {"r": canonical(rec)}, id=sid)
    r.hset(HEAD, "mac", prev)
    code, out = _verify(redis_url, tmp_path, capsys)
    assert code == 1 and "BROKEN at record seq 4" in out and "edited" in out


def test_forged_record_appended(filled: list[str], r: redis.Redis, redis_url: str, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    [(_, fields)] = r.xrange(STREAM, filled[-1], filled[-1])
    body = {k: v for k, v in json.loads(fields[b"r"]).items() if k != "mac"} | {
        "seq": 9, "prev": json.loads(fields[b"r"])["mac"], "action": "queue.resume"}
    mac = hashlib.sha256(canonical(body).encode()).hexdigest()
    sid = r.xadd(STREAM, {"r": canonical(body | {"mac": mac})})
    r.hset(HEAD, mapping={"mac": mac, "seq": 9, "id": sid})
    code, out = _verify(redis_url, tmp_path, capsys)
    assert code == 1 and "BROKEN at record seq 9" in out and "without the audit key" in out


def test_verify_without_the_key_says_so(filled: list[str], redis_url: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _verify(redis_url, tmp_path / "elsewhere", capsys)
    assert code == 1 and "no audit key" in out and "ASYNQPY_AUDIT_KEY" in out


def _clean(text: str) -> None:
    assert not any(c in text for c in RAW), repr(text)


def test_audit_ls_and_refused_show_control_characters_escaped(r: redis.Redis, redis_url: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from inspector.auditrefused import RefusedLog

    AuditLog.open(r, tmp_path, writer=True).append("queue.pause", outcome="ok", user=HOSTILE, queue=HOSTILE,
                                                   detail=HOSTILE)
    RefusedLog(r).count("login.failed", outcome="failed", user=HOSTILE, addr="10.0.0.9", detail=HOSTILE)
    for sub in ("ls", "refused"):
        code, out, err = cli(["audit", sub, "--redis-url", redis_url], capsys)
        assert code == 0
        _clean(out + err)
        assert "ann\\u001b[2J\\u001b]0;owned\\u0007" in out and "\\u009b31m\\u202e" in out
        code, out, _ = cli(["audit", sub, "--json", "--redis-url", redis_url], capsys)
        _clean(out)
        assert json.loads(out.splitlines()[0])["user"] == HOSTILE  # the JSON still carries the exact name


def test_stats_and_queue_commands_show_a_hostile_queue_name_escaped(redis_url: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    queue = "mail\x1b[2J\x1b]52;c;SGVsbG8=\x07"
    with Client(redis_url) as c:
        info: Any = c.enqueue(Task("email:send", b"{}"), queue=queue)
    for args, shown in ((["stats"], True), (["queue", "ls"], True), (["queue", "info", queue], True),
                        (["task", "ls", queue], False), (["task", "info", queue, info.id], True),
                        (["task", "search", queue, "--text", "x"], False), (["queue", "history", queue], False)):
        code, out, err = cli([*args, "--redis-url", redis_url], capsys)
        _clean(out + err)
        assert code == 0 and ("mail\\u001b[2J\\u001b]52;c;SGVsbG8=\\u0007" in out or not shown), (args, out)
    code, out, err = cli(["queue", "info", "nope\x1b[2J", "--redis-url", redis_url], capsys)
    _clean(out + err)
    assert code == 1 and "nope" in err


def test_verify_finds_the_dev_servers_audit_key_as_ls_finds_its_redis(r: redis.Redis, redis_url: str,
                                                                     tmp_path: Path) -> None:
    from asynqpy.devstate import StateDir
    from tests.core.procs import run

    state = StateDir(tmp_path, "dev")  # as `asynqpy dev` leaves it: locked, its URL published, the dashboard's key
    state.lock()
    try:
        state.publish(redis_url)
        log = AuditLog.open(r, state.path, writer=True)
        for i in range(3):
            log.append("queue.pause", outcome="ok", user="ann", role="operator", queue=f"q{i}")
        below = tmp_path / "src"
        below.mkdir()
        assert "q2" in run("audit", "ls", cwd=below).stdout
        res = run("audit", "verify", cwd=below)
        assert res.returncode == 0 and res.stdout.startswith("audit chain intact: 3 record(s)"), res
    finally:
        state.unlock()


def test_ls_and_refused_print_newest_last_in_text_and_json_alike(filled: list[str], r: redis.Redis, redis_url: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--json lists in the text's order (oldest first, newest last), and --limit keeps the newest N in both."""
    u = ["--redis-url", redis_url]
    _, text, _ = cli(["audit", "ls", *u], capsys)
    assert [line.split()[2] for line in text.splitlines()] == [f"#{n}" for n in range(1, 9)]
    _, out, _ = cli(["audit", "ls", "--json", *u], capsys)
    assert [json.loads(line)["seq"] for line in out.splitlines()] == list(range(1, 9))
    _, text, _ = cli(["audit", "ls", "--limit", "3", *u], capsys)
    assert [line.split()[2] for line in text.splitlines()] == ["#6", "#7", "#8"]
    _, out, _ = cli(["audit", "ls", "--limit", "3", "--json", *u], capsys)
    assert [json.loads(line)["queue"] for line in out.splitlines()] == ["q5", "q6", "q7"]

    from inspector.auditrefused import RefusedLog

    for n, user in enumerate(("ann", "bob", "cy")):
        RefusedLog(r, clock=lambda n=n: 1_800_000_000.0 + 60 * n).count("login.failed", outcome="failed", user=user)
    _, text, _ = cli(["audit", "refused", "--limit", "2", *u], capsys)
    assert [line.split()[3] for line in text.splitlines()] == ["bob", "cy"]
    _, out, _ = cli(["audit", "refused", "--limit", "2", "--json", *u], capsys)
    assert [json.loads(line)["user"] for line in out.splitlines()] == ["bob", "cy"]
