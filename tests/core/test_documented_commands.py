"""Every `asynqpy` command that the README, the `asynqpy dev`/`asynqpy redis` banners and the --help texts show
runs as shown, against the test server (placeholders such as `3f0c...` and QUEUE get real values)."""

from __future__ import annotations

import shlex
import signal
from pathlib import Path

import pytest

from asynqpy import Client, Task
from asynqpy.cli import build_parser
from asynqpy.clicommon import subparsers_of
from tests.core.procs import Proc, run
from tests.core.readme import README, asynqpy_commands, blocks, section

LONG_RUNNING = {"dev": "is running", "redis": "is running", "worker": "started: pid", "exporter": "serving http",
                "scheduler": "started: ", "web": "serving the dashboard"}
# What a long-running command gets besides what the docs show: a free port, and the test server.
EXTRA: dict[str, list[str]] = {"dev": ["--port", "0"], "redis": ["--port", "0"], "exporter": ["--bind", "127.0.0.1:0"],
                              "web": ["--bind", "127.0.0.1:0", "--workers", "1"]}
PLACEHOLDERS = {"QUEUE": "critical", "STATE": "archived", "COMMAND": "stats", "ENTRY_ID": "no-such-entry",
                "QUERY": "type:email:*"}


def help_texts() -> str:
    parser = build_parser()
    return "\n".join(p.format_help() for p in [parser, *subparsers_of(parser)])


def banners(tmp_path: Path) -> str:
    tmp_path.mkdir(exist_ok=True)
    out = []
    for cmd in (["dev", "--no-demo"], ["redis"]):
        with Proc.asynqpy(*cmd, "--port", "0", cwd=tmp_path) as p:
            out.append(p.wait_for("Try:"))
            assert p.stop()[0] == 0
    return "\n".join(out)


def test_the_sources_show_commands(tmp_path: Path) -> None:
    """The extraction below finds what it should (so the test that runs them cannot pass on nothing)."""
    assert "asynqpy task ls default --state archived" in asynqpy_commands(banners(tmp_path))
    assert "asynqpy task ls QUEUE --state STATE" in asynqpy_commands(help_texts())
    assert "asynqpy task explain critical 3f0c..." in asynqpy_commands(README.read_text())


def test_every_documented_command_runs_as_shown(redis_url: str, tmp_path: Path) -> None:
    commands = asynqpy_commands(README.read_text()) + asynqpy_commands(help_texts()) + \
        asynqpy_commands(banners(tmp_path / "banner"))
    commands = list(dict.fromkeys(commands))
    commands.sort(key=lambda c: c.split()[1] in LONG_RUNNING)  # the worker would take the tasks the others show
    client = Client(redis_url)
    task_id = client.enqueue(Task("email:welcome", b'{"to": "ada@example.com"}'), queue="critical").id
    for q in ("default", "low"):
        client.enqueue(Task("report:daily", b"acme"), queue=q)
    client.enqueue(Task("email:welcome", b'{"to": "bob@example.com"}'), queue="mail")  # the find examples' queue
    app = next(body for lang, body in blocks(section("Quick start")) if body.startswith("# app/tasks.py"))
    app += next(body for lang, body in blocks(section("Tasks as functions")) if body.startswith("# app/tasks.py"))
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "tasks.py").write_text(app)  # the module the worker commands name
    cron = section("Scheduler: periodic tasks")  # app/cron.py and cron.yaml, for the scheduler commands
    (tmp_path / "app" / "cron.py").write_text(next(b for lang, b in blocks(cron) if lang == "python"))
    (tmp_path / "cron.yaml").write_text(next(b for lang, b in blocks(cron) if lang == "yaml"))
    failures = []
    for command in commands:
        argv = shlex.split(command.replace("3f0c...", task_id))[1:]
        argv = [PLACEHOLDERS.get(a, a) for a in argv]
        kind = argv[0] if argv else ""
        if kind in LONG_RUNNING:
            extra = EXTRA.get(kind, []) + ([] if kind in ("dev", "redis") else ["--redis-url", redis_url])
            cwd = tmp_path / f"run-{kind}"
            cwd.mkdir(exist_ok=True)
            if kind in ("worker", "scheduler"):
                cwd = tmp_path
            with Proc.asynqpy(*argv, *extra, cwd=cwd) as p:
                try:
                    p.wait_for(LONG_RUNNING[kind])
                    code, out = p.stop(signal.SIGINT)
                except AssertionError as exc:
                    code, out = -1, str(exc)
            if code != 0 or "Traceback" in out:
                failures.append(f"{command}: exit {code}\n{out[-2000:]}")
            continue
        answer = "y\n"
        if argv[:2] in (["user", "add"], ["user", "passwd"]):  # they ask for a password at a prompt
            argv, answer = [*argv, "--password-stdin"], "correct horse battery\n"
        res = run(*argv, "--redis-url", redis_url, cwd=tmp_path, input=answer)
        if res.returncode != 0 or "Traceback" in res.stderr:
            failures.append(f"{command}: exit {res.returncode}\n{res.stdout[-1000:]}{res.stderr[-1000:]}")
    assert not failures, "\n\n".join(failures)
    assert len(commands) >= 15


@pytest.mark.parametrize("command", ["asynqpy task explain critical no-such-id", "asynqpy queue pause nosuchq"])
def test_a_command_that_fails_exits_non_zero(redis_url: str, command: str) -> None:
    Client(redis_url).enqueue(Task("t", b""), queue="critical")
    res = run(*shlex.split(command)[1:], "--redis-url", redis_url)
    assert res.returncode == 1, res
