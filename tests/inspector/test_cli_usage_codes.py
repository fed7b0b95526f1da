"""A wrong value given to a command exits 2 (as argparse's own checks do), whichever layer finds it: a malformed
`task find` query, an option only valid with another, a value the library refuses; "not found" exits 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynqpy import Client, Task
from asynqpy.cli import main


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("query", "says"), [
    ("bogus:x", "bogus"), ("type:", "type"), ("age:>1y", "1y"), ("retried:>abc", "abc"), ('error:"unclosed', '"'),
])
def test_a_malformed_find_query_is_a_usage_error(capsys: pytest.CaptureFixture[str], redis_url: str, query: str,
                                                 says: str) -> None:
    with Client(redis_url) as c:
        c.enqueue(Task("t", b""), queue="mail")
    code, out, err = cli(capsys, "task", "find", "mail", query, "--redis-url", redis_url)
    assert code == 2 and out == "" and err.count("\n") == 1 and says in err, err


@pytest.mark.parametrize(("argv", "says"), [
    (["task", "ls", "mail", "--group", "g"], "asynqpy: --group goes with --state aggregating\n"),
    (["task", "ls", "mail", "--state", "aggregating"], "asynqpy: --state aggregating needs --group"),
    (["task", "search", "mail", "--state", "retry", "--group", "g"],
     "asynqpy: --group goes with --state aggregating\n"),
    (["task", "run", "mail", "--all", "--state", "pending", "--yes"],
     "asynqpy: cannot run all pending tasks: --state must be one of "),
    (["task", "archive", "mail", "--all", "--state", "retry", "--group", "g", "--yes"],
     "asynqpy: --group goes with --state aggregating\n"),
    (["queue", "info", ""], "asynqpy: "),
])
def test_options_checked_after_parsing_exit_2(capsys: pytest.CaptureFixture[str], redis_url: str, argv: list[str],
                                              says: str) -> None:
    with Client(redis_url) as c:
        c.enqueue(Task("t", b""), queue="mail")
    code, out, err = cli(capsys, *argv, "--redis-url", redis_url)
    assert code == 2 and out == "" and err.startswith(says) and err.count("\n") == 1, (code, err)


def test_no_such_user_is_exit_1_for_every_user_command(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    users = str(tmp_path / "users.toml")
    monkeypatch.setattr("sys.stdin", open("/dev/null"))  # noqa: SIM115 (closed with the test)
    for argv in (["rm", "nosuch"], ["role", "nosuch", "admin"], ["passwd", "nosuch", "--password-stdin"],
                 ["queue-role", "nosuch"]):
        code, _, err = cli(capsys, "user", *argv, "--users", users, "--redis-url", "redis://127.0.0.1:1/0")
        assert code == 1 and err == f"asynqpy: no user 'nosuch' in {users}\n", (argv, code, err)
