"""Start-up: `import asynqpy`, `asynqpy --version` and `asynqpy worker` load only what they need (no web,
metrics, cluster or typed layers, no plug-in scan), while the public names and the plug-in commands still work.
Each check runs in a fresh interpreter and looks at sys.modules (speed itself is measured in bench/)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import asynqpy
from asynqpy.cli import command_word
from tests.core.procs import run

# Never needed to import asynqpy or print its version.
HEAVY = ["redis", "redis.cluster", "google.protobuf", "flask", "prometheus_client", "pydantic", "webui",
         "inspector", "exporter", "asynqpy.scheduler", "asynqpy.metrics", "asynqpy.client", "asynqpy.server",
         "importlib.metadata"]
# Not needed by a worker without --metrics-port (redis-py itself, with its cluster module, is).
NOT_FOR_WORKER = ["flask", "prometheus_client", "pydantic", "webui", "inspector", "exporter",
                  "asynqpy.scheduler", "asynqpy.metrics"]


def modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running code (which must not print)."""
    out = subprocess.run([sys.executable, "-c", code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, timeout=60, cwd=Path(__file__).parent)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_import_asynqpy_loads_none_of_the_heavy_layers() -> None:
    loaded = modules_after("import asynqpy")
    assert [m for m in HEAVY if m in loaded] == []


def test_version_needs_no_plugins_and_no_redis() -> None:
    loaded = modules_after("from asynqpy.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass")
    assert [m for m in HEAVY if m in loaded] == []


def test_the_asynqpy_command_prints_the_installed_version() -> None:
    script = Path(sys.executable).with_name("asynqpy")
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "asynqpy.cli"]
    out = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, f"asynqpy {version('asynqpy')}")
    assert asynqpy.__version__ == version("asynqpy")  # the fast --version reads __version__: they must agree


def test_worker_start_loads_no_web_metrics_or_plugin_layers() -> None:
    # The mux cannot be imported, so the command stops right after what every worker start-up imports.
    loaded = modules_after("from asynqpy.cli import main\nimport contextlib, io\n"
                           "with contextlib.redirect_stderr(io.StringIO()):\n"
                           "    assert main(['worker', 'no_such_module_here:mux']) == 2")
    assert "asynqpy.supervisor" in loaded and "asynqpy.loader" in loaded  # it did get that far
    assert [m for m in NOT_FOR_WORKER if m in loaded] == []


def test_the_public_names_load_on_first_use() -> None:
    loaded = modules_after("from asynqpy import AsyncClient, Client, Server, ServeMux, Task, TypedTask\n"
                           "import asynqpy\nassert asynqpy.Client is Client and asynqpy.TaskState.PENDING")
    assert {"asynqpy.client", "asynqpy.server", "asynqpy.typed"} <= loaded
    for name in asynqpy.__all__:
        assert getattr(asynqpy, name) is not None
        assert name in dir(asynqpy)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        asynqpy.nope  # noqa: B018


def test_plugin_commands_are_still_offered(capsys: pytest.CaptureFixture[str]) -> None:
    from asynqpy.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    assert "stats" in capsys.readouterr().out  # the inspector's command, from its entry point
    with pytest.raises(SystemExit):
        main(["--redis-url", "redis://x", "stats", "--help"])
    assert "usage: asynqpy stats" in capsys.readouterr().out


def test_a_plugin_command_loads_only_its_own_plugin() -> None:
    # `asynqpy stats` imports the registrar whose entry point is named `stats` (the Inspector's) and none of the
    # others (the dashboard's `user` and `web`, the exporter, the scheduler), nor dev's add-ons: ~0.15 s of
    # start-up (bench/README.md). Nor does it hash a password (the dashboard's login check, ~70 ms).
    loaded = modules_after("from asynqpy.cli import main\nimport contextlib, io\n"
                           "with contextlib.redirect_stdout(io.StringIO()):\n"
                           "    try:\n        main(['stats', '--help'])\n    except SystemExit:\n        pass\n")
    assert "inspector.cli" in loaded  # the parser was built
    others = ("webui", "exporter", "asynqpy.scheduler", "prometheus_client", "flask", "inspector.auditcli")
    assert sorted(m for m in loaded if m.startswith(others)) == []


