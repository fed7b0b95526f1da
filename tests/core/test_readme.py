"""The README's Quick start, followed as written with real processes: the server, the worker, the producer twice."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
from pathlib import Path

import redis

from asynqpy.rdb import keys
from tests.core.procs import Proc, env, run
from tests.core.readme import blocks, section, shell_lines
from tests.helpers import wait_for


def quick_start() -> list[tuple[str, str]]:
    return blocks(section("Quick start"))


def test_quick_start_as_written_while_the_demo_runs(tmp_path: Path) -> None:
    """Each python block is the file its first line names; each shell line runs in order in one directory:
    long-running commands (the server, the worker) stay up while the next run. The setup line is what
    this test environment already did. The main job (`asynqpy dev`, demo producer and worker) runs in the same
    directory all along: neither worker may take the other's tasks (`handler not found`)."""
    running: list[Proc] = []
    outputs: list[str] = []
    dev = Proc.asynqpy("dev", "--port", "0", "--rate", "30", "--web-port", "0", cwd=tmp_path)
    dev.wait_for("asynqpy dev is running")
    dev_url = (tmp_path / ".asynqpy" / "dev" / "redis.url").read_text().strip()
    try:
        for lang, body in quick_start():
            if lang == "python":
                first = body.partition("\n")[0]
                assert first.startswith("# "), "a Quick start python block names its file on its first line"
                path = tmp_path / first[2:].strip()
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(body)
                continue
            for line in shell_lines(body):
                argv = shlex.split(line)
                if argv[0] == "./scripts/setup.sh":
                    continue  # done: this is the environment it made
                if argv[:2] == ["asynqpy", "redis"]:
                    p = Proc.asynqpy(*argv[1:], "--port", "0", cwd=tmp_path)  # any free port on a shared machine
                    p.wait_for("asynqpy redis is running")
                    running.append(p)
                elif argv[:2] == ["asynqpy", "worker"]:
                    p = Proc.asynqpy(*argv[1:], cwd=tmp_path)
                    p.wait_for("started: pid")
                    running.append(p)
                elif argv[0] == "python":
                    for _ in range(2):  # "run it twice"
                        res = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True,
                                             text=True, timeout=60, env=env())
                        assert res.returncode == 0 and "Traceback" not in res.stderr, res
                        outputs.append(res.stdout)
                else:
                    assert argv[0] == "asynqpy", f"the Quick start shows a command this test does not know: {line}"
                    res = run(*argv[1:], cwd=tmp_path)
                    assert res.returncode == 0, res
                    outputs.append(res.stdout)
        url = (tmp_path / ".asynqpy" / "redis" / "redis.url").read_text().strip()
        assert url != dev_url
        conn = redis.Redis.from_url(url)
        processed = lambda q: int(conn.get(keys.processed_total(q)) or 0)  # noqa: E731
        # two welcome emails; two reminders (5 s later) and the daily report, once: the second run was refused
        wait_for(lambda: processed("critical") == 2 and processed("default") == 3, timeout=30,
                 what="the worker to process the Quick start's tasks")
        assert int(conn.get(keys.failed_total("critical")) or 0) == 0
        assert int(conn.get(keys.failed_total("default")) or 0) == 0
        demo_errors = run("errors", "--json", "--redis-url", dev_url, cwd=tmp_path)
        assert demo_errors.returncode == 0 and "handler not found" not in demo_errors.stdout, demo_errors
    finally:
        stopped = [p.stop(signal.SIGINT) for p in reversed(running)]
        dev_code, dev_out = dev.stop(signal.SIGINT)
    assert dev_code == 0 and "Traceback" not in dev_out, dev_out
    worker_out = stopped[0][1]
    assert "handler not found" not in worker_out, worker_out
    assert "email:welcome to ada@example.com" in worker_out and "email:reminder to ada@example.com" in worker_out
    assert "daily report for acme" in worker_out
    assert all(code == 0 and "Traceback" not in out for code, out in stopped), stopped
    assert outputs[0].split()[1] == "pending"  # print(info.id, info.state)
    # "run it twice": refused the second time, though the worker had run the first report by then
    assert "already enqueued" not in outputs[0] and "today's report:daily is already enqueued" in outputs[1]
    assert any("QUEUE" in o and "critical" in o for o in outputs)  # asynqpy stats


def test_quick_start_producer_second_run_reports_the_duplicate(redis_url: str, tmp_path: Path) -> None:
    producer = next(body for lang, body in quick_start() if lang == "python" and body.startswith("# producer.py"))
    (tmp_path / "producer.py").write_text(producer)
    outs = [subprocess.run([sys.executable, "producer.py"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60, env=env(REDIS_URL=redis_url)) for _ in range(2)]
    assert [o.returncode for o in outs] == [0, 0], outs
    assert "already enqueued" not in outs[0].stdout and "report:daily is already enqueued" in outs[1].stdout
