"""The Inspector's CLI commands: tables by default, --json for scripts, one-line errors with exit 1."""

from __future__ import annotations

import json

import pytest

from asynqpy import Client, Task
from asynqpy.embedded import free_port
from inspector.cli import main
from tests.inspector.worker import Worker


def cli(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--redis-url", url])
    out, err = capsys.readouterr()
    return code, out, err


def test_stats_and_queue_commands(capsys: pytest.CaptureFixture[str], redis_url: str,
                                  one_of_each: dict[str, str]) -> None:
    code, out, _ = cli(capsys, redis_url, "stats")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["QUEUE", "STATE", "SIZE"]
    assert out.splitlines()[1].split()[:3] == ["q", "run", "8"]
    code, out, _ = cli(capsys, redis_url, "stats", "--json")
    data = json.loads(out)
    assert code == 0 and data["queues"][0]["pending"] == 2 and "warnings" in data["redis"]
    assert cli(capsys, redis_url, "queue", "ls")[1].split()[5:9] == ["q", "run", "8", "2"]
    code, out, _ = cli(capsys, redis_url, "queue", "info", "q")
    assert code == 0 and "retry:" in out and "no live server consumes" in out
    code, out, _ = cli(capsys, redis_url, "queue", "history", "q", "--days", "2", "--json")
    assert [d["processed"] for d in json.loads(out)] == [4, 0]
    assert cli(capsys, redis_url, "queue", "pause", "q")[:2] == (0, "queue 'q' paused\n")
    # idempotent for scripts: says so, exit 0
    assert cli(capsys, redis_url, "queue", "pause", "q")[:2] == (0, "queue 'q' is already paused\n")
    assert cli(capsys, redis_url, "queue", "unpause", "q")[:2] == (0, "queue 'q' resumed\n")
    code, out, _ = cli(capsys, redis_url, "queue", "unpause", "q", "--json")
    assert code == 0 and json.loads(out) == {"queue": "q", "paused": False, "changed": False}
    for verb in ("pause", "unpause"):
        code, out, err = cli(capsys, redis_url, "queue", verb, "nosuchq")
        assert code == 1 and out == "" and err.startswith("asynqpy: queue 'nosuchq' not found") and err.count("\n") == 1


def test_task_listing_info_search_explain(capsys: pytest.CaptureFixture[str], redis_url: str,
                                          one_of_each: dict[str, str]) -> None:
    code, out, _ = cli(capsys, redis_url, "task", "ls", "q", "--state", "retry")
    assert code == 0 and "boom: try again" in out and "page 1 of 1 (1 retry task)" in out
    code, out, _ = cli(capsys, redis_url, "task", "ls", "q", "--json")
    assert [t["info"]["id"] for t in json.loads(out)["tasks"]] == ["pending", "pending2"]
    code, out, _ = cli(capsys, redis_url, "task", "info", "q", "pending")
    assert code == 0 and '"n": 1' in out and "payload (json" in out
    code, out, _ = cli(capsys, redis_url, "task", "search", "q", "--state", "archived", "--error", "FATAL")
    assert code == 0 and "archived" in out.splitlines()[1] and "the end was reached" in out
    code, out, _ = cli(capsys, redis_url, "task", "explain", "q", "retry", "--json")
    assert code == 0 and json.loads(out)["state"] == "retry"
    code, out, err = cli(capsys, redis_url, "task", "explain", "q", "no-such-id")
    assert code == 1 and out == "" and err.startswith("asynqpy: no task 'no-such-id' in queue 'q'") and \
        err.count("\n") == 1, err
    code, out, _ = cli(capsys, redis_url, "task", "ls", "q", "--state", "active")
    assert code == 0 and "(1 active task)" in out


def test_task_actions(capsys: pytest.CaptureFixture[str], redis_url: str, one_of_each: dict[str, str],
                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli(capsys, redis_url, "task", "run", "q", "retry")[1] == "retry: moved to pending\n"
    code, _, err = cli(capsys, redis_url, "task", "delete", "q", "active")
    assert code == 1 and err.count("\n") == 1 and "active" in err
    code, out, _ = cli(capsys, redis_url, "task", "archive", "q", "pending", "nope")
    assert code == 1 and "pending: archived" in out and "nope: failed" in out
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    code, out, err = cli(capsys, redis_url, "task", "delete", "q", "--all", "--state", "archived")
    assert (code, out) == (1, "") and err == "delete all 2 archived tasks in queue 'q'? [y/N] asynqpy: aborted\n"
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    code, out, _ = cli(capsys, redis_url, "task", "delete", "q", "--all", "--state", "archived")
    assert code == 0 and out == "2 archived tasks deleted\n"
    code, out, _ = cli(capsys, redis_url, "task", "run", "q", "--all", "--state", "scheduled", "--yes", "--json")
    assert json.loads(out)["count"] == 1
    code, _, err = cli(capsys, redis_url, "task", "run", "q", "--all")
    assert code == 2 and err == "asynqpy: --all needs --state\n"
    assert cli(capsys, redis_url, "task", "cancel", "active")[0] == 0


def test_queue_rm(capsys: pytest.CaptureFixture[str], redis_url: str, client: Client, worker: Worker) -> None:
    client.enqueue(Task("t"), queue="q")
    code, _, err = cli(capsys, redis_url, "queue", "rm", "q")
    assert code == 1 and "not empty" in err
    assert cli(capsys, redis_url, "queue", "rm", "q", "--force", "--yes")[0] == 0
    code, _, err = cli(capsys, redis_url, "queue", "rm", "q")
    assert code == 1 and err == "asynqpy: queue 'q' does not exist\n"


def test_servers_and_cron_when_none(capsys: pytest.CaptureFixture[str], redis_url: str) -> None:
    assert cli(capsys, redis_url, "server", "ls")[1] == "no live servers\n"
    assert cli(capsys, redis_url, "cron", "ls")[1] == "no live scheduler entries\n"
    assert json.loads(cli(capsys, redis_url, "cron", "history", "e1", "--json")[1]) == []


def test_errors_are_one_line(capsys: pytest.CaptureFixture[str], redis_url: str) -> None:
    code, _, err = cli(capsys, f"redis://127.0.0.1:{free_port()}/0", "stats")
    assert code == 1 and err.startswith("asynqpy: cannot reach Redis at redis://127.0.0.1:") and \
        err.count("\n") == 1 and "(the URL was given with --redis-url)" in err
    code, _, err = cli(capsys, "nonsense://x", "queue", "ls")
    assert code == 2 and err.count("\n") == 1 and "nonsense://x" in err
    with pytest.raises(SystemExit) as exc:
        cli(capsys, redis_url, "task", "ls", "q", "--page", "0")
    assert exc.value.code == 2 and "argument --page: must be at least 1, got 0" in capsys.readouterr().err
    code, _, err = cli(capsys, redis_url, "task", "info", "nope", "x")
    assert code == 1 and err == "asynqpy: queue 'nope' does not exist\n"


def test_password_is_not_printed(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, f"redis://user:secret@127.0.0.1:{free_port()}/0", "stats")
    assert code == 1 and "secret" not in err and "user:***@" in err


def test_hooked_into_the_asynqpy_command(capsys: pytest.CaptureFixture[str], redis_url: str) -> None:
    from asynqpy.cli import main as asynqpy_main

    assert asynqpy_main(["queue", "ls", "--redis-url", redis_url]) == 0
    assert capsys.readouterr().out == "no queues\n"