def test_the_dashboard_user_command_hashes_nothing_to_start() -> None:
    loaded = modules_after("from asynqpy.cli import main\nimport contextlib, io\n"
                           "with contextlib.redirect_stdout(io.StringIO()):\n"
                           "    try:\n        main(['user', '--help'])\n    except SystemExit:\n        pass\n"
                           "import webui.users\nassert webui.users._dummy_hash.cache_info().currsize == 0")
    assert "webui.usercli" in loaded
    assert [m for m in ("flask", "werkzeug", "webui.app", "inspector.cli") if m in loaded] == []


PLUGIN = """
import sys

def _run(args):
    print(args.command, "inspector.cli" in sys.modules, "fakecmd_extra" in sys.modules)
    return 0

def register(sub):
    for name in ("hello", "bye"):
        sub.add_parser(name, help="say " + name).set_defaults(func=_run)
"""


def test_a_third_party_plugin_is_found_whatever_its_entry_points_are_named(tmp_path: Path) -> None:
    # hello and bye come from one registrar, with an entry point named after hello only; greet's entry point is
    # named after no command. Naming hello loads that registrar alone; bye and greet are found by loading all.
    (tmp_path / "fakecmd.py").write_text(PLUGIN)
    (tmp_path / "fakecmd_extra.py").write_text(PLUGIN.replace('("hello", "bye")', '("greet",)'))
    meta = tmp_path / "fakecmd-1.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: fakecmd\nVersion: 1.0\n")
    (meta / "entry_points.txt").write_text("[asynqpy.commands]\nhello = fakecmd:register\n"
                                          "greetings = fakecmd_extra:register\n")
    seen = {}
    for command in ("hello", "bye", "greet"):
        res = run(command, PYTHONPATH_EXTRA=str(tmp_path))
        assert res.returncode == 0, res
        seen[command] = res.stdout.split()
    assert seen == {"hello": ["hello", "False", "False"], "bye": ["bye", "True", "True"],
                    "greet": ["greet", "True", "True"]}
    res = run("--help", PYTHONPATH_EXTRA=str(tmp_path))
    assert all(f"say {c}" in res.stdout for c in ("hello", "bye", "greet")) and "stats" in res.stdout, res


def test_the_dashboard_factory_loads_on_first_use() -> None:
    loaded = modules_after("import webui\nfrom webui import create_app\nfrom webui.app import create_app as made\n"
                           "assert create_app is made and webui.DEFAULTS is not None")
    assert {"flask", "webui.app"} <= loaded
    import webui

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        webui.nope  # noqa: B018


@pytest.mark.parametrize(("argv", "word"), [
    (["--version"], None), (["worker", "a:b"], "worker"), (["--redis-url", "redis://h", "stats"], "stats"),
    (["--redis-url=redis://h", "--json", "task", "ls"], "task"), (["-v", "dev"], "dev"), ([], None),
])
def test_command_word(argv: list[str], word: str | None) -> None:
    assert command_word(argv) == word


WORKER_GC = """
import gc, os, signal, sys
from asynqpy import Client, ReceivedTask, ServeMux, Server, Task
url, pre = sys.argv[1], sys.argv[2] == "pre"
if pre:
    gc.freeze()  # as a pre-fork parent would have
before = gc.get_freeze_count()
mux = ServeMux()
seen = []

@mux.handler("look")
async def look(task: ReceivedTask) -> None:
    seen.append(gc.get_freeze_count())
    os.kill(os.getpid(), signal.SIGTERM)

Client(url).enqueue(Task("look", b""), queue="gc-freeze")
Server(url, queues={"gc-freeze": 1}, shutdown_timeout=2).run(mux)
print(before, seen[0], gc.get_freeze_count())
"""


@pytest.mark.parametrize("pre", ["fresh", "pre"])
def test_a_started_worker_sets_its_start_up_objects_aside_from_the_collector(redis_url: str, pre: str) -> None:
    # Server.run() freezes what exists once it has started (a full collection then skips the ~46,000 objects of
    # start-up) and unfreezes them when it returns; a freeze made before it (a pre-fork parent's) is left alone.
    out = subprocess.run([sys.executable, "-c", WORKER_GC, redis_url, pre], capture_output=True, text=True,
                         timeout=60, cwd=Path(__file__).parent)
    assert out.returncode == 0, out.stderr
    before, serving, after = map(int, out.stdout.split())
    if pre == "fresh":
        assert before == 0 and serving > 10_000 and after == 0
    else:
        # (frozen objects may still be freed by their reference counts: the count only falls)
        assert before > 10_000 and serving <= before and 0 < after <= serving
