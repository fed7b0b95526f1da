"""CLI messages say what was wrong in the CLI's terms (its flags, the value at fault), and options that cannot go
together are refused (exit 2) instead of one being silently ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynqpy import Client, Task
from asynqpy.cli import main


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_messages_name_the_flag_and_the_fault(capsys: pytest.CaptureFixture[str], redis_url: str) -> None:
    with Client(redis_url) as c:
        c.enqueue(Task("t", b""), queue="mail")
    url = ["--redis-url", redis_url]
    assert cli(capsys, "limit", "set", "x", "--rate", "0/s", *url) == \
        (2, "", "asynqpy: rate '0/s': must be above 0 (for no rate limit, leave --rate out)\n")
    assert cli(capsys, "queue", "rm", "mail", *url) == \
        (1, "", "asynqpy: queue 'mail' is not empty: --force deletes it with its tasks\n")
    with pytest.raises(SystemExit):
        main(["queue", "limit", "mail", "--max-latency", "0s", *url])
    assert "error: argument --max-latency: must be above 0, got '0s'" in capsys.readouterr().err


def test_the_librarys_queue_limit_check_says_which_value(redis_url: str) -> None:
    from inspector.api import Inspector

    with Inspector(redis_url) as insp, pytest.raises(ValueError, match=r"^max_size must be at least 1, got -5$"):
        insp.set_queue_limit("mail", max_size=-5, max_latency=60)


@pytest.mark.parametrize(("argv", "says"), [
    (["queue", "limit", "mail", "--max-size", "5", "--clear"], "asynqpy: --clear removes the limit; "),
    (["audit", "ls", "--since", "2027-01-01", "--until", "2026-01-01"],
     "asynqpy: --since 2027-01-01 is after --until 2026-01-01"),
    (["audit", "refused", "--since", "2027-01-01", "--until", "2026-01-01"], "asynqpy: --since 2027-01-01 is after"),
    (["task", "ls", "mail", "--no-redact", "--redaction", "rules.toml"], "asynqpy: --redaction FILE masks output; "),
])
def test_options_that_do_not_go_together_are_refused(capsys: pytest.CaptureFixture[str], redis_url: str,
                                                     argv: list[str], says: str) -> None:
    code, out, err = cli(capsys, *argv, "--redis-url", redis_url)
    assert (code, out) == (2, "") and err.startswith(says) and err.count("\n") == 1, (code, err)


def test_a_redaction_file_implies_redact(capsys: pytest.CaptureFixture[str], redis_url: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNQPY_REDACT", raising=False)
    monkeypatch.delenv("ASYNQPY_REDACTION", raising=False)
    with Client(redis_url) as c:
        c.enqueue(Task("t", b'{"ssn": "123-45-6789", "n": 1}'), queue="mail", task_id="a")
    rules = tmp_path / "rules.toml"
    rules.write_text('[redaction]\nkeys = ["ssn"]\n')
    code, out, _ = cli(capsys, "task", "info", "mail", "a", "--redaction", str(rules), "--redis-url", redis_url)
    assert code == 0 and "123-45-6789" not in out and "[redacted]" in out, out
    code, out, err = cli(capsys, "task", "info", "mail", "a", "--redaction", str(tmp_path / "missing.toml"),
                         "--redis-url", redis_url)
    assert (code, out) == (2, "") and "missing.toml" in err and err.count("\n") == 1, err


def test_an_error_line_echoes_a_huge_value_shortened(capsys: pytest.CaptureFixture[str], redis_url: str) -> None:
    huge = "x" * 100_000
    with Client(redis_url) as c:
        c.enqueue(Task("t", b""), queue="mail")
    for argv in (["task", "info", "mail", huge], ["queue", "pause", huge], ["task", "archive", "mail", huge, "-y"]):
        code, out, err = cli(capsys, *argv, "--redis-url", redis_url)
        assert code in (1, 2) and out == "" and err.count("\n") == 1, (argv, code)
        assert len(err) < 400 and "x" * 79 + "..." in err and "x" * 81 not in err, (argv, err[:300])
    with pytest.raises(SystemExit):  # argparse's own errors too
        main(["task", "ls", "mail", "--state", huge, "--redis-url", redis_url])
    err = capsys.readouterr().err
    assert len(err) < 2000 and "x" * 79 + "..." in err and "x" * 81 not in err, err[-300:]
