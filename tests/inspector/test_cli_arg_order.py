"""The ids (and other repeatable last arguments) of a command may follow its options: `task archive default --yes
id` works like `task archive default id --yes`; a word that fits nowhere is still the command's usage error."""

from __future__ import annotations

import json

import pytest

from asynqpy.cli import main


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_task_ids_after_options(capsys: pytest.CaptureFixture[str], redis_url: str,
                                one_of_each: dict[str, str]) -> None:
    url = ["--redis-url", redis_url]
    assert cli(capsys, "task", "archive", "q", "--yes", "pending", *url) == (0, "pending: archived\n", "")
    assert cli(capsys, "task", "delete", "q", "-y", "pending2", *url) == (0, "pending2: deleted\n", "")
    code, out, _ = cli(capsys, "task", "run", "q", "--json", "retry", "scheduled", *url)
    assert code == 0 and json.loads(out)["succeeded"] == ["retry", "scheduled"]
    # --rate is for --all: said as such, not as "unrecognized arguments"
    code, out, err = cli(capsys, "task", "run", "q", "--rate", "5", "archived", *url)
    assert (code, out, err) == (2, "", "asynqpy: --state, --group and --rate go with --all\n")
    # an option nothing knows is still the command's usage error, wherever it is
    with pytest.raises(SystemExit) as exit:
        main(["task", "archive", "q", "--yes", "id1", "--bogus"])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and err.startswith("usage: asynqpy task archive ")
    assert err.endswith("error: unrecognized arguments: id1 --bogus\n"), err


def test_queues_of_errors_after_options(capsys: pytest.CaptureFixture[str], redis_url: str,
                                        one_of_each: dict[str, str]) -> None:
    code, out, _ = cli(capsys, "errors", "--limit", "5", "q", "--json", "--redis-url", redis_url)
    assert code == 0 and {g["queue"] for g in json.loads(out)["groups"]} == {"q"}
    code, out, err = cli(capsys, "errors", "q", "--limit", "5", "nosuch", "--redis-url", redis_url)
    assert code == 1 and out == "" and "queue 'nosuch' does not exist" in err, err

