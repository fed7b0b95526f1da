"""Defect 13: no password of a Redis URL is ever printed, a Sentinel URL's sentinel_password= included: not by
the CLI's "cannot reach" message, not by the exporter's start line."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from asynqpy.clicommon import report
from asynqpy.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
ASYNQPY = [sys.executable, "-m", "asynqpy.cli"]


def _sentinel_url() -> str:
    return f"redis+sentinel://:userpw@127.0.0.1:{free_port()}/mymaster/0?sentinel_password=sentinelpw"


def test_stats_against_an_unreachable_sentinel_prints_no_password() -> None:
    p = subprocess.run([*ASYNQPY, "stats", "--redis-url", _sentinel_url()], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode == 1 and "cannot reach Redis" in p.stderr, out
    assert "sentinelpw" not in out and "userpw" not in out
    assert "sentinel_password=***" in p.stderr


def test_a_raw_connection_error_is_reported_with_the_one_masker(capsys: pytest.CaptureFixture[str]) -> None:
    """What a plugin command lets through (redis-py's own error) is reported with the URL masked alike."""
    args = argparse.Namespace(redis_url=_sentinel_url(), debug=False)
    assert report(redis.ConnectionError("Connection refused"), args) == 1
    err = capsys.readouterr().err
    assert "cannot reach Redis at redis+sentinel://:***@" in err and "sentinel_password=***" in err
    assert "sentinelpw" not in err and "userpw" not in err


def test_the_exporters_start_line_prints_no_sentinel_password() -> None:
    p = subprocess.Popen([*ASYNQPY, "exporter", "--bind", "127.0.0.1:0", "--redis-url", _sentinel_url()], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert p.stdout is not None
        lines = []
        for line in p.stdout:
            lines.append(line)
            if "serving http" in line:
                break
    finally:
        p.terminate()
        p.wait(20)
    start = lines[-1]
    assert "serving http" in start and "sentinel_password=***" in start, lines
    assert not any("sentinelpw" in ln or "userpw" in ln for ln in lines)


def test_any_redis_error_a_command_lets_through_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(redis_url="redis://:pw@127.0.0.1:6379/0", debug=False)
    assert report(redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
                  args) == 1
    err = capsys.readouterr().err
    assert err.startswith("asynqpy: Redis at redis://:***@127.0.0.1:6379/0 refused a command: WRONGTYPE")
    assert "Traceback" not in err and "pw@" not in err
