"""Exit codes as the README says: 2 for a usage error (with the usage of the command given), 1 at run time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.procs import run


@pytest.mark.parametrize(("argv", "usage"), [
    (["stats", "--bogus"], "usage: asynqpy stats "),
    (["task", "ls", "default", "--bogus"], "usage: asynqpy task ls "),
    (["worker", "app.tasks:mux", "--no-such-flag"], "usage: asynqpy worker "),
])
def test_a_wrong_flag_shows_the_commands_usage(argv: list[str], usage: str) -> None:
    res = run(*argv)
    assert res.returncode == 2, res
    assert res.stderr.startswith(usage) and "unrecognized arguments: --" in res.stderr, res.stderr


def test_bad_queues_is_a_usage_error() -> None:
    res = run("worker", "app.tasks:mux", "--queues", "critical=high")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res


@pytest.mark.parametrize("config", ["configs: [\n", 'configs:\n  - cronspec: "every day"\n    task_type: x\n'])
def test_a_bad_scheduler_config_is_one_message_and_exit_2(tmp_path: Path, config: str) -> None:
    (tmp_path / "cron.yaml").write_text(config)
    res = run("scheduler", "--config", "cron.yaml", "--redis-url", "redis://127.0.0.1:1/0", cwd=tmp_path)
    assert res.returncode == 2, res
    assert res.stderr.startswith("asynqpy: cannot start: cron.yaml: ") and res.stderr.count("\n") == 1, res.stderr
    assert "keeping the 0 entries" not in res.stderr


def test_an_unreachable_redis_is_a_runtime_failure(tmp_path: Path) -> None:
    res = run("stats", "--redis-url", "redis://127.0.0.1:1/0", cwd=tmp_path)
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res
