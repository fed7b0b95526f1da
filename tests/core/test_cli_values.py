"""Every numeric, address and port option of `asynqpy` is checked by argparse (asynqpy.cliargs): a bad value is
the command's usage and one line naming the option, exit 2, never a traceback from deeper down."""

from __future__ import annotations

import socket

import pytest

from asynqpy.cli import main

NOWHERE = ["--redis-url", "redis://127.0.0.1:1/0"]  # nothing may get as far as connecting


def usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The `error:` line argparse printed for argv (asserting exit 2 and no traceback)."""
    with pytest.raises(SystemExit) as exit:
        main([*argv, *NOWHERE])
    err = capsys.readouterr().err
    assert exit.value.code == 2, err
    assert "Traceback" not in err and err.startswith("usage: asynqpy "), err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize(("argv", "option"), [
    (["task", "run", "mail", "--all", "--state", "retry", "--rate", "-1", "--yes"], "--rate"),
    (["task", "run", "mail", "--all", "--state", "retry", "--rate", "inf", "--yes"], "--rate"),
    (["task", "archive", "mail", "--all", "--state", "retry", "--rate", "nan", "--yes"], "--rate"),
    (["task", "find", "mail", "type:x", "--archive", "--rate", "-1"], "--rate"),
    (["task", "find", "mail", "type:x", "--archive", "--rate", "inf"], "--rate"),
    (["task", "find", "mail", "type:x", "--limit", "0"], "--limit"),
    (["task", "find", "mail", "type:x", "--max-scan", "0"], "--max-scan"),
    (["task", "ls", "mail", "--size", "100000000"], "--size"),
    (["task", "ls", "mail", "--size", "0"], "--size"),
    (["task", "enqueue", "t", "--max-retry", "-1"], "--max-retry"),
    (["queue", "history", "mail", "--days", "99999999"], "--days"),
    (["queue", "limit", "mail", "--max-size", "-5"], "--max-size"),
    (["limit", "set", "x", "--concurrency", "0"], "--concurrency"),
    (["limit", "set", "x", "--rate", "1/s", "--burst", "inf"], "--burst"),
    (["errors", "--limit", "0"], "--limit"),
    (["errors", "--limit", "5000"], "--limit"),
    (["audit", "ls", "--limit", "0"], "--limit"),
    (["web", "--trusted-proxy", "not-an-ip"], "--trusted-proxy"),
    (["web", "--workers", "0"], "--workers"),
    (["redis", "--port", "99999"], "--port"),
    (["redis", "--port", "-1"], "--port"),
    (["dev", "--rate", "0"], "--rate"),
    (["dev", "--web-port", "70000"], "--web-port"),
    (["worker", "app:mux", "--concurrency", "0"], "--concurrency"),
    (["worker", "app:mux", "--shutdown-timeout", "nan"], "--shutdown-timeout"),
    (["worker", "app:mux", "--metrics-port", "65536"], "--metrics-port"),
    (["scheduler", "--config", "x.yaml", "--sync-interval", "-5"], "--sync-interval"),
    (["exporter", "--max-age", "inf"], "--max-age"),
])
def test_a_bad_value_is_a_usage_error_naming_the_option(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                        option: str) -> None:
    line = usage_error(capsys, argv)
    assert f"error: argument {option}: " in line, line


def test_every_job_rate_has_one_validator(capsys: pytest.CaptureFixture[str]) -> None:
    run = usage_error(capsys, ["task", "run", "mail", "--all", "--state", "retry", "--rate", "inf", "--yes"])
    find = usage_error(capsys, ["task", "find", "mail", "type:x", "--run", "--rate", "inf"])
    assert run.split("argument --rate: ")[1] == find.split("argument --rate: ")[1] == \
        "expected a finite number, got 'inf'"


def test_a_port_in_use_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["exporter", "--bind", f"127.0.0.1:{port}", *NOWHERE])
    err = capsys.readouterr().err
    assert code == 1 and err == f"asynqpy: cannot listen on 127.0.0.1:{port}: address already in use\n", err


def test_a_bad_dashboard_setting_from_the_environment_is_one_line_and_exit_2(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNQPY_TRUSTED_PROXIES", "not-an-ip")  # (the flag is argparse's; the variable was not)
    code = main(["web", "--bind", "127.0.0.1:1", *NOWHERE])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert err == "asynqpy: dashboard settings: trusted proxy 'not-an-ip' is not an IP address or network\n", err
